//! `resolvelab dns` and `resolvelab dns ctl` as a user runs them.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use resolvelab_dns::{Transport, client};

mod common;

const BIN: &str = env!("CARGO_BIN_EXE_resolvelab");

/// Kills the server (by its pid, which we started) if a test fails half-way.
struct Server {
    child: Child,
    dns: SocketAddr,
    control: Option<SocketAddr>,
    views: Vec<SocketAddr>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(args: &[&str]) -> Server {
    let mut child = Command::new(BIN)
        .arg("dns")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let dns = line
        .trim()
        .strip_prefix("listening udp+tcp ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .parse()
        .unwrap();
    let mut views = Vec::new();
    for k in 1..=args.iter().filter(|a| **a == "--view").count() {
        line.clear();
        out.read_line(&mut line).unwrap();
        let prefix = format!("view {k} udp+tcp ");
        views.push(line.trim().strip_prefix(&prefix).unwrap().parse().unwrap());
    }
    let mut control = None;
    if args.contains(&"--control") {
        line.clear();
        out.read_line(&mut line).unwrap();
        control = Some(
            line.trim()
                .strip_prefix("control http://")
                .unwrap()
                .parse()
                .unwrap(),
        );
    }
    Server {
        child,
        dns,
        control,
        views,
    }
}

fn ctl(control: SocketAddr, token: &str, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(BIN)
        .args([
            "dns",
            "ctl",
            "--control",
            &control.to_string(),
            "--token",
            token,
        ])
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn dns_serves_zone_and_ctl_controls_it() {
    let dir = tempfile::tempdir().unwrap();
    let zone = dir.path().join("zone.toml");
    std::fs::write(
        &zone,
        "ttl = \"2s\"\n[names.\"app.test.local\"]\nmode = \"alternate:127.0.0.20,127.0.0.30\"\n",
    )
    .unwrap();
    let log = dir.path().join("dns.jsonl");
    let mut srv = start(&[
        "--listen",
        "127.0.54.1:0",
        "--control",
        "127.0.54.1:0",
        "--token",
        "tok",
        "--zone",
        zone.to_str().unwrap(),
        "--name",
        "nx.test.local=nxdomain",
        "--log",
        log.to_str().unwrap(),
    ]);
    let rt = rt();
    let q = |name: &str, tr| {
        rt.block_on(client::query(
            srv.dns,
            name,
            "A",
            tr,
            Duration::from_secs(2),
        ))
        .unwrap()
    };
    let a = q("app.test.local", Transport::Udp);
    assert_eq!(a.answers.len(), 1);
    assert_eq!(a.ttls, vec![2], "zone TTL applies");
    let b = q("app.test.local", Transport::Tcp);
    assert_ne!(a.answers, b.answers, "alternate rotates across UDP and TCP");
    assert_eq!(q("nx.test.local", Transport::Udp).rcode, "NXDOMAIN");

    let control = srv.control.unwrap();
    let (code, out, _) = ctl(control, "tok", &["show", "--json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 2);
    assert_eq!(v[0]["name"], "app.test.local");
    assert_eq!(v[0]["queries"], 2);

    let (code, out, err) = ctl(
        control,
        "tok",
        &[
            "set",
            "app.test.local",
            "servfail",
            "--for",
            "30s",
            "--align",
            "next-query",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("pending servfail for 30000ms at next query"),
        "{out}"
    );
    assert_eq!(q("app.test.local", Transport::Udp).rcode, "SERVFAIL");
    let (_, out, _) = ctl(control, "tok", &["show"]);
    assert!(
        out.contains("reverts to alternate:127.0.0.20,127.0.0.30"),
        "{out}"
    );
    let (_, out, _) = ctl(control, "tok", &["metrics"]);
    assert!(
        out.contains("resolvelab_dns_injection_hits_total{name=\"app.test.local\"} 1"),
        "{out}"
    );

    // User mistakes: one line each, exit 2.
    let (code, _, err) = ctl(control, "wrong", &["show"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("401") && err.trim().lines().count() == 1,
        "{err}"
    );
    let (code, _, err) = ctl(control, "tok", &["set", "app.test.local", "nxdomian"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("unknown mode `nxdomian`") && err.trim().lines().count() == 1,
        "{err}"
    );
    let (code, _, err) = ctl(control, "tok", &["set", "nobody.test", "drop"]);
    assert_eq!(code, 2);
    assert!(err.contains("unknown name `nobody.test`"), "{err}");

    // Ctrl-C: a clean stop with the query log complete.
    unsafe { libc::kill(srv.child.id() as i32, libc::SIGINT) };
    let status = srv.child.wait().unwrap();
    assert!(status.success());
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        text.lines().next().unwrap(),
        r#"{"schema":"resolvelab.dns/v1"}"#
    );
    assert_eq!(text.lines().count(), 1 + 4);
}

#[test]
fn dns_errors_name_the_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let zone = dir.path().join("zone.toml");
    std::fs::write(
        &zone,
        "ttl = 1\n[names.\"a.test\"]\nmode = \"static:127.0.0.1\"\nbogus = 1\n",
    )
    .unwrap();
    let out = Command::new(BIN)
        .args([
            "dns",
            "--listen",
            "127.0.54.2:0",
            "--zone",
            zone.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("zone.toml:4:") && err.contains("bogus"),
        "{err}"
    );

    // network-safe: 10.0.0.1 would only be an answer's record; a DNS server sends packets
    // only to whoever queries it on loopback, and `--duration` bounds a broken refusal.
    let out = Command::new(BIN)
        .args([
            "dns",
            "--listen",
            "127.0.54.2:0",
            "--name",
            "a.test=static:10.0.0.1",
            "--duration",
            "2s",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("10.0.0.1") && err.contains("not loopback"),
        "{err}"
    );

    let out = Command::new(BIN)
        .args(["dns", "--name", "a.test=alternat:127.0.0.1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown mode `alternat`"));
}

#[test]
fn dns_help_shows_modes_with_examples() {
    let out = Command::new(BIN).args(["dns", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    for want in [
        "alternate:IP1,IP2",
        "weighted:IP=W",
        "multi:N[@BASE]",
        "nxdomain",
        "delay:DUR",
        "truncate",
        "dns ctl set app.test.local nxdomain --for 2s --align next-query",
        "Examples:",
    ] {
        assert!(help.contains(want), "--help lacks `{want}`");
    }
}

#[test]
fn watch_logs_every_change_of_a_timeline_with_its_flags() {
    let dir = tempfile::tempdir().unwrap();
    let timeline = dir.path().join("timeline.toml");
    std::fs::write(
        &timeline,
        // Each state lasts 1.5 s against the probe's 200 ms interval (seven answers a state):
        // only a stall of over a second could hide one.
        "[[change]]\nat = \"2s\"\nname = \"app.test.local\"\nmode = \"static:127.0.0.30\"\n\
         [[change]]\nat = \"3500ms\"\nname = \"app.test.local\"\nmode = \"static:127.0.0.20,127.0.0.30\"\n\
         [[change]]\nat = \"5s\"\nname = \"app.test.local\"\nmode = \"nxdomain\"\n\
         [[change]]\nat = \"6500ms\"\nname = \"app.test.local\"\nmode = \"servfail\"\n",
    )
    .unwrap();
    let s = start(&[
        "--listen",
        "127.0.0.1:0",
        "--name",
        "app.test.local=static:127.0.0.20",
        "--timeline",
        timeline.to_str().unwrap(),
        "--duration",
        "20s",
    ]);
    let out = dir.path().join("watch.jsonl");
    let o = Command::new(BIN)
        .args(["dns", "watch", "app.test.local", "--server"])
        .arg(s.dns.to_string())
        .args(["--interval", "200ms", "--duration", "8s", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    let text = std::fs::read_to_string(&out).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some(r#"{"schema":"resolvelab.dns/v1"}"#));
    let recs: Vec<serde_json::Value> = lines.map(|l| serde_json::from_str(l).unwrap()).collect();
    let a: Vec<&serde_json::Value> = recs.iter().filter(|r| r["qtype"] == "A").collect();
    // The A answers in order, repeats folded: every change of the timeline, in order.
    let mut seen: Vec<String> = Vec::new();
    for r in &a {
        let what = match r["rcode"].as_str().unwrap() {
            "NOERROR" => r["answers"].to_string(),
            rcode => rcode.to_string(),
        };
        if seen.last() != Some(&what) {
            seen.push(what);
        }
    }
    assert_eq!(
        seen,
        [
            r#"["127.0.0.20"]"#,
            r#"["127.0.0.30"]"#,
            r#"["127.0.0.20","127.0.0.30"]"#,
            "NXDOMAIN",
            "SERVFAIL"
        ],
        "{stderr}"
    );
    // Three answer changes (NXDOMAIN included); SERVFAIL says nothing of the records.
    let changed = a.iter().filter(|r| r["changed"] == true).count();
    assert_eq!(changed, 3, "{stderr}");
    let flagged = |f: &str| {
        a.iter().any(|r| {
            r["flags"]
                .as_array()
                .is_some_and(|v| v.iter().any(|x| x == f))
        })
    };
    for f in ["two-records", "nxdomain", "servfail"] {
        assert!(flagged(f), "no {f} flag: {stderr}");
    }
    assert!(a.iter().all(|r| r["probe"] == "watch"));
    // One live line per change, not per answer; and a summary.
    assert!(stderr.contains("CHANGED"), "{stderr}");
    assert!(stderr.lines().count() < a.len(), "{stderr}");
    assert!(stderr.contains("dns watch: "), "{stderr}");
}

#[test]
fn watch_refuses_a_remote_server_before_sending() {
    // Inside a network namespace of its own (no interface up), so that even a wrong policy
    // could not send a packet anywhere; without root the policy is tested as a function in
    // resolvelab-dns.
    let Some(mut cmd) = common::bin_offline() else {
        return;
    };
    let o = cmd
        .args(["dns", "watch", "app.example", "--server", "192.0.2.1:53"])
        .args(["--count", "1"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("--allow-remote"), "{stderr}");
}

/// `--view`: one more address, answering as the main one until `ctl set … --view K` gives it
/// its own answer (a resolver of one site), `default` gives it back; `ctl show` says so.
#[test]
fn a_view_gets_its_own_answer_from_ctl() {
    let srv = start(&[
        "--listen",
        "127.0.54.9:0",
        "--view",
        "127.0.54.9:0",
        "--control",
        "127.0.54.9:0",
        "--token",
        "tok",
        "--name",
        "app.test.local=static:127.0.0.20",
    ]);
    let rt = rt();
    let q = |addr: SocketAddr| {
        rt.block_on(client::query(
            addr,
            "app.test.local",
            "A",
            Transport::Udp,
            Duration::from_secs(2),
        ))
        .unwrap()
        .answers
    };
    let one: Vec<std::net::IpAddr> = vec!["127.0.0.20".parse().unwrap()];
    let view = srv.views[0];
    assert_eq!(q(view), one);
    let control = srv.control.unwrap();
    let set = ["set", "app.test.local", "static:127.0.0.30", "--view", "1"];
    let (code, out, err) = ctl(control, "tok", &set);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("view 1: static:127.0.0.30"), "{out}");
    assert_eq!(
        q(view),
        vec!["127.0.0.30".parse::<std::net::IpAddr>().unwrap()]
    );
    assert_eq!(q(srv.dns), one, "the main address keeps the name's answer");
    // A view the server does not have, and --view with --for, are refused in one line.
    let (code, _, err) = ctl(
        control,
        "tok",
        &["set", "app.test.local", "nxdomain", "--view", "2"],
    );
    assert_ne!(code, 0);
    assert!(err.contains("view 2 is not served"), "{err}");
    let (code, _, err) = ctl(
        control,
        "tok",
        &[
            "set",
            "app.test.local",
            "nxdomain",
            "--view",
            "1",
            "--for",
            "2s",
        ],
    );
    assert_ne!(code, 0);
    assert!(err.contains("cannot be used with"), "{err}");
    let (code, _, err) = ctl(
        control,
        "tok",
        &["set", "app.test.local", "default", "--view", "1"],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(q(view), one);
}
