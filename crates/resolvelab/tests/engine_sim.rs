//! `resolvelab run NAME --engine sim…` as a user runs it: what it prints, `repeat` and its
//! distribution line, variants passed over or refused, errors as one line and exit 2, and `sim
//! predict` on another proxy. What the model engines play and what the checker finds in their
//! runs: `crates/lab/tests/sim_engines.rs`. No network traffic: the models only write files.

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
    use resolvelab_core::evidence::file;
    for f in file::JUDGED.iter().chain(&[file::NGINX_CONF]) {
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

#[test]
fn a_run_prints_its_verdict_and_leaves_its_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let (text, dirs) = run_sim(tmp.path(), &["swap-only"]);
    assert!(text.contains("swap-only: completed"), "{text}");
    let v = assert_green(&dirs[0]);
    assert_eq!(v["nlu"]["total"], 0);
}

#[test]
fn repeat_runs_each_seed_and_prints_the_distribution() {
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

/// What a proxy's model cannot play is refused with the field, one line, exit 2.
#[test]
fn what_a_proxy_model_cannot_play_exits_2() {
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
