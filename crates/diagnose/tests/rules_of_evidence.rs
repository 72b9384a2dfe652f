//! The rules of evidence for logs nobody here wrote (issue #43), each on lines taken from a real
//! excerpt of `tests/fixtures/real/` (named at each test; times, connection ids and
//! `$upstream_addr` values edited only where the test says so).

use resolvelab_diagnose::{Diagnosis, Options, diagnose};
use resolvelab_history::logformat::LogFormat;
use std::path::PathBuf;

/// The `main` format with `$upstream_addr` and `$connection` added: what a user adds when the
/// report asks for them.
const FORMAT: &str = r#"$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent" "$upstream_addr" $connection"#;

/// ingress-nginx-12286-controller-premature-close-redaction: the error line, verbatim.
const PREMATURE: &str = r#"2024/11/03 10:02:03 [error] 299#299: *174 upstream prematurely closed connection while reading response header from upstream, client: 192.168.56.140, server: opensearch-dashboard.example.com, request: "GET / HTTP/1.1", upstream: "http://10.244.3.84:5601/", host: "opensearch-dashboard.example.com""#;

/// Its access line in [`FORMAT`], with `$upstream_addr` as given and `$connection` 174.
fn access_line(upstream_addr: &str) -> String {
    format!(
        r#"192.168.56.140 - - [03/Nov/2024:10:02:03 +0000] "GET / HTTP/1.1" 502 559 "-" "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0.0.0 Safari/537.36" "{upstream_addr}" 174"#
    )
}

fn run(access: Option<&str>, error: &str, format: &str) -> Diagnosis {
    let dir = tempfile::tempdir().unwrap();
    let mut acc = Vec::new();
    if let Some(a) = access {
        let p = dir.path().join("access.log");
        std::fs::write(&p, format!("{a}\n")).unwrap();
        acc.push(p);
    }
    let e: PathBuf = dir.path().join("error.log");
    std::fs::write(&e, format!("{error}\n")).unwrap();
    let mut o = Options::new(acc, vec![e]);
    o.log_format = LogFormat::from_arg(format).unwrap();
    o.tz_offset_s = Some(0);
    diagnose(&o).unwrap()
}

/// A redacted `$upstream_addr` is neither an address nor a group: no NLU, the request's own
/// error line decides, and the report says the trajectories are unknown.
#[test]
fn a_redacted_upstream_addr_is_no_group_and_no_nlu() {
    for redacted in ["XXX", "10.xxx.xx.xxx:5601", "<ip>", "x.x.x.x"] {
        let d = run(Some(&access_line(redacted)), PREMATURE, FORMAT);
        assert_eq!(d.failures, 1, "{redacted}");
        assert_eq!(d.nlu.total, 0, "{redacted}: read as a group");
        let classes: Vec<&str> = d.incidents.iter().map(|i| i.class.id()).collect();
        assert_eq!(classes, ["upstream-failure"], "{redacted}");
        assert!(
            d.evidence
                .missing
                .iter()
                .any(|m| m.what.contains("addresses in `$upstream_addr`")),
            "{redacted}: {:?}",
            d.evidence.missing
        );
        assert_ne!(d.incidents[0].upstream, redacted);
    }
    // The same line with the real address: nothing missing about addresses.
    let d = run(Some(&access_line("10.244.3.84:5601")), PREMATURE, FORMAT);
    assert_eq!((d.failures, d.nlu.total), (1, 0));
    assert!(
        !d.evidence
            .missing
            .iter()
            .any(|m| m.what.contains("addresses in"))
    );
}

/// A token that looks like a name (`opensearch`) but whose own request logged a first try on a
/// peer (`upstream prematurely closed connection`, same `*cid`, second and request) was not
/// refused at the pick: it is that first try's failure, not a 1-hop NLU.
#[test]
fn a_one_hop_name_whose_request_tried_a_peer_is_not_an_nlu() {
    let d = run(Some(&access_line("opensearch")), PREMATURE, FORMAT);
    assert_eq!((d.failures, d.nlu.total), (1, 0));
    let i = &d.incidents[0];
    assert_eq!(i.class, "upstream-failure");
    // A real NLU line of its own keeps it an NLU.
    let nlu = r#"2024/11/03 10:02:03 [error] 299#299: *174 no live upstreams while connecting to upstream, client: 192.168.56.140, server: opensearch-dashboard.example.com, request: "GET / HTTP/1.1", upstream: "http://opensearch/", host: "opensearch-dashboard.example.com""#;
    let d = run(Some(&access_line("opensearch")), nlu, FORMAT);
    assert_eq!((d.failures, d.nlu.total), (1, 1));
}

/// ingress-nginx-12286's request with a `no live upstreams` line of its own (the line edited
/// from the same request's): whatever its `$upstream_addr` says — a redaction, or a name where
/// the log names its groups in `$proxy_upstream_name` —, that line is the evidence of an NLU.
const OWN_NLU: &str = r#"2024/11/03 10:02:03 [error] 299#299: *174 no live upstreams while connecting to upstream, client: 192.168.56.140, server: opensearch-dashboard.example.com, request: "GET / HTTP/1.1", upstream: "http://opensearch/", host: "opensearch-dashboard.example.com""#;

/// An unreadable `$upstream_addr` is no NLU by itself, but the request's own `no live
/// upstreams` line is: it is counted (hops unknown), cited, and the report does not ask for
/// the error log it was given.
#[test]
fn an_unreadable_upstream_addr_is_an_nlu_on_its_own_nlu_line() {
    for redacted in ["XXX", "<ip>", "x.x.x.x"] {
        let d = run(Some(&access_line(redacted)), OWN_NLU, FORMAT);
        assert_eq!((d.failures, d.nlu.total), (1, 1), "{redacted}");
        let i = &d.incidents[0];
        assert_eq!(
            i.hops.unknown_hops, 1,
            "{redacted}: one hop or two, nobody knows"
        );
        assert!(
            i.evidence.iter().any(|e| e.at.ends_with("error.log:1")),
            "{redacted}: {:?}",
            i.evidence
        );
        assert!(!i.fix.contains("error_log` destination"), "{}", i.fix);
        assert_eq!(
            i.upstream, "opensearch",
            "{redacted}: the group the line names"
        );
    }
    // Another request's line on the same connection and second is not its own.
    let other = OWN_NLU.replace("GET / HTTP", "GET /api/status HTTP");
    let d = run(Some(&access_line("XXX")), &other, FORMAT);
    assert_eq!((d.failures, d.nlu.total), (1, 0));
}

/// ingress-nginx's format: a name in `$upstream_addr` is not its group (`$proxy_upstream_name`
/// is), so no NLU on the access line alone — but with the request's own `no live upstreams`
/// line (same client, request and second; this format has no `$connection`), an NLU.
#[test]
fn an_ingress_request_with_its_own_nlu_line_is_an_nlu() {
    let access = r#"192.168.56.140 - - [03/Nov/2024:10:02:03 +0000] "GET / HTTP/1.1" 502 150 "-" "Mozilla/5.0" 300 0.000 [logging-opensearch-dashboards-5601] [] opensearch 0 0.000 502 5d22a71d0a61264ab13b1244bed1836b"#;
    let unrelated = r#"2024/11/03 09:00:00 [notice] 1#1: start worker processes"#;
    let d = run(Some(access), unrelated, "upstreaminfo");
    assert_eq!((d.failures, d.nlu.total), (1, 0));
    let d = run(Some(access), OWN_NLU, "upstreaminfo");
    assert_eq!((d.failures, d.nlu.total), (1, 1));
    assert_eq!(
        d.incidents[0].upstream,
        "logging-opensearch-dashboards-5601"
    );
}

/// With the error log alone, two `no live upstreams` lines are two requests even on one
/// connection with the same request text (an NLU ends its request). mattermost's line (the
/// `*123228` of the corpus), twice on one `*cid` a second apart.
#[test]
fn two_nlu_lines_on_one_connection_are_two_requests() {
    let line = |t: &str| {
        format!(
            r#"2024/03/26 19:09:{t} [error] 4207#4207: *123228 no live upstreams while connecting to upstream, client: 76.67.108.52, server: _, request: "GET /api/v4/websocket?connection_id=aqjq8me37pbwmx6bqrqhnfz83h&sequence_number=819 HTTP/1.1", upstream: "http://backend/api/v4/websocket?connection_id=aqjq8me37pbwmx6bqrqhnfz83h&sequence_number=819", host: "ec2-54-146-184-87.compute-1.amazonaws.com""#
        )
    };
    let d = run(None, &format!("{}\n{}", line("54"), line("55")), "combined");
    assert_eq!((d.failures, d.nlu.total), (2, 2));
    // A first try and the NLU of its retry, in the same second: one request.
    let first = r#"2024/03/26 19:09:54 [error] 4207#4207: *123228 connect() failed (111: Connection refused) while connecting to upstream, client: 76.67.108.52, server: _, request: "GET /api/v4/websocket?connection_id=aqjq8me37pbwmx6bqrqhnfz83h&sequence_number=819 HTTP/1.1", upstream: "http://10.0.0.5:8065/api/v4/websocket?connection_id=aqjq8me37pbwmx6bqrqhnfz83h&sequence_number=819", host: "ec2-54-146-184-87.compute-1.amazonaws.com""#;
    let d = run(None, &format!("{first}\n{}", line("54")), "combined");
    assert_eq!((d.failures, d.nlu.total), (1, 1));
}

/// A 504 without an error line of its own is not explained (or fixed) as a `no live
/// upstreams`: nginx answers one with 502, never 504. plane-6985's 504 access line, alone.
#[test]
fn a_504_without_an_error_line_is_not_explained_as_an_nlu() {
    let access = r#"192.168.56.140 - - [03/Nov/2024:10:02:03 +0000] "POST /api/issues HTTP/1.1" 504 167 "-" "Mozilla/5.0" "-" 9"#;
    let unrelated = r#"2024/11/03 09:00:00 [notice] 1#1: start worker processes"#;
    let d = run(Some(access), unrelated, FORMAT);
    assert_eq!(d.failures, 1);
    let i = &d.incidents[0];
    assert_eq!(i.class, "undetermined");
    assert!(
        !i.explanation.contains("`no live upstreams` whose cause"),
        "{}",
        i.explanation
    );
    assert!(i.explanation.contains("504"), "{}", i.explanation);
    assert!(!i.fix.contains("DNS"), "{}", i.fix);
    assert_eq!(i.upstream, "(unknown)", "no group is known");
}

/// With a configuration that rules the race out, an undetermined NLU's causes leave the DNS
/// swap out and say why.
#[test]
fn a_ruled_out_race_is_not_offered_as_a_cause() {
    let nlu = r#"2024/03/26 19:09:54 [error] 4207#4207: *123228 no live upstreams while connecting to upstream, client: 76.67.108.52, server: _, request: "GET /x HTTP/1.1", upstream: "http://backend/x", host: "h""#;
    let dir = tempfile::tempdir().unwrap();
    let e = dir.path().join("error.log");
    std::fs::write(&e, format!("{nlu}\n")).unwrap();
    let mut o = Options::new(Vec::new(), vec![e]);
    o.tz_offset_s = Some(0);
    o.nginx_version = resolvelab_core::version::Version::parse("1.24.0");
    let d = diagnose(&o).unwrap();
    assert_eq!(d.evidence.race, "ruled-out");
    for i in &d.incidents {
        let text = i.explanation.replace("DNS swap is ruled out", "");
        assert!(!text.contains("DNS swap"), "{}", i.explanation);
        assert!(!i.class.id().starts_with("generation-race"));
    }
    let c = d
        .classes
        .iter()
        .find(|c| c.class == "undetermined")
        .unwrap();
    assert!(
        !c.explanation
            .replace("DNS swap is ruled out", "")
            .contains("DNS swap")
    );
}

/// A 502 without `$upstream_addr` pairs with its own error line written after a daylight-saving
/// change: the access log's `$time_local` carries the new offset, the error log's local time
/// shifts with it. The mattermost NLU line (`*123230` of the corpus), moved to the night of
/// 2026-03-29 in Europe (01:00 UTC: +01:00 → +02:00).
#[test]
fn a_failure_pairs_with_its_error_line_across_a_change_of_utc_offset() {
    let acc = |local: &str, off: &str, status: u16| {
        format!(
            r#"76.67.108.52 - - [29/Mar/2026:{local} {off}] "GET /api/v4/websocket?connection_id=aqjq8me37pbwmx6bqrqhnfz83h&sequence_number=819 HTTP/1.1" {status} 157 "-" "Mozilla/5.0""#
        )
    };
    let mut access = Vec::new();
    for s in 50..60 {
        access.push(acc(&format!("01:59:{s}"), "+0100", 200));
    }
    // The failure is the first line that shows the new offset (the hard case: nothing before
    // it says the clock moved).
    access.push(acc("03:00:05", "+0200", 502));
    for s in 6..9 {
        access.push(acc(&format!("03:00:0{s}"), "+0200", 200));
    }
    let nlu = r#"2026/03/29 03:00:05 [error] 4207#4207: *123230 no live upstreams while connecting to upstream, client: 76.67.108.52, server: _, request: "GET /api/v4/websocket?connection_id=aqjq8me37pbwmx6bqrqhnfz83h&sequence_number=819 HTTP/1.1", upstream: "http://backend/api/v4/websocket?connection_id=aqjq8me37pbwmx6bqrqhnfz83h&sequence_number=819", host: "ec2-54-146-184-87.compute-1.amazonaws.com""#;
    let dir = tempfile::tempdir().unwrap();
    let (a, e) = (dir.path().join("access.log"), dir.path().join("error.log"));
    std::fs::write(&a, access.join("\n") + "\n").unwrap();
    std::fs::write(&e, format!("{nlu}\n")).unwrap();
    // No --tz-offset: the offsets come from `$time_local`, as a user runs it.
    let mut o = Options::new(vec![a], vec![e]);
    o.log_format = LogFormat::from_arg("combined").unwrap();
    let d = diagnose(&o).unwrap();
    assert_eq!(d.failures, 1);
    assert_eq!(
        (d.nlu.total, d.nlu.paired),
        (1, 1),
        "{:?}",
        d.inputs.tz_changes
    );
}
