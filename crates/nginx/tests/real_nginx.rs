//! Tests against the real nginx built from the nginx-src crate (built on first use, cached).

use resolvelab_core::supervise::Supervisor;
use resolvelab_nginx::{Instance, Nginx, conf, instance};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

fn nginx() -> Nginx {
    Nginx::obtain(None).expect("nginx builds from the nginx-src crate")
}

#[test]
fn built_nginx_supports_resolve_and_accepts_a_resolve_upstream() {
    let nx = nginx();
    assert!(nx.info.supports_resolve(), "{}", nx.info.raw);
    assert!(nx.info.configure_args.contains("--with-debug"));
    let dir = tempfile::tempdir().unwrap();
    // The acceptance config, plus rewrite-module directives the retry-shim scenarios need.
    let body = "upstream be {\n  zone be 64k;\n  resolver 127.0.0.1:5353 valid=5s ipv6=off;\n  \
                server app.test.local:8080 resolve;\n  keepalive 16;\n}\n\
                map $request_method $idempotent { default 0; GET 1; HEAD 1; }\n\
                server {\n  listen 127.18.99.1:8080;\n  location / { proxy_pass http://be; }\n  \
                location @retry_once { if ($idempotent = 0) { return 502; } proxy_pass http://be; }\n}\n";
    let text = conf::lab_conf(dir.path(), body);
    let path = instance::write_conf(dir.path(), &text).unwrap();
    instance::test_conf(&nx, dir.path(), &path).unwrap();
}

#[test]
fn config_test_failure_is_shown_verbatim() {
    let nx = nginx();
    let dir = tempfile::tempdir().unwrap();
    let text = conf::lab_conf(
        dir.path(),
        "server {\n  listen 127.18.98.1:8080;\n  frobnicate on;\n}\n",
    );
    let path = instance::write_conf(dir.path(), &text).unwrap();
    let err = instance::test_conf(&nx, dir.path(), &path)
        .unwrap_err()
        .to_string();
    assert!(err.contains("unknown directive \"frobnicate\""), "{err}");
    assert!(
        err.contains("nginx.conf:"),
        "names the file and line: {err}"
    );
}

/// One plain GET; the whole response.
fn get(addr: std::net::SocketAddr) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(b"GET / HTTP/1.0\r\nHost: x\r\n\r\n").unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    resp
}

#[test]
fn starts_serves_reloads_and_stops() {
    let nx = nginx();
    let dir = tempfile::tempdir().unwrap();
    // An address of this test's own (no other test listens on 127.18.97.1).
    let addr = "127.18.97.1:8080".parse().unwrap();
    let body = |word: &str| {
        format!(
            "server {{\n  listen 127.18.97.1:8080;\n  location / {{ return 200 \"{word}\\n\"; }}\n}}\n"
        )
    };
    let text = conf::lab_conf(dir.path(), &body("hello"));
    let sup = Supervisor::new().unwrap();
    let mut inst = Instance::start(&nx, dir.path(), &text, &sup).unwrap();
    inst.wait_listening(addr, Duration::from_secs(10)).unwrap();
    let resp = get(addr);
    assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
    assert!(resp.ends_with("hello\n"), "{resp}");
    // A reload takes the new configuration: the answer changes (polled, bounded).
    instance::write_conf(dir.path(), &conf::lab_conf(dir.path(), &body("reloaded"))).unwrap();
    inst.reload().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let resp = get(addr);
        if resp.ends_with("reloaded\n") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the reload did not take the new configuration within 10 s: {resp}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    inst.stop(Duration::from_secs(5)).unwrap();
    let log = std::fs::read_to_string(dir.path().join("access.log")).unwrap();
    assert!(log.contains(" 200 \"-\" \"-\" "), "lab format line: {log}");
    assert!(
        !dir.path().join("logs").exists(),
        "nothing written outside the run files"
    );
}
