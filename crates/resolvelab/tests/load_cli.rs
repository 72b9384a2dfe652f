//! `resolvelab load` and `resolvelab load report` as a user runs them. Only loopback is
//! targeted: the remote-target test is refused before any socket exists.

mod common;
use common::{bin, run_json};

/// A loopback port with nothing listening (bound, then closed).
fn closed_port(ip: &str) -> u16 {
    std::net::TcpListener::bind((ip, 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn remote_targets_are_refused_without_allow_remote() {
    for url in [
        "http://192.0.2.1/",
        "http://example.com:8080/",
        "http://[2001:db8::1]/",
    ] {
        // Offline: a broken refusal could not send the request anywhere.
        let Some(mut cmd) = common::bin_offline() else {
            return;
        };
        let out = cmd
            .args(["load", url, "--requests", "1", "--timeout", "2s"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{url}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("--allow-remote"), "{url}: {err}");
        assert_eq!(err.lines().count(), 1, "one clear line: {err}");
    }
}

#[test]
fn user_mistakes_get_one_line() {
    for (args, needle) in [
        (
            vec!["load", "http://127.0.0.1:1/", "--rate", "100"],
            "--duration",
        ),
        (
            vec![
                "load",
                "http://127.0.0.1:1/",
                "--rate",
                "fast",
                "--requests",
                "1",
            ],
            "not a rate",
        ),
        (
            vec![
                "load",
                "http://127.0.0.1:1/",
                "--requests",
                "1",
                "--timeout",
                "5",
            ],
            "no unit",
        ),
        (
            vec!["load", "https://127.0.0.1:1/", "--requests", "1"],
            "https",
        ),
        (
            vec![
                "load",
                "http://127.0.0.1:1/",
                "--requests",
                "1",
                "--mix",
                "GET=x",
            ],
            "--mix",
        ),
    ] {
        let out = bin().args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
}

#[test]
fn run_write_and_report_every_format() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("load.jsonl");
    let url = format!("http://127.0.0.61:{}/", closed_port("127.0.0.61"));
    let summary = run_json(
        bin()
            .args([
                "load",
                &url,
                "--rate",
                "200",
                "--requests",
                "8",
                "--summary",
                "json",
                "--out",
            ])
            .arg(&file),
    );
    assert_eq!(summary["requests"], 8);
    assert_eq!(summary["errors"]["connect-refused"], 8);
    let text = std::fs::read_to_string(&file).unwrap();
    assert_eq!(text.lines().count(), 9);
    assert!(
        text.lines()
            .next()
            .unwrap()
            .contains("\"schema\":\"resolvelab.load/v1\"")
    );

    let report = |fmt: &str| {
        let o = bin()
            .args(["load", "report", "--format", fmt])
            .arg(&file)
            .arg(&file)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{fmt}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8(o.stdout).unwrap()
    };
    assert!(report("text").contains("connect-refused:16"));
    let j: serde_json::Value = serde_json::from_str(&report("json")).unwrap();
    assert_eq!(j["requests"], 16, "two files merged");
    let csv = report("csv");
    assert_eq!(csv.lines().count(), 16);
    assert!(csv.lines().all(|l| l.split(',').count() == 12));
    let html_path = dir.path().join("r.html");
    let o = bin()
        .args(["load", "report", "--format", "html", "--output"])
        .arg(&html_path)
        .arg(&file)
        .output()
        .unwrap();
    assert!(o.status.success());
    let html = std::fs::read_to_string(&html_path).unwrap();
    assert!(html.contains("<svg") && html.contains("</html>"));

    let bad = bin()
        .args(["load", "report", "--format", "xml"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("text, json, csv or html"));
}

#[test]
fn out_dash_streams_records_and_moves_the_summary_to_stderr() {
    let url = format!("http://127.0.0.62:{}/", closed_port("127.0.0.62"));
    let out = bin()
        .args([
            "load",
            &url,
            "--rate",
            "100",
            "--requests",
            "3",
            "--out",
            "-",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 4);
    assert_eq!(lines[0]["schema"], "resolvelab.load/v1");
    assert!(
        lines[1..]
            .iter()
            .all(|l| l["error"] == "connect-refused" && l["sent_us"].is_i64())
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("Requests"));
}

#[test]
fn help_explains_with_examples() {
    let out = bin().args(["load", "--help"]).output().unwrap();
    let h = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "Examples:",
        "--rate",
        "100@10s,500@30s",
        "late",
        "dropped",
        "load report",
    ] {
        assert!(h.contains(needle), "{needle}");
    }
}

#[test]
fn max_rate_on_two_threads_writes_every_request() {
    let ip = "127.0.0.63";
    let port = closed_port(ip);
    let addr = format!("{ip}:{port}");
    let _backend = common::Proc(
        bin()
            .args([
                "backend",
                "--listen",
                &addr,
                "--name",
                "b1",
                "--duration",
                "60s",
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    // Poll until it accepts (bounded), instead of guessing a sleep.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::net::TcpStream::connect(&addr).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "backend never listened"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("max.jsonl");
    let summary = run_json(
        bin()
            .args([
                "load",
                &format!("http://{addr}/"),
                "--rate",
                "max",
                "--requests",
                "500",
                "--connections",
                "6",
                "--threads",
                "2",
                "--header-capture",
                "x-backend",
                "--summary",
                "json",
                "--out",
            ])
            .arg(&file),
    );
    assert_eq!(summary["requests"], 500);
    assert_eq!(summary["classes"]["c2xx"], 500);
    assert_eq!(summary["headers"]["b1"], 500);
    assert_eq!(summary["open_loop"], false);
    let text = std::fs::read_to_string(&file).unwrap();
    let recs: Vec<serde_json::Value> = text
        .lines()
        .skip(1)
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(recs.len(), 500);
    let mut seqs: Vec<u64> = recs.iter().map(|r| r["seq"].as_u64().unwrap()).collect();
    seqs.sort_unstable();
    assert_eq!(
        seqs,
        (0..500).collect::<Vec<u64>>(),
        "every seq exactly once"
    );
    let conns: std::collections::HashSet<u64> =
        recs.iter().map(|r| r["conn"].as_u64().unwrap()).collect();
    assert_eq!(conns.len(), 6, "one keep-alive connection per worker");
    assert!(recs.iter().all(|r| r["t_us"] == r["sent_us"]));
}

#[test]
fn sigterm_stops_the_load_and_still_prints_the_summary() {
    // `timeout 5 resolvelab load …` sends SIGTERM: the summary must not be lost. The target
    // port is closed, so every request is a loopback connection error, recorded all the same.
    let port = closed_port("127.0.0.77");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("load.jsonl");
    let mut child = common::Proc(
        bin()
            .args(["load", &format!("http://127.0.0.77:{port}/")])
            .args(["--rate", "50", "--duration", "60s", "--quiet", "--out"])
            .arg(&out)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    // Once requests are being recorded, stop it the way `timeout` does.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::fs::read_to_string(&out).map_or(0, |t| t.lines().count()) < 10 {
        assert!(
            std::time::Instant::now() < deadline,
            "the load never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // SAFETY: the child this test started.
    assert_eq!(
        unsafe { libc::kill(child.0.id() as libc::pid_t, libc::SIGTERM) },
        0
    );
    let status = child.0.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    let mut text = String::new();
    use std::io::Read;
    child
        .0
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut text)
        .unwrap();
    assert!(
        text.contains("Requests") && text.contains("Latency"),
        "the summary: {text}"
    );
}
