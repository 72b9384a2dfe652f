//! `resolvelab sim fidelity --format json`: the machine-readable comparison, and `--replay` over
//! a directory of runs. Two simulated runs of the same scenario with different seeds stand
//! in for "lab" and "model" (they must agree); a run without swaps must disagree with exit 1. The
//! JSON, the Markdown and `--json-out` come from one comparison and must say the same thing.

use std::path::Path;
use std::process::Output;

mod common;
use common::{bin, sim_nginx};

/// A generation race: the name alternates between two backends while cached keep-alive
/// connections are reclaimed, so swaps refuse retries.
const RACE: &str = r#"
seed = 1
rps = 300
valid = "5s"
keepalive = 16
duration = "60s"
[[servers]]
host = "app.test.local"
resolve = true
[[dns]]
at = "0s"
name = "app.test.local"
mode = "alternate:127.0.0.20,127.0.0.30"
[[faults]]
start = "0s"
end = "60s"
kind = "reclaim"
p = 0.3
"#;

fn fidelity(lab: &Path, sim: &Path, extra: &[&str]) -> Output {
    bin()
        .args(["sim", "fidelity", "--name", "generation-race", "--lab"])
        .arg(lab)
        .arg("--sim")
        .arg(sim)
        .args(extra)
        .output()
        .unwrap()
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// The structural contract of the JSON object; returns its classes by id.
fn check_shape(v: &serde_json::Value) -> Vec<serde_json::Value> {
    assert_eq!(v["name"], "generation-race");
    for side in ["lab", "model"] {
        let o = v[side].as_object().unwrap_or_else(|| panic!("{side}: {v}"));
        let keys: Vec<&str> = o.keys().map(String::as_str).collect();
        assert_eq!(keys.len(), 3, "{side}: {keys:?}");
        for k in ["requests", "failed", "swaps"] {
            assert!(o[k].is_u64(), "{side}.{k}: {v}");
        }
        assert!(o["failed"].as_u64() <= o["requests"].as_u64());
    }
    let classes = v["classes"].as_array().unwrap().clone();
    for c in &classes {
        assert!(c["class"].is_string(), "{c}");
        for k in [
            "lab_count",
            "model_count",
            "lab_longest_ms",
            "model_longest_ms",
        ] {
            assert!(c[k].is_u64(), "{k}: {c}");
        }
        for k in ["counts_agree", "duration_compared", "durations_agree"] {
            assert!(c[k].is_boolean(), "{k}: {c}");
        }
        // A class appears only if one of the runs has it.
        assert!(c["lab_count"].as_u64().unwrap() + c["model_count"].as_u64().unwrap() > 0);
        // Isolated events have no duration to disagree about.
        if c["duration_compared"] == false {
            assert_eq!(c["durations_agree"], true, "{c}");
        }
    }
    // Sorted by class id, each once.
    let ids: Vec<&str> = classes
        .iter()
        .map(|c| c["class"].as_str().unwrap())
        .collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    // The overall verdict is exactly "every class agrees".
    let all = classes
        .iter()
        .all(|c| c["counts_agree"] == true && c["durations_agree"] == true);
    assert_eq!(v["agree"], all, "{v}");
    classes
}

fn class<'a>(classes: &'a [serde_json::Value], id: &str) -> &'a serde_json::Value {
    classes
        .iter()
        .find(|c| c["class"] == id)
        .unwrap_or_else(|| panic!("no class {id} in {classes:?}"))
}

#[test]
fn agreeing_and_disagreeing_pairs_in_json() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    let c = tempfile::tempdir().unwrap();
    sim_nginx(a.path(), RACE);
    // Another seed of the same scenario stands in for "the lab": it must agree.
    sim_nginx(b.path(), &RACE.replace("seed = 1", "seed = 9"));
    // Without swaps the race vanishes: that must be reported as a disagreement.
    sim_nginx(
        c.path(),
        &RACE.replace("alternate:127.0.0.20,127.0.0.30", "static:127.0.0.20"),
    );

    let ok = fidelity(a.path(), b.path(), &["--format", "json"]);
    assert_eq!(
        ok.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&ok.stdout)
    );
    let v = json(&ok);
    assert_eq!(v["agree"], true);
    let classes = check_shape(&v);
    let race = class(&classes, "generation-race-retry");
    assert!(race["lab_count"].as_u64().unwrap() > 0, "{race}");
    assert!(race["model_count"].as_u64().unwrap() > 0, "{race}");
    assert_eq!(race["counts_agree"], true);
    // Same scenario, same request count and swap schedule on both sides.
    assert_eq!(v["lab"]["requests"], v["model"]["requests"]);
    assert!(v["lab"]["swaps"].as_u64().unwrap() > 0);

    let bad = fidelity(a.path(), c.path(), &["--format", "json"]);
    assert_eq!(
        bad.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
    let v = json(&bad);
    assert_eq!(v["agree"], false);
    let classes = check_shape(&v);
    let race = class(&classes, "generation-race-retry");
    assert!(race["lab_count"].as_u64().unwrap() > 0, "{race}");
    assert_eq!(race["model_count"], 0, "{race}");
    assert_eq!(race["counts_agree"], false);
    assert_eq!(v["model"]["swaps"], 0);

    // The Markdown printed and the JSON written by --json-out come from the same comparison:
    // the JSON equals --format json, and every class row of the table shows its numbers.
    let file = a.path().join("row.json");
    let both = fidelity(a.path(), c.path(), &["--json-out", file.to_str().unwrap()]);
    assert_eq!(both.status.code(), Some(1));
    let written: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(written, v);
    let text = String::from_utf8_lossy(&both.stdout);
    assert!(text.starts_with("### generation-race\n"), "{text}");
    for c in &classes {
        let row = format!(
            "| {} | {} | {} | {} |",
            c["class"].as_str().unwrap(),
            c["lab_count"],
            c["model_count"],
            if c["counts_agree"] == true {
                "agree"
            } else {
                "**DISAGREE**"
            }
        );
        assert!(text.contains(&row), "{row} not in\n{text}");
    }
    assert!(
        text.contains("Verdict: the model DISAGREES with nginx"),
        "{text}"
    );
}

#[test]
fn no_failures_is_an_empty_agreement() {
    let quiet = r#"
seed = 3
rps = 100
valid = "5s"
keepalive = 16
duration = "10s"
[[servers]]
host = "app.test.local"
resolve = true
[[dns]]
at = "0s"
name = "app.test.local"
mode = "static:127.0.0.20"
"#;
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    sim_nginx(a.path(), quiet);
    sim_nginx(b.path(), &quiet.replace("seed = 3", "seed = 4"));
    let out = fidelity(a.path(), b.path(), &["--format", "json"]);
    assert_eq!(out.status.code(), Some(0));
    let v = json(&out);
    check_shape(&v);
    assert_eq!(v["classes"], serde_json::json!([]));
    assert_eq!(v["agree"], true);
    assert_eq!(v["lab"]["failed"], 0);
    assert!(v["lab"]["requests"].as_u64().unwrap() > 0);
}

#[test]
fn a_directory_without_logs_is_one_clear_error() {
    let empty = tempfile::tempdir().unwrap();
    let out = fidelity(empty.path(), empty.path(), &["--format", "json"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("has no access.log"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
}

/// `--replay RUNS`: every run directory under RUNS replayed on the model and compared. Model
/// runs stand in for the lab runs (the replay only reads their directories), so every row must
/// agree; `--update` keeps the page's hand-written text; `sim calibrate` fits the window on the
/// same replays.
#[test]
fn replay_compares_every_run_and_updates_the_page() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    for sc in ["generation-race", "nxdomain"] {
        let o = bin()
            .args([
                "run", sc, "--engine", "sim", "--scale", "0.2", "-q", "--out",
            ])
            .arg(&runs)
            .output()
            .unwrap();
        assert!(o.status.code().is_some_and(|c| c <= 1), "{o:?}");
    }
    let n = std::fs::read_dir(&runs).unwrap().count();
    assert!(n >= 3, "generation-race, nxdomain and its variants: {n}");
    let page = tmp.path().join("FIDELITY.md");
    std::fs::write(
        &page,
        "# F\n\nhand\n\n<!-- BEGIN GENERATED -->\nold\n<!-- END GENERATED -->\n\n## Explained\n",
    )
    .unwrap();
    let o = bin()
        .args(["sim", "fidelity", "--replay"])
        .arg(&runs)
        .arg("--update")
        .arg(&page)
        .arg("--sim-out")
        .arg(tmp.path().join("model"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(err.contains(&format!("[{n}/{n}] ")), "{err}");
    assert!(
        err.contains(&format!("{n} agree, 0 disagree, 0 could not be compared")),
        "{err}"
    );
    let text = std::fs::read_to_string(&page).unwrap();
    assert!(
        text.starts_with("# F\n\nhand\n\n<!-- BEGIN GENERATED by resolvelab sim fidelity"),
        "{text}"
    );
    assert!(
        text.ends_with("<!-- END GENERATED -->\n\n## Explained\n"),
        "{text}"
    );
    assert!(text.contains(&format!("**{n} agree, 0 disagree")), "{text}");
    assert!(text.contains("### generation-race — seed 1"), "{text}");
    assert!(!text.contains("\nold\n"));

    let o = bin()
        .args(["sim", "fidelity", "-q", "--format", "json", "--replay"])
        .arg(&runs)
        .output()
        .unwrap();
    let v = json(&o);
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), n);
    for r in rows {
        assert_eq!(r["outcome"], "agree", "{r}");
        assert_eq!(r["lab_status"], r["model_status"], "{r}");
        assert!(r["fidelity"]["classes"].is_array(), "{r}");
    }

    let o = bin()
        .args(["sim", "calibrate", "--format", "json"])
        .arg(&runs)
        .output()
        .unwrap();
    let c = json(&o);
    assert_eq!(c["runs"], n as u64, "{c}");
    assert!(c["exposure_per_us"].as_f64().unwrap() > 0.0, "{c}");
    let (w, lo, hi) = (
        c["window_us"].as_f64().unwrap(),
        c["interval_us"][0].as_f64().unwrap(),
        c["interval_us"][1].as_f64().unwrap(),
    );
    assert!(lo <= w && w < hi, "{c}");

    // Nothing to replay: one line naming what to run.
    let o = bin()
        .args(["sim", "fidelity", "--replay"])
        .arg(tmp.path().join("model"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("resolvelab run --all --out") && err.trim_end().lines().count() == 1,
        "{err}"
    );
}
