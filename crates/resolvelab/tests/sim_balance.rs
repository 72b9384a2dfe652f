//! `resolvelab sim balance` end to end: formats, input files and one-line errors.

mod common;
use common::{bin, run_ok};

#[test]
fn golden_table_shows_the_seed_rows() {
    let out = bin().args(["sim", "balance", "--golden"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let row = |id: &str| {
        text.lines()
            .find(|l| l.split_whitespace().next() == Some(id))
            .unwrap_or_else(|| panic!("no row {id} in\n{text}"))
            .split_whitespace()
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    // id arrival service dnsReturned expires selected reused connection activeBefore doneAt
    assert_eq!(row("req-1")[5..8], ["A", "true", "conn-1"]);
    assert_eq!(row("req-5")[5..8], ["A", "false", "conn-3"]);
    assert_eq!(row("req-6")[4], "10");
    assert_eq!(row("req-8")[3..6], ["A,B", "10", "B"]);
    assert_eq!(row("req-11")[3..8], ["B,C", "15", "B", "true", "conn-2"]);
    assert_eq!(row("req-12")[5..8], ["C", "false", "conn-4"]);
}

#[test]
fn json_is_an_array_of_request_objects() {
    let out = bin()
        .args([
            "sim",
            "balance",
            "--golden",
            "--strategy",
            "proxy-weighted",
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let arr = v.as_array().unwrap();
    assert_eq!(arr.len(), 12);
    for key in [
        "id",
        "arrival",
        "service",
        "dnsReturned",
        "dnsCacheExpiresAt",
        "selected",
        "reused",
        "connection",
        "activeBefore",
        "doneAt",
    ] {
        assert!(arr[0].get(key).is_some(), "missing {key}");
    }
    assert_eq!(arr[0]["id"], "req-1");
    assert_eq!(arr[6]["selected"], "C");
}

#[test]
fn input_file_html_and_errors() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("golden.json");
    let out = bin()
        .args(["sim", "balance", "--golden", "--print-input", "--out"])
        .arg(&input)
        .output()
        .unwrap();
    assert!(out.status.success());
    let html = dir.path().join("t.html");
    run_ok(
        bin()
            .args(["sim", "balance", "--format", "html", "--input"])
            .arg(&input)
            .arg("--out")
            .arg(&html),
    );
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("<svg") && page.contains("conn-4"));

    // Unhealthy B under the DNS strategy: a loud, one-line failure.
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&input).unwrap()).unwrap();
    v["backends"][1]["healthy"] = false.into();
    let sick = dir.path().join("sick.json");
    std::fs::write(&sick, v.to_string()).unwrap();
    let out = bin()
        .args(["sim", "balance", "--input"])
        .arg(&sick)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("DNS returned unhealthy backend B"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");

    // Validation error names the file and the field.
    v["backends"][1]["healthy"] = true.into();
    v["maxStreams"] = 0.into();
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, v.to_string()).unwrap();
    let out = bin()
        .args(["sim", "balance", "--input"])
        .arg(&bad)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("bad.json") && err.contains("maxStreams"),
        "{err}"
    );

    let out = bin()
        .args(["sim", "balance", "--golden", "--strategy", "random"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown strategy"));
}
