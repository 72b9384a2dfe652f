//! `resolvelab watch` as a user runs it: following a recorded real-nginx run's logs, its
//! `/metrics` shows the classes and counts `diagnose` gives for the same files, `/report` and
//! `/healthz` answer, and SIGTERM stops it cleanly with each incident written to `--events`.

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::Stdio;

fn gunzip(from: &Path, to: &Path) {
    let mut s = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(from).unwrap())
        .read_to_end(&mut s)
        .unwrap();
    std::fs::write(to, s).unwrap();
}

/// The values of a counter family by its `class` label, summed over the other labels.
fn by_class(metrics: &str, family: &str) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for l in metrics.lines().filter(|l| l.starts_with(family)) {
        let class = l
            .split("class=\"")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap();
        let n: u64 = l.rsplit(' ').next().unwrap().parse().unwrap();
        // Every class of a seen upstream is exported, at 0 until counted.
        if n > 0 {
            *m.entry(class.to_string()).or_default() += n;
        }
    }
    m
}

/// The recorded real-nginx `nxdomain` run's access and error logs, unpacked into `dir`, and
/// the fixture's folder.
fn nxdomain_run(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let fx =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/diagnose/real/nxdomain");
    let (a, e) = (dir.join("access.log"), dir.join("error.log"));
    gunzip(&fx.join("access.log.gz"), &a);
    gunzip(&fx.join("error.log.gz"), &e);
    (a, e, fx)
}

#[test]
fn metrics_agree_with_the_batch_diagnosis_and_sigterm_stops_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let (a, e, fx) = nxdomain_run(dir.path());
    let conf = fx.join("nginx.conf");
    let reading = |c: &mut std::process::Command| {
        c.arg("--access").arg(&a).arg("--error").arg(&e);
        c.args([
            "--log-format",
            "lab",
            "--tz-offset",
            "+00:00",
            "--nginx-conf",
        ]);
        c.arg(&conf);
    };
    let mut diag = common::bin();
    diag.args(["diagnose", "--format", "json"]);
    reading(&mut diag);
    let d = common::run_json(&mut diag);
    let want = common::class_requests(&d);
    assert!(!want.is_empty());

    let events = dir.path().join("events.jsonl");
    let mut w = common::bin();
    w.arg("watch");
    reading(&mut w);
    w.args([
        "--from-start",
        "--interval",
        "100ms",
        "--settle",
        "2s",
        "--reclass",
        "100ms",
    ]);
    w.args(["--listen", "127.0.0.1:0", "--events"]).arg(&events);
    let mut p = common::Proc(
        w.stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut err = BufReader::new(p.0.stderr.take().unwrap());
    let addr = loop {
        let mut l = String::new();
        assert!(
            err.read_line(&mut l).unwrap() > 0,
            "watch ended before serving"
        );
        if let Some(u) = l.split("serving http://").nth(1) {
            break u.trim().trim_end_matches("/metrics").parse().unwrap();
        }
    };
    // Keep reading stderr so that progress lines never block the watcher.
    std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
    let mut metrics = String::new();
    for _ in 0..200 {
        metrics = common::http(addr, "GET", "/metrics", "");
        // Counted once the window closed (the open one exports every class at 0).
        if !by_class(&metrics, "resolvelab_incidents_total{").is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(
        metrics.contains("application/openmetrics-text"),
        "{metrics}"
    );
    assert_eq!(
        by_class(&metrics, "resolvelab_failed_requests_total{"),
        want,
        "{metrics}"
    );
    assert!(metrics.contains("resolvelab_requests_total{upstream=\"be\",status_class=\"2xx\"}"));
    assert!(metrics.contains("resolvelab_build_info{version="));
    assert!(common::http(addr, "GET", "/healthz", "").ends_with("ok\n"));
    assert!(common::http(addr, "GET", "/report", "").contains("<html"));

    // SAFETY: a plain kill(2) of the child this test started.
    unsafe { libc::kill(p.0.id() as libc::pid_t, libc::SIGTERM) };
    let status = p.0.wait().unwrap();
    assert!(status.success(), "{status}");
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&events)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["schema"], "resolvelab.watch-event/v1");
    let incidents: u64 = d["classes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["incidents"].as_u64().unwrap())
        .sum();
    assert_eq!(lines.len() as u64 - 1, incidents);
    assert_eq!(lines[1]["event"], "incident");
}

/// Two hosts' logs under one directory, named by `{instance}`: each instance's incidents are
/// written with its name, as many as `diagnose` finds in its own files; `--instance` beside
/// only `{instance}` paths is refused.
#[test]
fn instances_named_by_a_path_pattern_are_watched_apart() {
    let fx =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/diagnose/real/nxdomain");
    let dir = tempfile::tempdir().unwrap();
    for host in ["web-1", "web-2"] {
        let d = dir.path().join("remote").join(host);
        std::fs::create_dir_all(&d).unwrap();
        gunzip(&fx.join("access.log.gz"), &d.join("access.log"));
        gunzip(&fx.join("error.log.gz"), &d.join("error.log"));
    }
    let mut diag = common::bin();
    diag.args(["diagnose", "--format", "json", "--log-format", "lab"]);
    diag.args(["--tz-offset", "+00:00", "--access"]);
    diag.arg(dir.path().join("remote/web-1/access.log"));
    diag.arg("--error")
        .arg(dir.path().join("remote/web-1/error.log"));
    let d = common::run_json(&mut diag);
    let incidents: usize = d["classes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["incidents"].as_u64().unwrap() as usize)
        .sum();
    assert!(incidents > 0);

    let events = dir.path().join("events.jsonl");
    let pattern = |f: &str| dir.path().join("remote/{instance}").join(f);
    let mut w = common::bin();
    w.arg("watch").arg("--access").arg(pattern("access.log"));
    w.arg("--error").arg(pattern("error.log"));
    w.args([
        "--log-format",
        "lab",
        "--tz-offset",
        "+00:00",
        "--from-start",
    ]);
    w.args(["--interval", "100ms", "--duration", "1s", "--events"]);
    w.arg(&events);
    let out = w.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&events)
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    for host in ["web-1", "web-2"] {
        let mine = lines.iter().filter(|l| l["instance"] == host).count();
        assert_eq!(mine, incidents, "{host}'s incidents");
    }
    assert_eq!(
        lines.len(),
        2 * incidents,
        "every incident names its instance"
    );

    let mut w = common::bin();
    w.arg("watch").arg("--access").arg(pattern("access.log"));
    w.args(["--instance", "web-1", "--duration", "1s"]);
    let out = w.output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("{instance} names its own"), "{err}");
}

/// `kubectl logs -f … | resolvelab watch --logs -`: a recorded run's access and error lines as
/// one mixed stream on standard input, its last line without a newline. Watching ends at the
/// stream's end, and what it counted line by line — requests by status class, error lines by
/// signature, lines read — equals a diagnosis of the same stream as a file.
#[test]
fn standard_input_is_counted_as_the_same_stream_in_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let (a, e, _) = nxdomain_run(dir.path());
    let mut stream = std::fs::read(&a).unwrap();
    stream.extend(std::fs::read(&e).unwrap());
    assert_eq!(stream.pop(), Some(b'\n'));
    let logs = dir.path().join("pod.log");
    std::fs::write(&logs, &stream).unwrap();
    let fmt = ["--log-format", "lab", "--tz-offset", "+00:00"];

    let mut diag = common::bin();
    diag.args(["diagnose", "--format", "json", "--logs"])
        .arg(&logs);
    let d = common::run_json(diag.args(fmt));

    let state = dir.path().join("state.json");
    let mut w = common::bin();
    w.args(["watch", "--logs", "-", "--interval", "50ms", "--state"])
        .arg(&state)
        .args(fmt)
        .stdin(std::fs::File::open(&logs).unwrap())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let status = w.status().unwrap();
    assert!(status.success(), "{status}");
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&state).unwrap()).unwrap();
    let t = &s["totals"];
    let mut requests: BTreeMap<String, u64> = BTreeMap::new();
    for by_class in t["requests"].as_object().unwrap().values() {
        for (class, n) in by_class.as_object().unwrap() {
            *requests.entry(class.clone()).or_default() += n.as_u64().unwrap();
        }
    }
    let mut want: BTreeMap<String, u64> = BTreeMap::new();
    for (status, n) in d["http_status"].as_object().unwrap() {
        let class = format!("{}xx", &status[..1]);
        *want.entry(class).or_default() += n.as_u64().unwrap();
    }
    assert_eq!(requests, want);
    assert!(want.values().sum::<u64>() > 1000, "{want:?}");
    let sigs: BTreeMap<String, u64> = d["signatures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["id"].as_str().unwrap().to_string(),
                s["count"].as_u64().unwrap(),
            )
        })
        .collect();
    let got: BTreeMap<String, u64> = serde_json::from_value(t["error_lines"].clone()).unwrap();
    assert_eq!(got, sigs);
    for f in d["parse"]["files"].as_array().unwrap() {
        let kind = f["kind"].as_str().unwrap();
        for what in ["parsed", "skipped"] {
            let n = f[what].as_u64().unwrap_or(0);
            assert_eq!(
                t["lines"][kind][what].as_u64().unwrap_or(0),
                n,
                "{kind} {what}"
            );
        }
    }
}
