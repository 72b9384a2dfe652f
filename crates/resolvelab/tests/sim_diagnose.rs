//! The checker reads a simulated run like a real one: `resolvelab diagnose` on the simulator's
//! logs finds the classes the model knows it produced (its ground truth, `--format json`).

use std::collections::BTreeMap;
use std::path::Path;

mod common;
use common::{bin, run_json, sim_nginx};

/// Simulate `toml` into `dir`; return the model's NLU counts per class.
fn simulate(dir: &Path, toml: &str) -> BTreeMap<String, u64> {
    sim_nginx(dir, toml)["nlu"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, n)| n.as_u64().unwrap() > 0)
        .map(|(k, n)| (k.clone(), n.as_u64().unwrap()))
        .collect()
}

/// Diagnose the run; return requests per class.
fn diagnose(dir: &Path) -> BTreeMap<String, u64> {
    let v = run_json(
        bin()
            .args([
                "diagnose",
                "--log-format",
                "lab",
                "--format",
                "json",
                "--access",
            ])
            .arg(dir.join("access.log"))
            .arg("--error")
            .arg(dir.join("error.log"))
            .arg("--dns")
            .arg(dir.join("dns.jsonl")),
    );
    common::class_requests(&v)
        .into_iter()
        .filter(|(k, _)| k != "upstream-failure")
        .collect()
}

const HEAD: &str = r#"
rps = 300
valid = "5s"
keepalive = 16
"#;

#[test]
fn generation_race_is_diagnosed_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let truth = simulate(
        dir.path(),
        &format!(
            r#"{HEAD}
duration = "120s"
[[servers]]
host = "app.test.local"
resolve = true
[[dns]]
at = "0s"
name = "app.test.local"
mode = "alternate:127.0.0.20,127.0.0.30"
[[faults]]
start = "0s"
end = "120s"
kind = "reclaim"
p = 0.3
"#
        ),
    );
    assert!(truth.contains_key("generation-race-retry"));
    assert_eq!(diagnose(dir.path()), truth);
}

#[test]
fn nxdomain_is_diagnosed_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let truth = simulate(
        dir.path(),
        &format!(
            r#"{HEAD}
duration = "30s"
[[servers]]
host = "app.test.local"
resolve = true
[[dns]]
at = "0s"
name = "app.test.local"
mode = "static:127.0.0.20"
[[dns]]
at = "10s"
name = "app.test.local"
mode = "nxdomain"
[[dns]]
at = "12s"
name = "app.test.local"
mode = "static:127.0.0.20"
"#
        ),
    );
    assert!(truth.contains_key("dns-nxdomain"));
    assert_eq!(diagnose(dir.path()), truth);
}

#[test]
fn maxfails_wipeout_is_diagnosed_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let truth = simulate(
        dir.path(),
        &format!(
            r#"{HEAD}
duration = "40s"
[[servers]]
host = "app.test.local"
resolve = true
[[servers]]
host = "app.test.local"
resolve = true
[[dns]]
at = "0s"
name = "app.test.local"
mode = "static:127.0.0.20"
[[faults]]
start = "10s"
end = "12s"
target = "127.0.0.20:8080"
kind = "refuse"
"#
        ),
    );
    assert!(truth.contains_key("maxfails-wipeout"));
    assert_eq!(diagnose(dir.path()), truth);
}

#[test]
fn fidelity_compares_two_runs() {
    let race = format!(
        r#"{HEAD}
duration = "120s"
[[servers]]
host = "app.test.local"
resolve = true
[[dns]]
at = "0s"
name = "app.test.local"
mode = "alternate:127.0.0.20,127.0.0.30"
[[faults]]
start = "0s"
end = "120s"
kind = "reclaim"
p = 0.3
"#
    );
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    let c = tempfile::tempdir().unwrap();
    simulate(a.path(), &race);
    // Another seed of the same scenario stands in for "the lab": it must agree.
    simulate(b.path(), &race.replace("rps = 300", "seed = 9\nrps = 300"));
    // Without swaps the race vanishes: that must be reported as a disagreement.
    simulate(
        c.path(),
        &race.replace("alternate:127.0.0.20,127.0.0.30", "static:127.0.0.20"),
    );
    let fid = |lab: &Path, sim: &Path| {
        bin()
            .args(["sim", "fidelity", "--name", "generation-race", "--lab"])
            .arg(lab)
            .arg("--sim")
            .arg(sim)
            .output()
            .unwrap()
    };
    let ok = fid(a.path(), b.path());
    let text = String::from_utf8_lossy(&ok.stdout);
    assert!(ok.status.success(), "{text}");
    assert!(text.contains("| generation-race-retry |") && text.contains("agree"));
    let bad = fid(a.path(), c.path());
    assert_eq!(bad.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad.stdout).contains("DISAGREE"));
}
