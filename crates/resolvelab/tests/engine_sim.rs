//! `resolvelab run NAME --engine sim` end to end: library scenarios on the simulated nginx leave a
//! lab-shaped run directory, the checker's verdict holds the scenario's expectations, and the same
//! seed gives byte-identical logs. No network traffic: the model only writes files.

use std::path::{Path, PathBuf};

mod common;
use common::bin;

/// Run `resolvelab run ARGS --engine sim --out OUT -q`; returns stdout and the run directories.
fn run_sim(out: &Path, args: &[&str]) -> (String, Vec<PathBuf>) {
    let o = bin()
        .arg("run")
        .args(args)
        .args(["--engine", "sim", "-q", "--out"])
        .arg(out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "resolvelab run {args:?} --engine sim: {:?}\nstdout:\n{stdout}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    (stdout, run_dirs(out))
}

/// The run directories under `out`, sorted.
fn run_dirs(out: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(out)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs
}

fn verdict(dir: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join("verdict.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Every expectation held, the run is interpretable, and the directory is complete.
fn assert_green(dir: &Path) -> serde_json::Value {
    for f in [
        "scenario.toml",
        "expect.json",
        "fingerprint.json",
        "nginx.conf",
        "access.log",
        "error.log",
        "dns.jsonl",
        "events.jsonl",
        "load.jsonl",
        "run.json",
        "verdict.json",
        "verdict.md",
        "verdict.html",
    ] {
        assert!(dir.join(f).is_file(), "{} lacks {f}", dir.display());
    }
    let v = verdict(dir);
    assert_eq!(v["status"], "completed", "{}: {v:#}", dir.display());
    let exps = v["expectations"].as_array().unwrap();
    assert!(!exps.is_empty());
    for e in exps {
        assert_eq!(e["held"], true, "{}: {e}", dir.display());
    }
    let fp: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("fingerprint.json")).unwrap())
            .unwrap();
    assert_eq!(fp["engine"], "sim");
    assert_eq!(fp["nginx_v"], "");
    v
}

fn classes(v: &serde_json::Value) -> Vec<String> {
    let mut c: Vec<String> = v["incidents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["class"].as_str().unwrap().to_string())
        .collect();
    c.sort();
    c.dedup();
    c
}

#[test]
fn swap_only_and_generation_race() {
    let tmp = tempfile::tempdir().unwrap();
    let (text, dirs) = run_sim(tmp.path(), &["swap-only"]);
    assert!(text.contains("swap-only: completed"), "{text}");
    let v = assert_green(&dirs[0]);
    assert_eq!(v["nlu"]["total"], 0);
    assert!(v["swaps"].as_u64().unwrap() >= 8);

    let tmp = tempfile::tempdir().unwrap();
    let (text, dirs) = run_sim(tmp.path(), &["generation-race"]);
    assert!(text.contains("generation-race: completed"), "{text}");
    let v = assert_green(&dirs[0]);
    let nlu = v["nlu"]["total"].as_u64().unwrap();
    // §8: 41 in 36,000 on this machine; a Poisson-wide band, never an exact count.
    assert!((15..=90).contains(&nlu), "{nlu}");
    assert_eq!(classes(&v), ["generation-race-retry"]);
    // The reclaim faults hit, and run.json says so by backend name, like the real runner.
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dirs[0].join("run.json")).unwrap()).unwrap();
    assert!(run["hits"]["fault:b1:reclaim"].as_u64().unwrap() > 1000);
    assert!(run["hits"]["fault:b2:reclaim"].as_u64().unwrap() > 1000);
    let events = std::fs::read_to_string(dirs[0].join("events.jsonl")).unwrap();
    assert!(events.contains(r#""target":"b1""#), "{events}");
}

#[test]
fn nxdomain_outage_is_one_requery_period() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, dirs) = run_sim(tmp.path(), &["nxdomain", "--variant", "base"]);
    let v = assert_green(&dirs[0]);
    assert_eq!(classes(&v), ["dns-nxdomain"]);
    let inc = &v["incidents"][0];
    let d = inc["duration_ms"].as_i64().unwrap();
    assert!((5400..=6600).contains(&d), "{d}");
    // The aligned injection hit: its dns-mode-end event carries the hits.
    let events = std::fs::read_to_string(dirs[0].join("events.jsonl")).unwrap();
    let end = events
        .lines()
        .find(|l| l.contains("dns-mode-end"))
        .expect("a dns-mode-end event");
    let e: serde_json::Value = serde_json::from_str(end).unwrap();
    assert!(e["hits"].as_u64().unwrap() >= 1, "{end}");
}

#[test]
fn dual_resolve_wipeout_and_its_fix() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, dirs) = run_sim(tmp.path(), &["dual-resolve", "--variant", "base"]);
    let v = assert_green(&dirs[0]);
    assert!(classes(&v).contains(&"maxfails-wipeout".to_string()));

    let tmp = tempfile::tempdir().unwrap();
    let (_, dirs) = run_sim(tmp.path(), &["dual-resolve", "--variant", "max_fails=0"]);
    let v = assert_green(&dirs[0]);
    assert_eq!(v["nlu"]["total"], 0);
    assert_eq!(classes(&v), ["upstream-failure"]);
}

#[test]
fn per_dc_and_rto() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, dirs) = run_sim(tmp.path(), &["per-dc"]);
    let v = assert_green(&dirs[0]);
    assert_eq!(v["client"]["errors"], 0);

    let tmp = tempfile::tempdir().unwrap();
    let (text, dirs) = run_sim(tmp.path(), &["rto", "--variant", "base"]);
    // repeat = 5: five runs with seeds 1..5, each green, and a distribution line.
    assert_eq!(dirs.len(), 5, "{text}");
    let mut longest = Vec::new();
    for d in &dirs {
        let v = assert_green(d);
        longest.push(v["incidents"][0]["duration_ms"].as_i64().unwrap());
    }
    assert!(text.contains("longest incident over 5 runs"), "{text}");
    // RTO ~ U(0, valid + 1 s]: the seeds' jitter spreads them.
    longest.sort_unstable();
    assert!(longest[4] - longest[0] > 1000, "{longest:?}");
    assert!(longest[4] <= 6500, "{longest:?}");
}

#[test]
fn same_seed_same_bytes_and_another_seed_differs() {
    let logs = |seed: &str| {
        let tmp = tempfile::tempdir().unwrap();
        let (_, dirs) = run_sim(tmp.path(), &["generation-race", "--seed", seed]);
        [
            "access.log",
            "error.log",
            "dns.jsonl",
            "events.jsonl",
            "load.jsonl",
        ]
        .map(|f| std::fs::read(dirs[0].join(f)).unwrap())
    };
    let a = logs("7");
    let b = logs("7");
    for (x, y) in a.iter().zip(&b) {
        assert!(x == y, "same seed, different bytes");
    }
    assert!(!a[0].is_empty());
    let c = logs("8");
    assert!(a[0] != c[0], "another seed gives another history");
}

#[test]
fn what_the_model_cannot_express_is_refused_with_the_field() {
    let tmp = tempfile::tempdir().unwrap();
    let sc = tmp.path().join("planned.toml");
    std::fs::write(
        &sc,
        r#"version = 1
name = "planned"
description = "d"
question = "q"
[nginx]
valid = "5s"
connect_timeout = "1s"
[[nginx.server]]
host = "app.test.local"
[dns.names]
"app.test.local" = "static:@b1"
[[backend]]
name = "b1"
[load]
rate = "100"
duration = "10s"
"#,
    )
    .unwrap();
    let o = bin()
        .arg("run")
        .arg(&sc)
        .args(["--engine", "sim", "-q", "--out"])
        .arg(tmp.path().join("runs"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("nginx.connect_timeout"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "one clear line: {err}");
}

#[test]
fn slow_dependency_pool_staircase_and_probes() {
    // The DB pool model: 9 × 200 ms round trips per request through 4 connections, a burst
    // that queues in batches, a readiness probe that times out behind it, the control fast.
    let tmp = tempfile::tempdir().unwrap();
    let (_, dirs) = run_sim(tmp.path(), &["slow-dependency"]);
    let v = assert_green(&dirs[0]);
    assert_eq!(v["nlu"]["total"], 0);
    for f in ["backends.json", "probes.jsonl"] {
        assert!(dirs[0].join(f).is_file(), "{f}");
    }
    // The link's latency fault counts the pool connections it carried, like the lab proxy.
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dirs[0].join("run.json")).unwrap()).unwrap();
    assert_eq!(
        run["hits"]["fault:db-link:latency_downstream"], 4,
        "{run:#}"
    );
}

#[test]
fn zone_exhaustion_and_its_large_zone() {
    // Both variants: the shared 32k zone leaves `be` without a peer for one re-query period;
    // 1m holds everything.
    let tmp = tempfile::tempdir().unwrap();
    let (text, dirs) = run_sim(tmp.path(), &["zone-exhaustion"]);
    assert_eq!(dirs.len(), 2, "{text}");
    let v = assert_green(&dirs[0]);
    assert_eq!(classes(&v), ["zone-memory-exhausted"]);
    let err = std::fs::read_to_string(dirs[0].join("error.log")).unwrap();
    assert!(err.contains("cannot add new server to upstream \"be\", memory exhausted"));
    let v = assert_green(&dirs[1]);
    assert_eq!(v["nlu"]["total"], 0);
}

#[test]
fn port_exhaustion_only_without_time_wait_reuse() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, dirs) = run_sim(tmp.path(), &["port-exhaustion", "--variant", "netns"]);
    let v = assert_green(&dirs[0]);
    assert_eq!(classes(&v), ["port-exhaustion"]);
    // Nothing in a namespace is touched: the model only reads the sysctl values.
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dirs[0].join("run.json")).unwrap()).unwrap();
    assert_eq!(run["status"], "completed", "{run:#}");
}

/// `resolvelab run NAME --engine ENGINE --out OUT -q` for a proxy model; returns the run
/// directories.
fn run_engine(out: &Path, args: &[&str], engine: &str) -> Vec<PathBuf> {
    let o = bin()
        .arg("run")
        .args(args)
        .args(["--engine", engine, "-q", "--out"])
        .arg(out)
        .output()
        .unwrap();
    // The expectations were written for nginx: 1 is a finding, 2 an error.
    assert!(
        matches!(o.status.code(), Some(0 | 1)),
        "{engine}: {}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    run_dirs(out)
}

/// The other proxies' models play library scenarios into the same run directory, and the
/// checker gives each its own class: Envoy's emptied cluster, HAProxy's held address.
#[test]
fn the_proxy_models_play_library_scenarios() {
    let tmp = tempfile::tempdir().unwrap();
    let dirs = run_engine(tmp.path(), &["nxdomain", "--variant", "base"], "sim-envoy");
    let v = verdict(&dirs[0]);
    assert_eq!(classes(&v), ["dns-cluster-emptied"], "{:#}", v["classes"]);
    let d = v["incidents"][0]["duration_ms"].as_i64().unwrap();
    assert!((4500..=5500).contains(&d), "one 5 s refresh: {d}");
    assert!(
        dirs[0].join("envoy.json").is_file(),
        "the real proxy's config, for reference"
    );
    let fp: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dirs[0].join("fingerprint.json")).unwrap())
            .unwrap();
    assert_eq!(fp["engine"], "sim-envoy");

    let tmp = tempfile::tempdir().unwrap();
    let dirs = run_engine(
        tmp.path(),
        &["nxdomain", "--variant", "nx40s"],
        "sim-haproxy",
    );
    let v = verdict(&dirs[0]);
    assert_eq!(classes(&v), ["dns-hold-expired"], "{:#}", v["classes"]);
    let d = v["incidents"][0]["duration_ms"].as_i64().unwrap();
    // The lab: 11.0 s (40 s − hold nx 30 s, plus the polls' phase).
    assert!((10_000..=12_000).contains(&d), "{d}");

    // What the model cannot play is refused with the field, before anything is written.
    let tmp = tempfile::tempdir().unwrap();
    let o = bin()
        .args(["run", "dual-resolve", "--engine", "sim-caddy", "--out"])
        .arg(tmp.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("not Rst"), "{err}");
}

/// `sim predict --engine haproxy`: HAProxy closes what a failed reused connection breaks, and
/// its `retry-on` mitigation removes it.
#[test]
fn predict_on_another_proxy() {
    let o = bin()
        .args([
            "sim",
            "predict",
            "--engine",
            "haproxy",
            "--rps",
            "500",
            "--sample",
            "2m",
            "--first-try-failure",
            "0.01",
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let rows: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(rows[0]["variant"], "baseline");
    let closed = rows[0]["closed"]["count"].as_u64().unwrap();
    // 1 % of 60,000 requests, give or take the share that reuses a connection.
    assert!((300..=700).contains(&closed), "{closed}");
    assert_eq!(rows[1]["variant"], "retry-on");
    assert_eq!(rows[1]["total"]["count"], 0);
}

#[test]
fn a_variant_for_other_engines_is_passed_over_unless_named() {
    // `swap-only [envoy-logical]` applies to Envoy only: running the scenario's variants on the
    // model passes it over and says so; naming it is an error with the scenario's line.
    let tmp = tempfile::tempdir().unwrap();
    let o = bin()
        .args(["run", "swap-only", "--engine", "sim", "-q", "--out"])
        .arg(tmp.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert!(
        stderr.contains("swap-only [envoy-logical]: passed over on --engine sim:")
            && stderr.contains("applies to envoy only"),
        "{stderr}"
    );
    assert_eq!(run_dirs(tmp.path()).len(), 1, "only the base ran");
    let o = bin()
        .args([
            "run",
            "swap-only",
            "--variant",
            "envoy-logical",
            "--engine",
            "sim",
            "-q",
            "--out",
        ])
        .arg(tmp.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("swap-only.toml:"), "{stderr}");
}
