//! `resolvelab proxy` end to end with the `backend --echo-db` stand-in: latency applied and
//! counted, the control API, the connection log.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Stdio;
use std::time::{Duration, Instant};

mod common;
use common::{Proc, bin, http, run_ok};

fn word_after(line: &str, marker: &str) -> SocketAddr {
    line.split(marker)
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn proxy_delays_counts_and_logs() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("p.jsonl");
    let mut db = Proc(
        bin()
            .args([
                "backend",
                "--echo-db",
                "--listen",
                "127.0.0.112:0",
                "--duration",
                "6s",
            ])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut line = String::new();
    BufReader::new(db.0.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let db_addr = word_after(&line, "listening on ");
    let mut px = Proc(
        bin()
            .args([
                "proxy",
                "--listen",
                "127.0.0.113:0",
                "--upstream",
                &db_addr.to_string(),
            ])
            .args(["--fault", "latency:delay=150ms,direction=downstream"])
            .args(["--control", "127.0.0.113:0", "--duration", "3s", "--log"])
            .arg(&log)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut out = BufReader::new(px.0.stdout.take().unwrap());
    let (mut listen, mut control) = (None, None);
    while listen.is_none() || control.is_none() {
        let mut l = String::new();
        assert!(out.read_line(&mut l).unwrap() > 0, "proxy exited early");
        if l.starts_with("proxy main listening on") {
            listen = Some(word_after(&l, "listening on "));
        }
        if l.starts_with("control API on") {
            control = Some(word_after(&l, "http://"));
        }
    }
    let mut s = TcpStream::connect(listen.unwrap()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let t = Instant::now();
    s.write_all(b"ping\n").unwrap();
    let mut buf = [0u8; 5];
    s.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"ping\n");
    assert!(
        t.elapsed() >= Duration::from_millis(150),
        "{:?}",
        t.elapsed()
    );
    drop(s);
    let f = http(control.unwrap(), "GET", "/proxies/main/faults", "");
    assert!(f.contains("\"hits\":1"), "{f}");
    let m = http(control.unwrap(), "GET", "/metrics", "");
    assert!(
        m.contains("resolvelab_proxy_fault_hits_total{proxy=\"main\",fault=\"latency_downstream\""),
        "{m}"
    );
    let bad = http(control.unwrap(), "POST", "/proxies/main/faults", "latency");
    assert!(
        bad.starts_with("HTTP/1.1 400") && bad.contains("delay="),
        "{bad}"
    );
    assert!(http(control.unwrap(), "POST", "/reset", "").starts_with("HTTP/1.1 204"));
    assert!(px.0.wait().unwrap().success());
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.starts_with("{\"schema\":\"resolvelab.proxy/v1\"}"),
        "{text}"
    );
    let close = text
        .lines()
        .find(|l| l.contains("\"event\":\"close\""))
        .expect(&text);
    let v: serde_json::Value = serde_json::from_str(close).unwrap();
    assert_eq!(v["bytes_up"], 5);
    assert_eq!(v["faults"][0], "latency_downstream");
}

#[test]
fn proxy_file_with_named_proxies() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("p.toml");
    std::fs::write(
        &cfg,
        "[[proxy]]\nname = \"a\"\nlisten = \"127.0.0.114:0\"\nupstream = \"127.0.0.115:9\"\n\
         [[proxy]]\nname = \"b\"\nlisten = \"127.0.0.114:0\"\nupstream = \"127.0.0.115:9\"\nfaults = [\"down\"]\n",
    )
    .unwrap();
    let out = run_ok(
        bin()
            .args(["proxy", "--duration", "200ms", "--config"])
            .arg(&cfg),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("proxy a listening") && text.contains("proxy b listening"),
        "{text}"
    );
    std::fs::write(
        &cfg,
        "[[proxy]]\nname = \"a\"\nlisten = \"127.0.0.114:0\"\nupstream = \"10.0.0.1:9\"\n",
    )
    .unwrap();
    // Offline and bounded: a broken refusal could neither connect nor run on.
    let Some(mut cmd) = common::bin_offline() else {
        return;
    };
    let out = cmd
        .args(["proxy", "--duration", "2s", "--config"])
        .arg(&cfg)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--allow-remote"));
}
