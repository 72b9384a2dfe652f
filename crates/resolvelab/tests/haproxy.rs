//! The `haproxy` engine end to end: HAProxy 2.6 fetched from Debian's archive on first use (as
//! on a fresh machine), its configuration rendered from a scenario, its log read by the one
//! checker. Traffic stays on loopback.

use serde_json::Value;
use std::path::{Path, PathBuf};

mod common;
use common::bin;

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

#[test]
fn an_nxdomain_longer_than_hold_nx_takes_the_server_to_maintenance() {
    let tmp = tempfile::tempdir().unwrap();
    // nxdomain without its variants, a 9 s NXDOMAIN, and HAProxy told to hold for 3 s.
    let base = library_text("nxdomain");
    let base = &base[..base.find("[[variant]]").unwrap()];
    let text = base
        .replace("for = \"3s\"\nalign = \"next-requery\"", "for = \"9s\"")
        .replace("duration = \"40s\"", "duration = \"24s\"")
        + "\n[haproxy]\nresolvers = [\"hold nx 3s\"]\n";
    assert!(text.contains("for = \"9s\""), "{text}");
    let file = tmp.path().join("nx-hold.toml");
    std::fs::write(&file, text).unwrap();
    let out = tmp.path().join("runs");
    let o = bin()
        .args([
            "run",
            file.to_str().unwrap(),
            "--engine",
            "haproxy",
            "-q",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    // The expectations were written for nginx (a 6 s outage): exit 1 is a finding, 2 an error.
    assert!(
        matches!(o.status.code(), Some(0 | 1)),
        "{stdout}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let dir = only_run(&out);
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
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("verdict.json")).unwrap()).unwrap();
    let d = &v; // the diagnosis is flattened into the verdict
    // Held for 3 s, then no server until HAProxy's next poll (every 1 s) after the 9 s:
    // about 6 s of 503s, which the checker reads as failures with no upstream.
    let nlu = d["nlu"]["total"].as_u64().unwrap();
    assert!((1200..=2400).contains(&nlu), "~6 s at 300 rps: {nlu}");
    let longest = d["incidents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["duration_ms"].as_i64().unwrap())
        .max()
        .unwrap();
    assert!((4500..=7500).contains(&longest), "{longest}");
    // Its own class: the hold ran out (the event is the evidence), not nginx's NXDOMAIN.
    let classes: Vec<&str> = d["classes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["class"].as_str().unwrap())
        .collect();
    assert_eq!(classes, ["dns-hold-expired"], "{:#}", d["classes"]);
    // HAProxy polls its resolvers every second whatever the TTL.
    let period = d["requery_period_ms"].as_f64().unwrap();
    assert!((period - 1000.0).abs() < 100.0, "{period}");
}

#[test]
fn what_haproxy_cannot_play_is_refused_before_anything_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let o = bin()
        .args(["run", "retry-shim", "--engine", "haproxy", "--out"])
        .arg(tmp.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("retry_shim") && err.contains("--engine nginx"),
        "{err}"
    );
    assert!(
        std::fs::read_dir(tmp.path()).unwrap().next().is_none(),
        "no run directory"
    );
}
