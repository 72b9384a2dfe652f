//! `resolvelab backend` end to end: the binary serves, injects, counts, logs, and refuses bad input
//! with one line.

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::process::Stdio;

mod common;
use common::{Proc, bin, http};

/// The `listening on A (control http://B)` line.
fn addrs(line: &str) -> (SocketAddr, Option<SocketAddr>) {
    let after = line.split(" listening on ").nth(1).unwrap();
    let main = after.split_whitespace().next().unwrap().parse().unwrap();
    let control = line
        .split("control http://")
        .nth(1)
        .map(|c| c.trim().trim_end_matches(')').parse().unwrap());
    (main, control)
}

#[test]
fn backend_serves_injects_counts_and_logs() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("b.jsonl");
    let mut child = Proc(
        bin()
            .args(["backend", "--listen", "127.0.0.111:0", "--name", "b9"])
            .args(["--control", "127.0.0.111:0", "--fault", "status:code=503"])
            .args(["--duration", "3s", "--log"])
            .arg(&log)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut out = BufReader::new(child.0.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let (addr, control) = addrs(&line);
    let r = http(addr, "GET", "/", "");
    assert!(r.starts_with("HTTP/1.1 503"), "{r}");
    assert!(r.to_ascii_lowercase().contains("x-backend: b9"), "{r}");
    let f = http(control.unwrap(), "GET", "/faults", "");
    assert!(f.contains("\"hits\":1"), "{f}");
    let added = http(control.unwrap(), "POST", "/faults", "slow-headers:10ms");
    assert!(added.starts_with("HTTP/1.1 201"), "{added}");
    let status = child.0.wait().unwrap();
    assert!(status.success());
    let mut err = String::new();
    child
        .0
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(err.contains("fault status: 1 hits"), "{err}");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.starts_with("{\"schema\":\"resolvelab.backend/v1\"}"),
        "{text}"
    );
    assert!(text.contains("\"event\":\"request\""), "{text}");
}

#[test]
fn bad_input_is_one_clear_line() {
    let out = bin()
        .args(["backend", "--fault", "explode"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown backend fault `explode`"), "{err}");
    // Offline and bounded: a broken refusal could serve nobody and stops by itself.
    let Some(mut cmd) = common::bin_offline() else {
        return;
    };
    let out = cmd
        .args(["backend", "--listen", "192.0.2.1:80", "--duration", "2s"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("--allow-remote"), "{err}");
    let out = bin().args(["backend", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(
        help.contains("reclaim") && help.contains("Examples:"),
        "{help}"
    );
}

#[test]
fn at_its_descriptor_limit_the_backend_says_so_and_serves_again_after() {
    // A hard limit of 64 descriptors (the tool raises only the soft limit to the hard one).
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("b.jsonl");
    let mut cmd = std::process::Command::new("bash");
    cmd.arg("-c")
        .arg(
            r#"ulimit -n 64 && exec "$0" backend --listen 127.0.0.112:0 --duration 20s --log "$1""#,
        )
        .arg(env!("CARGO_BIN_EXE_resolvelab"))
        .arg(&log)
        .stdout(Stdio::piped());
    let mut child = Proc(cmd.spawn().unwrap());
    let mut out = BufReader::new(child.0.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let (addr, _) = addrs(&line);
    // Hold more connections than it has descriptors for (bounded: 80 loopback connects).
    let held: Vec<std::net::TcpStream> = (0..80)
        .filter_map(|_| std::net::TcpStream::connect(addr).ok())
        .collect();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.contains("accept failed") {
            assert!(text.contains("ulimit"), "names the fix: {text}");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no accept-failure record: {text}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    drop(held);
    // With the connections gone it answers again.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let r = http(addr, "GET", "/", "");
        if r.starts_with("HTTP/1.1 200") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "it never answered again: {r}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}
