//! The authority over real loopback sockets: every mode over UDP and TCP, `for` reverting,
//! `align next-query`, the query log, `changed`, the control API and metrics, the timeline.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use resolvelab_dns::client::{self, Answer};
use resolvelab_dns::{
    ControlClient, DnsConfig, DnsHandle, DnsMode, DnsServer, NameConfig, SetRequest, Timeline,
    Transport, Unknown,
};

const T: Duration = Duration::from_secs(2);

/// Each test gets its own loopback address so parallel tests never share a port.
async fn start(ip: &str, names: &[&str]) -> DnsHandle {
    start_with(ip, names, |_| {}).await
}

async fn start_with(ip: &str, names: &[&str], f: impl FnOnce(&mut DnsConfig)) -> DnsHandle {
    let mut cfg = DnsConfig {
        listen: format!("{ip}:0").parse().unwrap(),
        names: names
            .iter()
            .map(|n| NameConfig::parse_cli(n).unwrap())
            .collect(),
        ..DnsConfig::default()
    };
    f(&mut cfg);
    DnsServer::start(cfg).await.unwrap()
}

async fn q(dns: &DnsHandle, name: &str, qtype: &str, tr: Transport) -> Answer {
    client::query(dns.local_addr(), name, qtype, tr, T)
        .await
        .unwrap_or_else(|e| panic!("{name} {qtype} {tr:?}: {e}"))
}

fn ips(v: &[&str]) -> Vec<IpAddr> {
    v.iter().map(|s| s.parse().unwrap()).collect()
}

#[tokio::test]
async fn static_alternate_multi_over_udp_and_tcp() {
    let dns = start(
        "127.0.53.1",
        &[
            "two.test=static:127.0.0.20,127.0.0.30",
            "alt.test=alternate:127.0.0.20,127.0.0.30",
            "multi.test=multi:25@127.0.1.1",
            "big.test=multi:60",
        ],
    )
    .await;
    for tr in [Transport::Udp, Transport::Tcp] {
        let a = q(&dns, "two.test", "A", tr).await;
        assert_eq!(a.rcode, "NOERROR");
        assert!(a.authoritative);
        assert_eq!(a.answers, ips(&["127.0.0.20", "127.0.0.30"]));
        assert_eq!(a.ttls, vec![1, 1], "default TTL is 1 s");
        let a = q(&dns, "multi.test", "A", tr).await;
        assert_eq!(a.answers.len(), 25, "{tr:?}");
        assert_eq!(a.answers[24], "127.0.1.25".parse::<IpAddr>().unwrap());
    }
    // Alternate rotates on every A query, whatever the transport; AAAA does not rotate.
    let mut seen = Vec::new();
    for i in 0..6 {
        let tr = if i % 3 == 0 {
            Transport::Tcp
        } else {
            Transport::Udp
        };
        let a = q(&dns, "Alt.Test.", "A", tr).await;
        assert_eq!(a.answers.len(), 1);
        seen.push(a.answers[0]);
        let aaaa = q(&dns, "alt.test", "AAAA", Transport::Udp).await;
        assert_eq!((aaaa.rcode.as_str(), aaaa.answers.len()), ("NOERROR", 0));
    }
    assert_eq!(
        seen,
        ips(&[
            "127.0.0.20",
            "127.0.0.30",
            "127.0.0.20",
            "127.0.0.30",
            "127.0.0.20",
            "127.0.0.30"
        ])
    );
    // 60 records do not fit 512 bytes: TC over UDP, the full answer over TCP.
    let udp = q(&dns, "big.test", "A", Transport::Udp).await;
    assert!(udp.truncated && udp.answers.is_empty());
    let tcp = q(&dns, "big.test", "A", Transport::Tcp).await;
    assert!(!tcp.truncated);
    assert_eq!(tcp.answers.len(), 60);
    dns.shutdown().await.unwrap();
}

#[tokio::test]
async fn rcode_modes_unknown_names_and_aaaa() {
    let dns = start(
        "127.0.53.2",
        &[
            "nx.test=nxdomain",
            "sf.test=servfail",
            "rf.test=refused",
            "nd.test=nodata",
            "v6.test=static:127.0.0.20;aaaa=::1;ttl=7s",
        ],
    )
    .await;
    for tr in [Transport::Udp, Transport::Tcp] {
        for (name, rcode) in [
            ("nx.test", "NXDOMAIN"),
            ("sf.test", "SERVFAIL"),
            ("rf.test", "REFUSED"),
            ("nd.test", "NOERROR"),
            ("nobody.test", "NXDOMAIN"),
        ] {
            let a = q(&dns, name, "A", tr).await;
            assert_eq!(a.rcode, rcode, "{name} {tr:?}");
            assert!(a.answers.is_empty());
        }
        let a = q(&dns, "v6.test", "AAAA", tr).await;
        assert_eq!(a.answers, ips(&["::1"]));
        assert_eq!(a.ttls, vec![7]);
        let a = q(&dns, "v6.test", "TXT", tr).await;
        assert_eq!((a.rcode.as_str(), a.answers.len()), ("NOERROR", 0));
    }
    dns.shutdown().await.unwrap();

    let dns = start_with("127.0.53.2", &["a.test=static:127.0.0.20"], |c| {
        c.unknown = Unknown::Refused;
        c.ttl = 30;
    })
    .await;
    assert_eq!(
        q(&dns, "b.test", "A", Transport::Udp).await.rcode,
        "REFUSED"
    );
    assert_eq!(q(&dns, "a.test", "A", Transport::Udp).await.ttls, vec![30]);
    dns.shutdown().await.unwrap();
}

#[tokio::test]
async fn weighted_is_seeded_and_follows_weights() {
    async fn run(seed: u64) -> Vec<IpAddr> {
        let dns = start_with(
            "127.0.53.3",
            &["w.test=weighted:127.0.0.20=3,127.0.0.30=1"],
            |c| c.seed = seed,
        )
        .await;
        let mut out = Vec::new();
        for _ in 0..400 {
            out.extend(q(&dns, "w.test", "A", Transport::Udp).await.answers);
        }
        dns.shutdown().await.unwrap();
        out
    }
    let a = run(7).await;
    let b = run(7).await;
    let c = run(8).await;
    assert_eq!(a, b, "same seed, same answers");
    assert_ne!(a, c, "another seed, other answers");
    let heavy = a.iter().filter(|ip| ip.to_string() == "127.0.0.20").count();
    // 3:1 → 300 of 400 expected; binomial sd ≈ 8.7, so ±50 is > 5 sd.
    assert!((250..=350).contains(&heavy), "{heavy} of 400");
}

#[tokio::test]
async fn drop_delay_truncate() {
    let dns = start(
        "127.0.53.4",
        &[
            "drop.test=drop",
            "slow.test=delay:300ms+static:127.0.0.20",
            "tc.test=truncate+alternate:127.0.0.20,127.0.0.30",
        ],
    )
    .await;
    let mut events = dns.subscribe();
    let e = client::query(
        dns.local_addr(),
        "drop.test",
        "A",
        Transport::Udp,
        Duration::from_millis(300),
    )
    .await
    .unwrap_err();
    assert!(e.to_string().contains("no answer"), "{e}");
    let ev = events.recv().await.unwrap();
    assert_eq!(
        (ev.qname.as_str(), ev.rcode.as_str()),
        ("drop.test", "DROPPED")
    );

    let t0 = Instant::now();
    let a = q(&dns, "slow.test", "A", Transport::Udp).await;
    assert!(
        t0.elapsed() >= Duration::from_millis(300),
        "answered after the delay"
    );
    assert_eq!(a.answers, ips(&["127.0.0.20"]));
    let t0 = Instant::now();
    q(&dns, "slow.test", "A", Transport::Tcp).await;
    assert!(t0.elapsed() >= Duration::from_millis(300));

    // TC over UDP does not consume the rotation: the TCP retry gets the next address.
    let u = q(&dns, "tc.test", "A", Transport::Udp).await;
    assert!(u.truncated && u.answers.is_empty());
    assert_eq!(
        q(&dns, "tc.test", "A", Transport::Tcp).await.answers,
        ips(&["127.0.0.20"])
    );
    assert!(q(&dns, "tc.test", "A", Transport::Udp).await.truncated);
    assert_eq!(
        q(&dns, "tc.test", "A", Transport::Tcp).await.answers,
        ips(&["127.0.0.30"])
    );
    dns.shutdown().await.unwrap();
}

#[tokio::test]
async fn for_reverts_and_wrappers_apply_to_the_current_mode() {
    let dns = start("127.0.53.5", &["app.test=alternate:127.0.0.20,127.0.0.30"]).await;
    let mut changes = dns.subscribe_changes();
    dns.set_mode(
        "app.test",
        "nxdomain".parse().unwrap(),
        Some(Duration::from_millis(300)),
        false,
    )
    .unwrap();
    assert_eq!(
        q(&dns, "app.test", "A", Transport::Udp).await.rcode,
        "NXDOMAIN"
    );
    assert_eq!(dns.hits(), 1);
    let set = changes.recv().await.unwrap();
    assert_eq!((set.reason.as_str(), set.to.as_str()), ("set", "nxdomain"));
    // The ticker announces the revert; its time is the scheduled one.
    let rev = tokio::time::timeout(Duration::from_secs(5), changes.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(rev.reason, "revert");
    assert_eq!(rev.to, "alternate:127.0.0.20,127.0.0.30");
    let dt = rev.t_us - set.t_us;
    assert!(
        (299_000..=301_000).contains(&dt),
        "revert {dt} us after set"
    );
    assert_eq!(
        q(&dns, "app.test", "A", Transport::Udp).await.rcode,
        "NOERROR"
    );
    assert_eq!(dns.hits(), 1, "answers under the default mode are not hits");

    // `delay:…` alone wraps the mode in force; nested `for`s unwind in order.
    dns.set_mode(
        "app.test",
        "delay:50ms".parse().unwrap(),
        Some(Duration::from_secs(60)),
        false,
    )
    .unwrap();
    assert_eq!(
        dns.mode("app.test").unwrap().to_string(),
        "delay:50ms+alternate:127.0.0.20,127.0.0.30"
    );
    dns.set_mode(
        "app.test",
        DnsMode::ServFail,
        Some(Duration::from_millis(100)),
        false,
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while dns.mode("app.test").unwrap() == DnsMode::ServFail {
        assert!(Instant::now() < deadline, "servfail never reverted");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        dns.mode("app.test")
            .unwrap()
            .to_string()
            .starts_with("delay:50ms+")
    );
    dns.reset("app.test").unwrap();
    let st = &dns.names()[0];
    assert!(!st.injected && st.revert_to.is_none());
    dns.shutdown().await.unwrap();
}

#[tokio::test]
async fn align_next_query_switches_exactly_at_the_next_query() {
    let dns = start("127.0.53.6", &["app.test=static:127.0.0.20"]).await;
    let mut changes = dns.subscribe_changes();
    let mut events = dns.subscribe();
    let st = dns
        .set_mode(
            "app.test",
            DnsMode::NxDomain,
            Some(Duration::from_millis(200)),
            true,
        )
        .unwrap();
    assert_eq!(st.pending.as_deref(), Some("nxdomain"));
    assert_eq!(
        st.mode, "static:127.0.0.20",
        "not in force before the next query"
    );
    assert_eq!(changes.recv().await.unwrap().reason, "pending");
    tokio::time::sleep(Duration::from_millis(300)).await; // longer than `for`: it must not count yet
    assert_eq!(
        dns.mode("app.test").unwrap().to_string(),
        "static:127.0.0.20"
    );
    let a = q(&dns, "app.test", "A", Transport::Udp).await;
    assert_eq!(a.rcode, "NXDOMAIN", "the very next query gets the new mode");
    let ev = events.recv().await.unwrap();
    let aligned = changes.recv().await.unwrap();
    assert_eq!(aligned.reason, "aligned");
    assert_eq!(
        aligned.t_us, ev.t_us,
        "the change happens at the query's arrival"
    );
    assert!(ev.injected && !ev.changed);
    let rev = tokio::time::timeout(Duration::from_secs(5), changes.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(rev.reason, "revert");
    let dt = rev.t_us - ev.t_us;
    assert!(
        (199_000..=201_000).contains(&dt),
        "`for` counts from the aligned query: {dt}"
    );
    dns.shutdown().await.unwrap();
}

#[tokio::test]
async fn query_log_fields_and_changed() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("dns.jsonl");
    let dns = start_with(
        "127.0.53.7",
        &[
            "alt.test=alternate:127.0.0.20,127.0.0.30",
            "st.test=static:127.0.0.20",
        ],
        |c| c.log = Some(log.clone()),
    )
    .await;
    for _ in 0..3 {
        q(&dns, "alt.test", "A", Transport::Udp).await;
        q(&dns, "st.test", "A", Transport::Tcp).await;
    }
    dns.set_mode("st.test", DnsMode::NxDomain, None, false)
        .unwrap();
    q(&dns, "st.test", "A", Transport::Udp).await;
    q(&dns, "nobody.test", "AAAA", Transport::Udp).await;
    dns.shutdown().await.unwrap();

    let text = std::fs::read_to_string(&log).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next().unwrap(), r#"{"schema":"resolvelab.dns/v1"}"#);
    let rows: Vec<serde_json::Value> = lines.map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(rows.len(), 8);
    for r in &rows {
        for k in [
            "t_us",
            "client",
            "qname",
            "qtype",
            "transport",
            "id",
            "mode",
            "rcode",
            "answers",
            "ttl",
            "changed",
            "injected",
        ] {
            assert!(r.get(k).is_some(), "missing {k} in {r}");
        }
        assert!(r["t_us"].as_i64().unwrap() > 1_700_000_000_000_000);
        r["client"].as_str().unwrap().parse::<SocketAddr>().unwrap();
    }
    let alt: Vec<_> = rows.iter().filter(|r| r["qname"] == "alt.test").collect();
    assert_eq!(alt[0]["mode"], "alternate:127.0.0.20,127.0.0.30");
    assert_eq!(alt[0]["answers"], serde_json::json!(["127.0.0.20"]));
    assert_eq!(alt[0]["transport"], "udp");
    assert_eq!(alt[0]["ttl"], 1);
    // Each UDP query comes from a new port but the same IP: alternation shows as changes.
    assert_eq!(
        alt.iter()
            .map(|r| r["changed"].as_bool().unwrap())
            .collect::<Vec<_>>(),
        vec![false, true, true]
    );
    let st: Vec<_> = rows.iter().filter(|r| r["qname"] == "st.test").collect();
    assert_eq!(
        st.iter()
            .map(|r| r["changed"].as_bool().unwrap())
            .collect::<Vec<_>>(),
        vec![false, false, false, true]
    );
    assert_eq!(st[0]["transport"], "tcp");
    assert_eq!(st[3]["rcode"], "NXDOMAIN");
    assert_eq!(st[3]["injected"], true);
    assert_eq!(st[0]["injected"], false);
    let unknown = rows.last().unwrap();
    assert_eq!(unknown["qtype"], "AAAA");
    assert_eq!(unknown["rcode"], "NXDOMAIN");
    assert_eq!(unknown["mode"], "unknown");
}

#[tokio::test]
async fn control_api_token_set_show_metrics() {
    let dns = start_with(
        "127.0.53.8",
        &["app.test=alternate:127.0.0.20,127.0.0.30"],
        |c| {
            c.control = Some("127.0.53.8:0".parse().unwrap());
            c.token = Some("s3cret".into());
        },
    )
    .await;
    let addr = dns.control_addr().unwrap();
    let bad = ControlClient::new(addr, Some("wrong".into()), false).unwrap();
    let e = bad.list().await.unwrap_err().to_string();
    assert!(e.contains("HTTP 401") && e.contains("token"), "{e}");
    let none = ControlClient::new(addr, None, false).unwrap();
    assert!(
        none.metrics()
            .await
            .unwrap_err()
            .to_string()
            .contains("401")
    );

    let c = ControlClient::new(addr, Some("s3cret".into()), false).unwrap();
    let names = c.list().await.unwrap();
    assert_eq!(names.len(), 1);
    assert_eq!(names[0].mode, "alternate:127.0.0.20,127.0.0.30");
    let st = c
        .set(
            "app.test",
            &SetRequest {
                mode: "nxdomain".into(),
                for_: Some("10s".into()),
                align: Some("next-query".into()),
            },
        )
        .await
        .unwrap();
    assert_eq!(st.pending.as_deref(), Some("nxdomain"));
    assert_eq!(st.pending_for_ms, Some(10_000));
    assert_eq!(
        q(&dns, "app.test", "A", Transport::Udp).await.rcode,
        "NXDOMAIN"
    );
    let st = c.show("app.test").await.unwrap();
    assert!(st.injected && st.pending.is_none());
    assert_eq!(
        st.revert_to.as_deref(),
        Some("alternate:127.0.0.20,127.0.0.30")
    );
    assert_eq!((st.queries, st.hits), (1, 1));

    let e = c
        .set(
            "nobody.test",
            &SetRequest {
                mode: "drop".into(),
                ..Default::default()
            },
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("404") && e.contains("unknown name"), "{e}");
    let e = c
        .set(
            "app.test",
            &SetRequest {
                mode: "bogus".into(),
                ..Default::default()
            },
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("400") && e.contains("unknown mode"), "{e}");
    let e = c
        .set(
            "app.test",
            &SetRequest {
                mode: "static:10.1.2.3".into(),
                ..Default::default()
            },
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("not loopback"), "{e}");

    c.set(
        "app.test",
        &SetRequest {
            mode: "default".into(),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    q(&dns, "app.test", "A", Transport::Tcp).await;
    q(&dns, "other.test", "A", Transport::Udp).await;
    let m = c.metrics().await.unwrap();
    for want in [
        r#"resolvelab_dns_queries_total{name="app.test",qtype="A",rcode="NXDOMAIN",mode="nxdomain",transport="udp"} 1"#,
        r#"resolvelab_dns_queries_total{name="app.test",qtype="A",rcode="NOERROR",mode="alternate:127.0.0.20,127.0.0.30",transport="tcp"} 1"#,
        r#"resolvelab_dns_queries_total{name="",qtype="A",rcode="NXDOMAIN",mode="unknown",transport="udp"} 1"#,
        r#"resolvelab_dns_injection_hits_total{name="app.test"} 1"#,
        r#"resolvelab_dns_injected{name="app.test",mode="alternate:127.0.0.20,127.0.0.30"} 0"#,
        "# TYPE resolvelab_dns_injection_hits_total counter",
    ] {
        assert!(m.contains(want), "missing `{want}` in:\n{m}");
    }
    dns.shutdown().await.unwrap();
}

#[tokio::test]
async fn timeline_runs_changes_on_schedule() {
    let tl = Timeline::parse(
        r#"
[[change]]
at = "100ms"
name = "app.test"
mode = "servfail"
for = "150ms"
"#,
        "t.toml",
    )
    .unwrap();
    let dns = start_with("127.0.53.9", &["app.test=static:127.0.0.20"], |c| {
        c.timeline = Some(tl)
    })
    .await;
    let mut changes = dns.subscribe_changes();
    let mut got: HashMap<String, i64> = HashMap::new();
    while got.len() < 2 {
        let c = tokio::time::timeout(Duration::from_secs(5), changes.recv())
            .await
            .expect("timeline change announced")
            .unwrap();
        got.insert(c.reason.clone(), c.t_us);
    }
    let dt = got["revert"] - got["set"];
    assert!((149_000..=151_000).contains(&dt), "{dt}");
    assert_eq!(
        dns.mode("app.test").unwrap().to_string(),
        "static:127.0.0.20"
    );

    let e = DnsServer::start(DnsConfig {
        listen: "127.0.53.9:0".parse().unwrap(),
        timeline: Some(
            Timeline::parse(
                "[[change]]\nat=\"1s\"\nname=\"x.test\"\nmode=\"drop\"\n",
                "t",
            )
            .unwrap(),
        ),
        ..DnsConfig::default()
    })
    .await
    .err()
    .unwrap()
    .to_string();
    assert!(e.contains("x.test") && e.contains("not served"), "{e}");
    dns.shutdown().await.unwrap();
}

#[tokio::test]
async fn refuses_non_loopback_binds_and_answers() {
    // network-safe: a documentation address (RFC 5737) no interface has: even a broken check
    // could not bind it, so the test can fail but never exposes a socket (the policy itself is
    // tested as a function in `server::tests`); 192.0.2.1 below is only an answer's record.
    let e = DnsServer::start(DnsConfig {
        listen: "192.0.2.53:0".parse().unwrap(),
        ..DnsConfig::default()
    })
    .await
    .err()
    .unwrap()
    .to_string();
    assert!(e.contains("not loopback"), "{e}");
    let e = DnsServer::start(DnsConfig {
        listen: "127.0.53.10:0".parse().unwrap(),
        names: vec![NameConfig::parse_cli("a.test=static:192.0.2.1").unwrap()],
        ..DnsConfig::default()
    })
    .await
    .err()
    .unwrap()
    .to_string();
    assert!(
        e.contains("192.0.2.1") && e.contains("--allow-remote"),
        "{e}"
    );
    let e = DnsServer::start(DnsConfig {
        listen: "127.0.53.10:0".parse().unwrap(),
        names: vec![
            NameConfig::parse_cli("a.test=nxdomain").unwrap(),
            NameConfig::parse_cli("A.test.=drop").unwrap(),
        ],
        ..DnsConfig::default()
    })
    .await
    .err()
    .unwrap()
    .to_string();
    assert!(e.contains("given twice"), "{e}");
}

#[tokio::test]
async fn a_served_answer_is_the_configured_one_not_an_injection() {
    let dns = start("127.0.53.11", &["app.test=static:127.0.0.20"]).await;
    let mut changes = dns.subscribe_changes();
    // A window under way is cancelled by what the GSLB serves.
    dns.set_mode(
        "app.test",
        DnsMode::NxDomain,
        Some(Duration::from_secs(60)),
        false,
    )
    .unwrap();
    let st = dns
        .serve("app.test", "static:127.0.0.30".parse().unwrap(), "gslb")
        .unwrap();
    assert_eq!(
        (st.mode.as_str(), st.default_mode.as_str(), st.injected),
        ("static:127.0.0.30", "static:127.0.0.30", false)
    );
    assert!(st.revert_to.is_none());
    let a = q(&dns, "app.test", "A", Transport::Udp).await;
    assert_eq!(a.answers, ips(&["127.0.0.30"]));
    assert_eq!(dns.hits(), 0, "a served answer is not an injection hit");
    let _set = changes.recv().await.unwrap();
    let served = changes.recv().await.unwrap();
    assert_eq!(
        (served.reason.as_str(), served.to.as_str()),
        ("gslb", "static:127.0.0.30")
    );
    // Serving the answer in force announces nothing; a non-loopback answer is refused.
    dns.serve("app.test", "static:127.0.0.30".parse().unwrap(), "gslb")
        .unwrap();
    assert!(changes.try_recv().is_err());
    // network-safe: refused before any answer carries it.
    assert!(
        dns.serve("app.test", "static:192.0.2.1".parse().unwrap(), "gslb")
            .is_err()
    );
    dns.shutdown().await.unwrap();
}

/// A view answers as the main address until it gets an answer of its own: one authority, a
/// resolver per site, each told its own members — over UDP and TCP, logged with its view, never
/// an injection; `None` gives the view the name's answer back.
#[tokio::test]
async fn a_view_answers_its_own_members_until_reset() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("dns.jsonl");
    let dns = start_with("127.0.53.12", &["app.test=static:127.0.0.20"], |c| {
        c.views = vec!["127.0.53.12:0".parse().unwrap()];
        c.log = Some(log.clone());
    })
    .await;
    let view = dns.view_addrs()[0];
    assert_ne!(view, dns.local_addr());
    let at = |addr: SocketAddr, tr: Transport| async move {
        client::query(addr, "app.test", "A", tr, T)
            .await
            .unwrap()
            .answers
    };
    assert_eq!(at(view, Transport::Udp).await, ips(&["127.0.0.20"]));
    dns.serve_view("app.test", 1, Some("static:127.0.0.30".parse().unwrap()))
        .unwrap();
    for tr in [Transport::Udp, Transport::Tcp] {
        assert_eq!(at(view, tr).await, ips(&["127.0.0.30"]), "{tr:?}");
        assert_eq!(at(dns.local_addr(), tr).await, ips(&["127.0.0.20"]));
    }
    assert_eq!(dns.hits(), 0, "a view's answer is not an injection");
    // The main address's answer is the name's own, set with serve; unknown names are refused.
    assert!(dns.serve_view("app.test", 0, None).is_err());
    assert!(dns.serve_view("other.test", 1, None).is_err());
    // network-safe: refused before any answer carries it.
    assert!(
        dns.serve_view("app.test", 1, Some("static:192.0.2.1".parse().unwrap()))
            .is_err()
    );
    dns.serve_view("app.test", 1, None).unwrap();
    assert_eq!(at(view, Transport::Udp).await, ips(&["127.0.0.20"]));
    dns.shutdown().await.unwrap();
    let text = std::fs::read_to_string(&log).unwrap();
    let views: Vec<Option<u64>> = text
        .lines()
        .skip(1)
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["view"].as_u64())
        .collect();
    assert_eq!(
        views,
        [Some(1), Some(1), None, Some(1), None, Some(1)],
        "{text}"
    );
}
