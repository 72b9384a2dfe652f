//! The checker on lab-run fixtures ([`analyze_run`]): every class of DESIGN.md is recognised,
//! the scenario's expectations are evaluated, and a run whose injection never hit is refused.
//! (`resolvelab analyze`'s exit codes and verdict files: `crates/resolvelab/tests/analyze_cli.rs`.)

use resolvelab_core::evidence::run::VerdictStatus;
use resolvelab_diagnose::analyze_run;
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/diagnose")
}

/// Copy a fixture run into a temp dir (some tests edit the run).
fn run_copy(rel: &str) -> tempfile::TempDir {
    let src = fixtures().join(rel);
    let dst = tempfile::tempdir().unwrap();
    for e in std::fs::read_dir(&src).unwrap_or_else(|e| panic!("{}: {e}", src.display())) {
        let e = e.unwrap();
        std::fs::copy(e.path(), dst.path().join(e.file_name())).unwrap();
    }
    dst
}

/// The verdict on a run: its status, whether it passed, and the verdict as its JSON.
fn analyze(dir: &Path) -> (VerdictStatus, bool, serde_json::Value) {
    let v = analyze_run(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    (v.status, v.passed(), serde_json::to_value(&v).unwrap())
}

fn classes(v: &serde_json::Value) -> Vec<String> {
    v["incidents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["class"].as_str().unwrap().to_string())
        .collect()
}

/// The notes of an incident's evidence lines.
fn notes(incident: &serde_json::Value) -> Vec<&str> {
    incident["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["note"].as_str().unwrap())
        .collect()
}

/// Does the incident cite an evidence line containing `text`?
fn cites(i: &serde_json::Value, text: &str) -> bool {
    i["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["text"].as_str().unwrap().contains(text))
}

fn check(rel: &str, must: &[&str], must_not: &[&str]) -> serde_json::Value {
    let dir = run_copy(rel);
    let (status, passed, v) = analyze(dir.path());
    for e in v["expectations"].as_array().unwrap() {
        assert!(
            e["held"].as_bool().unwrap(),
            "{rel}: {} → {}",
            e["text"],
            e["measured"]
        );
    }
    assert_eq!(v["status"], "completed", "{rel}");
    assert_eq!((status, passed), (VerdictStatus::Completed, true), "{rel}");
    let cs = classes(&v);
    for m in must {
        assert!(cs.iter().any(|c| c == m), "{rel}: {m} missing in {cs:?}");
    }
    for m in must_not {
        assert!(!cs.iter().any(|c| c == m), "{rel}: {m} present in {cs:?}");
    }
    // Every incident carries evidence that points at a real file line.
    for i in v["incidents"].as_array().unwrap() {
        let ev = i["evidence"].as_array().unwrap();
        assert!(!ev.is_empty(), "{rel}: incident without evidence");
        assert!(
            ev[0]["at"].as_str().unwrap().contains("access.log"),
            "{rel}: {}",
            ev[0]["at"]
        );
        assert!(!i["fix"].as_str().unwrap().is_empty());
    }
    v
}

#[test]
fn swap_only_has_no_failures() {
    let v = check("synthetic/swap-only", &[], &["generation-race-retry"]);
    assert_eq!(v["incidents"].as_array().unwrap().len(), 0);
    assert_eq!(v["swaps"], 6);
    assert_eq!(v["swap_source"], "dns");
}

#[test]
fn generation_race_retry_is_two_hop_after_swaps() {
    let v = check(
        "synthetic/generation-race",
        &["generation-race-retry"],
        &["maxfails-wipeout", "tries-exhausted"],
    );
    assert_eq!(v["nlu"]["two_hop"], 3);
    assert_eq!(v["nlu"]["multi_hop"], 1);
    assert_eq!(v["nlu"]["paired"], 4);
    // Both swap directions are seen, and NLUs follow swaps of both directions.
    assert_eq!(v["swap_directions"].as_object().unwrap().len(), 2);
    let by_dir = v["nlu_by_swap_direction"].as_object().unwrap();
    assert_eq!(by_dir.len(), 2);
    assert_eq!(by_dir.values().map(|n| n.as_u64().unwrap()).sum::<u64>(), 4);
    let ev = &v["incidents"][0]["evidence"];
    assert!(
        ev.as_array()
            .unwrap()
            .iter()
            .any(|e| e["text"].as_str().unwrap().contains("prematurely closed"))
    );
    assert!(
        ev.as_array()
            .unwrap()
            .iter()
            .any(|e| e["at"].as_str().unwrap().contains("dns.jsonl:"))
    );
}

#[test]
fn first_pick_is_one_hop_aligned_to_swaps() {
    check(
        "synthetic/first-pick",
        &["generation-race-first-pick"],
        &["maxfails-wipeout"],
    );
}

#[test]
fn nxdomain_is_one_requery_period() {
    let v = check(
        "synthetic/dns-nxdomain",
        &["dns-nxdomain"],
        &["maxfails-wipeout"],
    );
    let i = &v["incidents"][0];
    assert_eq!(i["shape"], "burst");
    assert!(i["share_failed"].as_f64().unwrap() > 0.95);
}

#[test]
fn maxfails_wipeout_is_a_burst_after_disabled_peers() {
    let v = check(
        "synthetic/maxfails-wipeout",
        &["maxfails-wipeout", "upstream-failure"],
        &["dns-nxdomain"],
    );
    let w = v["incidents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["class"] == "maxfails-wipeout")
        .unwrap();
    assert!(
        w["evidence"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["text"].as_str().unwrap().contains("temporarily disabled"))
    );
}

#[test]
fn tries_exhausted_without_dns_change() {
    check(
        "synthetic/tries-exhausted",
        &["tries-exhausted", "upstream-failure"],
        &["generation-race-retry"],
    );
}

#[test]
fn zone_memory_and_port_exhaustion() {
    check(
        "synthetic/zone-memory",
        &["zone-memory-exhausted"],
        &["dns-nxdomain"],
    );
    check("synthetic/port-exhaustion", &["port-exhaustion"], &[]);
}

#[test]
fn resolver_timeouts_are_reported_harmless() {
    let v = check("synthetic/dns-silent", &[], &["dns-nxdomain"]);
    let s = v["signatures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == "resolve-timeout")
        .unwrap();
    assert_eq!(s["harmless"], true);
    assert_eq!(s["count"], 4);
}

#[test]
fn injection_that_never_hit_is_not_interpretable() {
    let dir = run_copy("synthetic/injection-miss");
    let (status, passed, v) = analyze(dir.path());
    assert_eq!((status, passed), (VerdictStatus::NotInterpretable, false));
    assert_eq!(v["status"], "not-interpretable");
    assert!(
        v["summary"]
            .as_str()
            .unwrap()
            .contains("injection did not hit — not interpretable")
    );
}

#[test]
fn unheld_expectation_fails_the_run_and_aborted_is_kept() {
    let dir = run_copy("synthetic/swap-only");
    let ex = dir.path().join("expect.json");
    let text = std::fs::read_to_string(&ex)
        .unwrap()
        .replace("\"nlu = 0\"", "\"nlu > 0\", \"bogus = 1\"");
    std::fs::write(&ex, text).unwrap();
    let (status, passed, v) = analyze(dir.path());
    assert_eq!((status, passed), (VerdictStatus::Completed, false));
    let ex = v["expectations"].as_array().unwrap();
    let nlu = ex.iter().find(|e| e["text"] == "nlu > 0").unwrap();
    assert_eq!(
        (nlu["held"].as_bool(), nlu["measured"].as_str()),
        (Some(false), Some("0"))
    );
    let bogus = ex.iter().find(|e| e["text"] == "bogus = 1").unwrap();
    assert!(
        bogus["measured"]
            .as_str()
            .unwrap()
            .contains("cannot parse: unknown metric")
    );
    // A runner that marked the run aborted keeps that status on re-analysis.
    std::fs::write(dir.path().join("verdict.json"), "{\"status\":\"aborted\"}").unwrap();
    let (status, _, v) = analyze(dir.path());
    assert_eq!(
        (status, v["status"].as_str()),
        (VerdictStatus::Aborted, Some("aborted"))
    );
}

/// Runs recorded by `resolvelab run` against the real nginx 1.28 (tests/fixtures/diagnose/README.md).
#[test]
fn real_nginx_runs_are_classified() {
    let v = check(
        "real/generation-race",
        &["generation-race-retry"],
        &["maxfails-wipeout", "dns-nxdomain", "tries-exhausted"],
    );
    assert!(v["nlu"]["total"].as_u64().unwrap() > 0);
    assert_eq!(
        v["nlu"]["one_hop"], 0,
        "every real generation-race NLU is multi-hop"
    );
    assert_eq!(v["nlu"]["paired"], v["nlu"]["total"]);
    let v = check(
        "real/nxdomain",
        &["dns-nxdomain"],
        &["maxfails-wipeout", "generation-race-retry"],
    );
    assert_eq!(v["incidents"].as_array().unwrap().len(), 1);
    let v = check(
        "real/dual-resolve",
        &["maxfails-wipeout", "upstream-failure"],
        &["dns-nxdomain"],
    );
    let w = v["incidents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["class"] == "maxfails-wipeout")
        .unwrap();
    assert_eq!(w["shape"], "burst");
    check(
        "real/dual-resolve.max_fails_0",
        &["upstream-failure"],
        &["maxfails-wipeout", "dns-nxdomain"],
    );
    let v = check("real/dns-silent", &[], &["dns-nxdomain"]);
    assert_eq!(v["incidents"].as_array().unwrap().len(), 0);
    let s = v["signatures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == "resolve-timeout")
        .unwrap();
    assert_eq!(s["harmless"], true);
    // HAProxy 2.6 through a 40 s NXDOMAIN: its own hold ran out (its `proxy-state` event is the
    // evidence), not nginx's immediate removal of every peer.
    let v = check(
        "real/haproxy.nxdomain.nx40s",
        &["dns-hold-expired"],
        &["dns-nxdomain", "maxfails-wipeout", "generation-race-retry"],
    );
    let i = &v["incidents"][0];
    assert_eq!(i["shape"], "burst");
    let d = i["duration_ms"].as_i64().unwrap();
    assert!(
        (10_000..=12_000).contains(&d),
        "40 s − hold nx 30 s + ≤ 1 s poll: {d}"
    );
    assert!(
        cites(i, "going DOWN for maintenance (DNS NX status)"),
        "{i:#}"
    );
    // 40 s of SERVFAIL on HAProxy 2.6: `hold other` 30 s, then maintenance with another reason
    // than an NXDOMAIN's (`unspecified DNS error`), until the first answer after the SERVFAILs.
    let v = check(
        "real/haproxy.dns-silent.servfail40s",
        &["dns-hold-expired"],
        &["dns-nxdomain", "maxfails-wipeout", "generation-race-retry"],
    );
    let i = &v["incidents"][0];
    assert_eq!(i["count"], 3302, "{i:#}");
    let d = i["duration_ms"].as_i64().unwrap();
    assert!(
        (10_500..=11_500).contains(&d),
        "down 05:22:01.269 → up 05:22:12.278: {d}"
    );
    assert!(
        cites(i, "going DOWN for maintenance (unspecified DNS error)"),
        "{i:#}"
    );
    // Envoy 1.40 through a 3 s NXDOMAIN met by one 5 s refresh: its STRICT_DNS cluster applied
    // the empty answer (`DNS hosts have changed`) and had no host until the next refresh.
    let v = check(
        "real/envoy.nxdomain",
        &["dns-cluster-emptied"],
        &[
            "dns-nxdomain",
            "maxfails-wipeout",
            "generation-race-first-pick",
        ],
    );
    let i = &v["incidents"][0];
    let d = i["duration_ms"].as_i64().unwrap();
    assert!((4500..=5500).contains(&d), "one refresh period: {d}");
    assert_eq!(i["count"].as_u64(), Some(1501), "{i:#}");
    // Caddy 2.11 through a 3 s NXDOMAIN that its lookup met: every request of those 3 s
    // looked the name up itself and got 503 `no upstreams available`.
    let v = check(
        "real/caddy.nxdomain.valid30-aligned",
        &["dns-lookup-failed"],
        &["dns-nxdomain", "maxfails-wipeout"],
    );
    let i = &v["incidents"][0];
    let d = i["duration_ms"].as_i64().unwrap();
    assert!((2700..=3300).contains(&d), "{d}");
    assert!(cites(i, "failed getting dynamic upstreams"), "{i:#}");
    let v = check("real/swap-only", &[], &[]);
    assert!(v["swaps"].as_u64().unwrap() >= 2);
    check("real/zone-churn", &[], &["zone-memory-exhausted"]);
}

/// Two upstreams sharing a 32k zone against the real nginx (`scenarios/zone-exhaustion.toml`):
/// the filler's 200-address answer fills the zone, then `be`'s answer changes while its old peer
/// is still referenced by in-flight requests, so the new peer cannot be allocated and `be` has
/// no peer for one re-query period.
#[test]
fn real_nginx_zone_memory_exhausted() {
    let v = check(
        "real/zone-exhaustion",
        &["zone-memory-exhausted"],
        &["dns-nxdomain", "generation-race-retry", "maxfails-wipeout"],
    );
    let inc: Vec<&serde_json::Value> = v["incidents"].as_array().unwrap().iter().collect();
    assert_eq!(inc.len(), 1, "{inc:#?}");
    let i = inc[0];
    // One re-query period (valid 1 s + 1 s) of 1-hop NLUs, every one paired.
    let d = i["duration_ms"].as_i64().unwrap();
    assert!((1700..=2300).contains(&d), "duration {d}");
    assert_eq!(i["hops"]["one_hop"], i["count"]);
    assert_eq!(i["hops"]["paired"], i["count"]);
    assert_eq!(i["shape"], "burst");
    let notes = notes(i);
    assert!(
        notes.iter().any(|n| n.contains("ran out of memory")),
        "{notes:?}"
    );
    let sig = v["signatures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == "zone-memory-exhausted")
        .expect("memory exhausted lines counted");
    assert!(sig["count"].as_u64().unwrap() >= 2);
}

/// The one first-pick race the real nginx has shown us: in a `zone-churn` run (the name
/// switching between one address and 25, `valid=1s`, 100 rps, 50 switches) a request failed
/// with a 1-hop NLU in the very millisecond the answer grew from 1 to 25 peers (5 s cut).
#[test]
fn real_nginx_first_pick_race() {
    let v = check(
        "real/first-pick.zone-churn",
        &["generation-race-first-pick"],
        &[
            "generation-race-retry",
            "dns-nxdomain",
            "zone-memory-exhausted",
        ],
    );
    assert_eq!(v["nlu"]["total"], 1);
    assert_eq!(v["nlu"]["one_hop"], 1);
    assert_eq!(v["nlu"]["paired"], 1);
    let i = &v["incidents"].as_array().unwrap()[0];
    assert_eq!(i["class"], "generation-race-first-pick");
    assert!(
        i["after_swap_ms"].as_i64().unwrap() <= 1,
        "{}",
        i["after_swap_ms"]
    );
    assert!(
        notes(i).iter().any(|n| n.starts_with("peer-list change")),
        "{:?}",
        notes(i)
    );
}

/// The real nginx out of ephemeral ports (`port-exhaustion --variant netns`, first 5 s): the
/// first 500 requests (the port range) succeed, then every connect fails with errno 99.
#[test]
fn real_nginx_port_exhaustion() {
    let v = check(
        "real/port-exhaustion.netns",
        &["port-exhaustion"],
        &["dns-nxdomain", "maxfails-wipeout", "zone-memory-exhausted"],
    );
    assert_eq!(v["http_status"]["200"], 500, "{}", v["http_status"]);
    assert_eq!(v["nlu"]["total"], 0);
    let inc = v["incidents"].as_array().unwrap();
    assert_eq!(inc.len(), 1);
    let i = &inc[0];
    assert_eq!(i["class"], "port-exhaustion");
    assert_eq!(i["shape"], "burst");
    assert!(i["share_failed"].as_f64().unwrap() > 0.95);
    let notes = notes(i);
    assert!(
        notes
            .iter()
            .any(|n| n.contains("ephemeral ports exhausted")),
        "{notes:?}"
    );
}

/// `backup` with `max_fails=0` against the real nginx (a 4 s cut of a 90 s run that produced
/// 822 of them): every peer — the primary and the backup — fails in turn, so the request ends in
/// a 3-hop `IP, BACKUP, be` NLU with no peer-list change nearby: `tries-exhausted`. The three
/// 2-hop NLUs right after the swap at 742.469 stay the generation race.
#[test]
fn real_nginx_tries_exhausted() {
    let v = check(
        "real/backup.max_fails_0",
        &["tries-exhausted", "generation-race-retry"],
        &["maxfails-wipeout", "dns-nxdomain", "upstream-failure"],
    );
    let nlu = &v["nlu"];
    let total = nlu["total"].as_u64().unwrap();
    assert!((30..=45).contains(&total), "nlu {nlu}");
    assert_eq!(
        nlu["paired"], nlu["total"],
        "every NLU has its own error line"
    );
    assert_eq!(
        nlu["one_hop"], 0,
        "no 1-hop NLU: the peers never all went down"
    );
    assert_eq!(v["swaps"], 1);
    assert_eq!(v["swap_source"], "dns");
    let te: Vec<&serde_json::Value> = v["incidents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["class"] == "tries-exhausted")
        .collect();
    assert_eq!(te.len(), 1, "{te:#?}");
    let i = te[0];
    let n = i["count"].as_u64().unwrap();
    assert!(
        n * 10 >= total * 8,
        "most NLUs are tries-exhausted: {n} of {total}"
    );
    // Every tries-exhausted NLU went through every peer: primary, backup, then the group.
    assert_eq!(i["hops"]["multi_hop"], i["count"]);
    assert_eq!(i["hops"]["paired"], i["count"]);
    assert!(i["confidence"].as_f64().unwrap() >= 0.8);
    // Real backend failures among successes, not a burst, and no peer-list change before it.
    assert_eq!(i["shape"], "isolated");
    assert!(i["share_failed"].as_f64().unwrap() < 0.2);
    assert!(i["after_swap_ms"].is_null(), "{}", i["after_swap_ms"]);
    let ev = i["evidence"].as_array().unwrap();
    let notes = notes(i);
    assert!(
        notes[0].starts_with("first failure: status 502, 3+-hop"),
        "{notes:?}"
    );
    let first_try = ev
        .iter()
        .find(|e| e["note"] == "first-try failure on the same *cid")
        .unwrap_or_else(|| panic!("{notes:?}"));
    assert!(first_try["at"].as_str().unwrap().contains("error.log.gz:"));
    assert!(
        first_try["text"]
            .as_str()
            .unwrap()
            .contains("upstream prematurely closed")
    );
    let paired = ev
        .iter()
        .find(|e| {
            e["note"]
                .as_str()
                .unwrap()
                .starts_with("paired `no live upstreams`")
        })
        .unwrap_or_else(|| panic!("{notes:?}"));
    assert!(paired["at"].as_str().unwrap().contains("error.log.gz:"));
    assert!(
        paired["text"]
            .as_str()
            .unwrap()
            .contains("no live upstreams")
    );
    // The same connection id on the first-try line and the NLU line.
    let cid = |e: &serde_json::Value| {
        e["text"]
            .as_str()
            .unwrap()
            .split(' ')
            .nth(1)
            .unwrap()
            .to_string()
    };
    assert_eq!(cid(first_try), cid(paired));
    // The NLU events agree with the incident.
    let events = v["nlu_events"].as_array().unwrap();
    let te_events = events
        .iter()
        .filter(|e| e["class"] == "tries-exhausted")
        .count() as u64;
    assert_eq!(te_events, n);
    assert!(
        events
            .iter()
            .filter(|e| e["class"] == "tries-exhausted")
            .all(|e| e["trajectory"] == "3+-hop")
    );
}
