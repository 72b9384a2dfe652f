//! `resolvelab diagnose` on production-shaped logs: a custom log_format read from `nginx -T`
//! output, rotation with gzip, two error_log files, malformed lines, no DNS log.

use std::path::{Path, PathBuf};
use std::process::Command;

fn prod() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/diagnose/synthetic/production")
}

fn diagnose(extra: &[&str]) -> (std::process::Output, Option<serde_json::Value>) {
    let p = prod();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_resolvelab"));
    cmd.arg("diagnose")
        .arg("--access")
        .args([
            p.join("access.log"),
            p.join("access.log.2.gz"),
            p.join("access.log.1"),
        ])
        .arg("--error")
        .args([p.join("error.log"), p.join("upstream-error.log")])
        .args(extra);
    let out = cmd.output().unwrap();
    let v = serde_json::from_slice(&out.stdout).ok();
    (out, v)
}

#[test]
fn custom_format_rotation_gzip_two_error_logs() {
    let conf = prod().join("nginx-T.txt");
    let (out, v) = diagnose(&["--nginx-conf", conf.to_str().unwrap(), "--format", "json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = v.expect("one JSON document on stdout");
    assert_eq!(v["schema"], "resolvelab.diagnosis/v1");
    assert_eq!(v["requests"], 900);
    assert_eq!(v["http_status"]["502"], 61);
    assert_eq!(v["inputs"]["tz_offset"], "+09:00");
    assert_eq!(v["inputs"]["tz_source"], "time_local");
    // Swaps inferred from $upstream_addr transitions, every 6 s.
    assert_eq!(v["swap_source"], "inferred");
    assert_eq!(v["requery_period_ms"], 6000.0);
    let classes: Vec<&str> = v["incidents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["class"].as_str().unwrap())
        .collect();
    assert_eq!(
        classes,
        [
            "generation-race-retry",
            "generation-race-retry",
            "dns-nxdomain"
        ]
    );
    // The NXDOMAIN line lives in the other error_log file than the NLU lines.
    let nx = &v["incidents"][2];
    let ats: Vec<&str> = nx["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["at"].as_str().unwrap())
        .collect();
    assert!(ats.iter().any(|a| a.ends_with("/error.log:1")), "{ats:?}");
    assert!(
        ats.iter().any(|a| a.contains("upstream-error.log:")),
        "{ats:?}"
    );
    assert!(ats[0].contains("access.log:"), "{ats:?}");
    assert_eq!(v["nlu"]["paired"], 61);
    // Malformed lines are counted with samples (file:line) and never fatal.
    assert_eq!(v["parse"]["malformed"], 2);
    let f = v["parse"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"].as_str().unwrap().ends_with("access.log.1"))
        .unwrap();
    let lines: Vec<u64> = f["samples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["line"].as_u64().unwrap())
        .collect();
    assert_eq!(lines, [152, 158]);
}

#[test]
fn log_format_text_and_upstream_filter() {
    let fmt = std::fs::read_to_string(prod().join("log_format.txt")).unwrap();
    let (out, v) = diagnose(&[
        "--log-format",
        fmt.trim(),
        "--upstream",
        "nope",
        "--format",
        "json",
    ]);
    assert!(out.status.success());
    let v = v.unwrap();
    assert_eq!(v["requests"], 900);
    assert_eq!(v["incidents"].as_array().unwrap().len(), 0);
}

#[test]
fn wrong_format_names_the_field_and_the_nearest_guess() {
    // The lab format on combined-style lines: nothing parses, but the report says why.
    let (out, v) = diagnose(&["--log-format", "lab", "--format", "json"]);
    // The report is written, and the exit status says nothing could be diagnosed.
    assert_eq!(out.status.code(), Some(3));
    let v = v.unwrap();
    assert_eq!(v["requests"], 0);
    let f = &v["parse"]["files"][0];
    assert!(
        f["samples"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("$msec"),
        "{}",
        f["samples"][0]
    );
    let guess = f["guess"].as_str().unwrap();
    // The closest known format is `combined`; the user's format has extra fields after it.
    assert!(
        guess.contains("`combined`") && guess.contains("rt="),
        "{guess}"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("no access-log line matched"));
}

#[test]
fn markdown_is_the_default_and_output_file_works() {
    let dir = tempfile::tempdir().unwrap();
    let o = dir.path().join("r.md");
    let conf = prod().join("nginx-T.txt");
    let (out, _) = diagnose(&[
        "--nginx-conf",
        conf.to_str().unwrap(),
        "-o",
        o.to_str().unwrap(),
    ]);
    assert!(out.status.success());
    assert!(out.stdout.is_empty());
    let md = std::fs::read_to_string(o).unwrap();
    assert!(md.starts_with("# resolvelab diagnosis"));
    assert!(md.contains("| 3 | `dns-nxdomain` |"), "{md}");
    assert!(md.contains("**Fix:**"));
}

#[test]
fn user_mistakes_get_one_clear_line() {
    let bin = env!("CARGO_BIN_EXE_resolvelab");
    let cases: &[(&[&str], &str)] = &[
        (
            &["diagnose", "--access", "/nonexistent/access.log"],
            "cannot open /nonexistent/access.log",
        ),
        (
            &["diagnose", "--access", "x", "--log-format", "mine"],
            "--nginx-conf FILE --log-format-name mine",
        ),
        (
            &[
                "diagnose",
                "--access",
                "x",
                "--log-format",
                "$status $request",
            ],
            "has no $msec",
        ),
        (
            &["diagnose", "--access", "x", "--tz-offset", "nine"],
            "--tz-offset `nine`",
        ),
        (&["analyze", "/nonexistent/run"], "is not a run directory"),
        (&["diagnose", "--access", "/tmp"], "/tmp is a directory"),
    ];
    for (args, want) in cases {
        let out = Command::new(bin).args(*args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(!err.contains("panicked"));
    }
}
