//! The seeds' control experiment (4-3) with the real nginx: two backends with `reclaim` on,
//! one `resolve` upstream whose name has a static DNS answer — the IP is fixed to the first
//! backend. nginx's first tries fail on reused keep-alive connections (`upstream prematurely
//! closed connection`) and its retries hide them: the client sees 0 errors while the hit
//! counters are > 0.
//!
//! Why one address in the answer: with a single peer nginx compensates every failure on a
//! cached keep-alive connection (F6) and may retry the same peer as often as needed. With both
//! addresses in the answer the retry must go to the *other* peer, which can fail the same way;
//! then every peer has been tried and nginx answers `no live upstreams` — the
//! `tries-exhausted` class, a different experiment (measured here: 63 of 1,600 at p = 0.3).

mod common;

use common::*;
use resolvelab_backend::{Backend, BackendConfig, BackendHandle};
use resolvelab_core::supervise::Supervisor;
use resolvelab_dns::{DnsConfig, DnsServer, NameConfig};
use resolvelab_nginx::{Instance, Nginx, conf};
use std::net::{SocketAddr, TcpListener};
use std::time::Duration;

const B1: &str = "127.0.0.102";
const B2: &str = "127.0.0.103";
const NGX: &str = "127.0.0.104";

/// A port free on both backend addresses (same port: the DNS answer carries only IPs).
fn shared_port() -> u16 {
    for _ in 0..50 {
        let l = TcpListener::bind(format!("{B1}:0")).unwrap();
        let port = l.local_addr().unwrap().port();
        if TcpListener::bind(format!("{B2}:{port}")).is_ok() {
            return port;
        }
    }
    panic!("no common free port on {B1} and {B2}");
}

async fn start_backend(
    name: &str,
    ip: &str,
    port: u16,
    seed: u64,
    dir: &std::path::Path,
) -> BackendHandle {
    let mut cfg = BackendConfig::new(name, format!("{ip}:{port}").parse().unwrap());
    cfg.faults.push(
        format!("reclaim:toxicity=0.3,delay=0ms..50ms,seed={seed}")
            .parse()
            .unwrap(),
    );
    cfg.log = Some(dir.join(format!("{name}.jsonl")));
    Backend::start(cfg).await.unwrap()
}

#[test]
fn reclaim_race_with_fixed_ip_is_hidden_by_retries() {
    let nginx = Nginx::obtain(None).expect("nginx for the lab (resolvelab nginx build)");
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let port = shared_port();
    let (dns, b1, b2) = rt.block_on(async {
        let dns = DnsServer::start(DnsConfig {
            listen: "127.0.0.101:0".parse().unwrap(),
            names: vec![NameConfig::parse_cli(&format!("app.test.local=static:{B1}")).unwrap()],
            log: Some(run.join("dns.jsonl")),
            ..DnsConfig::default()
        })
        .await
        .unwrap();
        let b1 = start_backend("b1", B1, port, 1, run).await;
        let b2 = start_backend("b2", B2, port, 2, run).await;
        (dns, b1, b2)
    });
    let nport = TcpListener::bind(format!("{NGX}:0"))
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let listen: SocketAddr = format!("{NGX}:{nport}").parse().unwrap();
    let http = format!(
        "resolver {dns} valid=1s ipv6=off;\n\
         upstream be {{\n  zone be 64k;\n  server app.test.local:{port} resolve;\n  keepalive 16;\n}}\n\
         server {{\n  listen {listen};\n  location / {{\n    proxy_pass http://be;\n    proxy_http_version 1.1;\n    proxy_set_header Connection \"\";\n  }}\n}}\n",
        dns = dns.local_addr()
    );
    let text = conf::lab_conf(run, &http);
    let sup = Supervisor::new().unwrap();
    let mut nx = Instance::start(&nginx, run, &text, &sup).unwrap();
    nx.wait_listening(listen, Duration::from_secs(10)).unwrap();

    let mut offsets = (0, 0);
    let (errors, ok) = rt.block_on(async {
        // A resolve upstream is empty until nginx's first DNS answer: wait for a 200.
        let up = eventually_async(Duration::from_secs(10), || async {
            matches!(get_once(listen, "/").await, Ok(r) if r.status == 200)
        })
        .await;
        assert!(up, "nginx never got a DNS answer");
        // Requests before the first answer got `no live upstreams`; judge only what follows.
        let warm = std::fs::read_to_string(run.join("error.log"))
            .unwrap_or_default()
            .len();
        let warm_access = std::fs::read_to_string(run.join("access.log"))
            .unwrap_or_default()
            .len();
        offsets = (warm, warm_access);
        // Bounded load: 8 keep-alive client connections × 200 requests.
        let tasks: Vec<_> = (0..8)
            .map(|_| {
                tokio::spawn(async move {
                    let (mut errors, mut ok) = (0u32, 0u32);
                    let mut c = connect(listen).await.unwrap();
                    for _ in 0..200 {
                        match c.get("/").await {
                            Ok(r) if r.status == 200 && r.body.is_ok() => ok += 1,
                            _ => {
                                errors += 1;
                                c = connect(listen).await.unwrap();
                            }
                        }
                    }
                    (errors, ok)
                })
            })
            .collect();
        let mut total = (0, 0);
        for t in tasks {
            let (e, o) = t.await.unwrap();
            total.0 += e;
            total.1 += o;
        }
        total
    });
    nx.stop(Duration::from_secs(5)).unwrap();

    let hits: u64 = [&b1, &b2].iter().map(|b| b.faults()[0].hits).sum();
    let caught: u64 = [&b1, &b2].iter().map(|b| b.faults()[0].caught).sum();
    let error_log =
        std::fs::read_to_string(run.join("error.log")).unwrap()[offsets.0..].to_string();
    let premature = error_log
        .matches("upstream prematurely closed connection")
        .count();
    let access = std::fs::read_to_string(run.join("access.log")).unwrap()[offsets.1..].to_string();
    let retried = access
        .lines()
        .filter(|l| l.split('"').nth(1).is_some_and(|a| a.contains(',')))
        .count();
    let nlu = error_log.matches("no live upstreams").count();
    eprintln!(
        "client: {ok} ok, {errors} errors; reclaim hits {hits}, caught {caught}; error.log: {premature} premature, {nlu} NLU; access.log: {retried} retried"
    );
    assert_eq!(errors, 0, "retries must hide every first-try failure");
    assert_eq!(ok, 1600);
    assert!(hits > 0, "the reclaim fault never hit");
    assert!(caught > 0, "no request was caught in a reclaim gap");
    assert!(
        premature > 0,
        "nginx logged no `upstream prematurely closed connection`"
    );
    assert!(retried > 0, "no request needed a retry");
    assert_eq!(nlu, 0);
    // The IP is fixed: the second backend never sees a request.
    assert_eq!(b2.stats().requests, 0);

    rt.block_on(async {
        b1.shutdown().await;
        b2.shutdown().await;
        dns.shutdown().await.unwrap();
    });
}

async fn eventually_async<F, Fut>(t: Duration, mut f: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + t;
    while tokio::time::Instant::now() < deadline {
        if f().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}
