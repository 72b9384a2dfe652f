//! `resolvelab analyze`'s contract: the exit status (0 held, 1 an expectation not held, 3 not
//! interpretable or aborted), the verdict files it writes or, with `--no-write`, does not. What
//! the verdicts say is the checker's: `crates/diagnose/tests/lab_runs.rs`.

mod common;

use std::path::{Path, PathBuf};

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/diagnose")
        .join(rel)
}

/// A fixture run copied into a temp dir, since analyze writes into it.
fn run_copy(rel: &str) -> tempfile::TempDir {
    let dst = tempfile::tempdir().unwrap();
    for e in std::fs::read_dir(fixture(rel)).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), dst.path().join(e.file_name())).unwrap();
    }
    dst
}

fn analyze(dir: &Path, extra: &[&str]) -> (Option<i32>, String) {
    let out = common::bin()
        .arg("analyze")
        .args(extra)
        .arg(dir)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

const VERDICT_FILES: [&str; 3] = ["verdict.json", "verdict.md", "verdict.html"];

#[test]
fn a_held_run_exits_0_and_writes_its_verdict_unless_told_not_to() {
    let dir = run_copy("synthetic/swap-only");
    let (code, out) = analyze(dir.path(), &["--no-write", "--format", "json"]);
    assert_eq!(code, Some(0), "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["status"], "completed");
    for f in VERDICT_FILES {
        assert!(!dir.path().join(f).exists(), "{f} written with --no-write");
    }
    let (code, out) = analyze(dir.path(), &[]);
    assert_eq!(code, Some(0));
    assert!(out.starts_with('#'), "markdown by default: {out}");
    for f in VERDICT_FILES {
        assert!(dir.path().join(f).exists(), "{f} not written");
    }
    let written: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("verdict.json")).unwrap()).unwrap();
    assert_eq!(written["swaps"], v["swaps"]);
}

#[test]
fn an_unheld_expectation_exits_1() {
    let dir = run_copy("synthetic/swap-only");
    let ex = dir.path().join("expect.json");
    let text = std::fs::read_to_string(&ex)
        .unwrap()
        .replace("\"nlu = 0\"", "\"nlu > 0\"");
    std::fs::write(&ex, text).unwrap();
    assert_eq!(analyze(dir.path(), &["--no-write"]).0, Some(1));
}

#[test]
fn a_run_that_cannot_be_judged_exits_3() {
    let dir = run_copy("synthetic/injection-miss");
    assert_eq!(analyze(dir.path(), &[]).0, Some(3));
    let md = std::fs::read_to_string(dir.path().join("verdict.md")).unwrap();
    assert!(md.contains("did not hit"), "{md}");
    // A runner that marked the run aborted keeps that status on re-analysis.
    let dir = run_copy("synthetic/swap-only");
    std::fs::write(dir.path().join("verdict.json"), "{\"status\":\"aborted\"}").unwrap();
    assert_eq!(analyze(dir.path(), &["--no-write"]).0, Some(3));
}
