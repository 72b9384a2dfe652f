//! `resolvelab diagnose` inputs as a user pipes them (`-`, FIFOs, `/dev/stdin`, `<(…)`), read
//! once; an error log alone; and the documented exit statuses for cron jobs and CI.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;

fn prod() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/diagnose/synthetic/production")
}

/// `resolvelab diagnose --format FORMAT` of the production fixture's configuration and access
/// logs, to be given its error log.
fn production(format: &str) -> std::process::Command {
    let p = prod();
    let mut cmd = common::bin();
    cmd.args(["diagnose", "--format", format])
        .arg("--nginx-conf")
        .arg(p.join("nginx-T.txt"))
        .arg("--access")
        .args([
            p.join("access.log.2.gz"),
            p.join("access.log.1"),
            p.join("access.log"),
        ]);
    cmd
}

/// The production fixture's diagnosis with its access logs as files and `--error` as given.
fn diagnose(error: &[&str], stdin: Option<&Path>) -> (Option<i32>, serde_json::Value) {
    let mut cmd = production("json");
    cmd.arg("--error").args(error);
    cmd.stdin(match stdin {
        Some(f) => Stdio::from(std::fs::File::open(f).unwrap()),
        None => Stdio::null(),
    });
    let out = cmd.output().unwrap();
    let v = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code(), v)
}

fn summary(v: &serde_json::Value) -> (u64, u64, u64, Vec<String>) {
    let classes = v["incidents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["class"].as_str().unwrap().to_string())
        .collect();
    (
        v["requests"].as_u64().unwrap(),
        v["nlu"]["paired"].as_u64().unwrap(),
        v["parse"]["files"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["kind"] == "error")
            .map(|f| f["parsed"].as_u64().unwrap())
            .sum(),
        classes,
    )
}

#[test]
fn stdin_fifo_and_dev_stdin_read_like_files() {
    let p = prod();
    let (err, up) = (p.join("error.log"), p.join("upstream-error.log"));
    let (code, files) = diagnose(&[err.to_str().unwrap(), up.to_str().unwrap()], None);
    assert_eq!(code, Some(0));
    let want = summary(&files);
    assert!(want.1 > 0 && want.2 > 0, "{want:?}");

    let (code, v) = diagnose(&["-", up.to_str().unwrap()], Some(&err));
    assert_eq!((code, summary(&v)), (Some(0), want.clone()), "`-`");

    let (code, v) = diagnose(&["/dev/stdin", up.to_str().unwrap()], Some(&err));
    assert_eq!((code, summary(&v)), (Some(0), want.clone()), "/dev/stdin");

    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("error.fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let text = std::fs::read(&err).unwrap();
    let writer = {
        let fifo = fifo.clone();
        // Blocks until the tool opens the FIFO; ends when all is written.
        std::thread::spawn(move || {
            std::fs::OpenOptions::new()
                .write(true)
                .open(fifo)
                .unwrap()
                .write_all(&text)
                .unwrap()
        })
    };
    let (code, v) = diagnose(&[fifo.to_str().unwrap(), up.to_str().unwrap()], None);
    writer.join().unwrap();
    assert_eq!((code, summary(&v)), (Some(0), want), "FIFO");
}

#[test]
fn standard_input_is_taken_once() {
    let out = common::bin()
        .args(["diagnose", "--access", "-", "--error", "-"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("once"));
}

#[test]
fn an_error_log_alone_is_diagnosed_from_its_own_lines() {
    let p = prod();
    let v = common::run_json(
        common::bin()
            .args([
                "diagnose",
                "--format",
                "json",
                "--tz-offset",
                "+09:00",
                "--error",
            ])
            .args([p.join("error.log"), p.join("upstream-error.log")]),
    );
    assert_eq!(v["requests"], 0);
    assert!(v["failures"].as_u64().unwrap() > 0);
    assert_eq!(v["evidence"]["access_log"], false);
    assert_eq!(v["evidence"]["missing"][0]["what"], "the access log");
    // An error log of which no line parses: nothing to diagnose, and the message says which log.
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("error.log");
    std::fs::write(&junk, "[error] 16#0: a line without its timestamp\n").unwrap();
    let out = common::bin()
        .args(["diagnose", "--format", "json", "--error"])
        .arg(&junk)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no error-log line"));
    for i in v["incidents"].as_array().unwrap() {
        // No access log: no share of requests, no burst, and so no race without a DNS log.
        assert_eq!(i["shape"], "unknown", "{i}");
        assert!(
            !i["class"].as_str().unwrap().starts_with("generation-race"),
            "{i}"
        );
    }
}

#[test]
fn exit_status_tells_cron_what_happened() {
    let p = prod();
    let access = p.join("access.log");
    let error = p.join("error.log");
    let run = |extra: &[&str]| {
        common::bin()
            .args(["diagnose", "--format", "json", "--nginx-conf"])
            .arg(p.join("nginx-T.txt"))
            .arg("--access")
            .arg(&access)
            .arg("--error")
            .arg(&error)
            .args(extra)
            .output()
            .unwrap()
    };
    let found = run(&["--fail-on", "dns-nxdomain"]);
    assert_eq!(found.status.code(), Some(1), "a --fail-on class was found");
    assert!(String::from_utf8_lossy(&found.stderr).contains("dns-nxdomain"));
    assert_eq!(
        run(&["--fail-on", "port-exhaustion"]).status.code(),
        Some(0)
    );
    let bogus = run(&["--fail-on", "nosuch"]);
    assert_eq!(bogus.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bogus.stderr).contains("not a class"));
    // Nothing parsed: the wrong format.
    assert_eq!(run(&["--log-format", "lab"]).status.code(), Some(3));
    // An input cut short: a truncated gzip.
    let dir = tempfile::tempdir().unwrap();
    let gz = std::fs::read(p.join("access.log.2.gz")).unwrap();
    let cut = dir.path().join("cut.log.gz");
    std::fs::write(&cut, &gz[..gz.len() / 2]).unwrap();
    let out = common::bin()
        .args(["diagnose", "--format", "json", "--nginx-conf"])
        .arg(p.join("nginx-T.txt"))
        .arg("--access")
        .arg(&cut)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("cut short"));
}

/// `--since`/`--until`: two adjacent ranges of the same logs add up to the whole (the library's
/// tests check every field on the corpus; here the flags, the report's line and the refusals).
#[test]
fn adjacent_time_ranges_add_up_to_the_whole_diagnosis() {
    let run = |extra: &[&str], format: &str| {
        let out = production(format)
            .arg("--error")
            .arg(prod().join("error.log"))
            .args(extra)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let json = |extra: &[&str]| -> serde_json::Value {
        let (_, out, err) = run(extra, "json");
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {err}"))
    };
    let whole = json(&[]);
    let (s, e) = (
        whole["start_ms"].as_i64().unwrap(),
        whole["end_ms"].as_i64().unwrap(),
    );
    // The second just after the first incident starts: that incident straddles the split.
    let first = whole["incidents"][0]["start_ms"].as_i64().unwrap();
    let mid = (first / 1000 + 1).clamp(s / 1000 + 1, e / 1000);
    let at = resolvelab_core::time::rfc3339(mid * 1_000_000);
    let (a, b) = (json(&["--until", &at]), json(&["--since", &at]));
    for f in ["requests", "failures", "swaps"] {
        assert_eq!(
            a[f].as_u64().unwrap() + b[f].as_u64().unwrap(),
            whole[f].as_u64().unwrap(),
            "{f}"
        );
    }
    let n = |v: &serde_json::Value| v["incidents"].as_array().unwrap().len();
    assert_eq!(n(&a) + n(&b), n(&whole));
    assert!(n(&a) >= 1, "the straddling incident is the first range's");
    assert_eq!(b["range"]["since_ms"].as_i64(), Some(mid * 1000));
    let (code, md, _) = run(&["--since", &at], "md");
    assert_eq!(code, Some(0));
    assert!(md.contains("range diagnosed"), "{md}");
    // network-safe: `02:00` is a malformed time, not an address; diagnose reads files only.
    for (flag, bad, want) in [
        ("--since", "02:00", "not an RFC 3339 time"),
        ("--until", "2026-12-06T02:00:00.250Z", "whole seconds"),
    ] {
        let (code, _, err) = run(&[flag, bad], "json");
        assert_eq!(code, Some(2), "{err}");
        assert!(err.contains(want) && err.lines().count() == 1, "{err}");
    }
}
