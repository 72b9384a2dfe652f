//! Seed 003 scaled down: 200 ms of downstream latency on the DB link, K round trips per
//! request, a pool of N connections. One request takes ≈ K × 200 ms; 20 concurrent requests
//! complete in a staircase (the k-th at ≈ ceil(k/N) × K × 200 ms); `/ready` queues behind the
//! pool and misses its probe timeout; removing the fault recovers without a restart; a control
//! backend without the fault stays fast in the same run.

mod common;

use common::*;
use resolvelab_backend::{Backend, BackendConfig, DbConfig, EchoDb};
use resolvelab_proxy::{Proxy, ProxyConfig};
use std::time::{Duration, Instant};

const K: u32 = 3;
const N: usize = 4;
const DELAY_MS: f64 = 200.0;

/// At least `expected_ms` less 5 %: an injected delay can be stretched by a busy host, never
/// shortened, so only lower bounds are wall-clock facts; the rest is read from counters.
fn at_least(actual: Duration, expected_ms: f64) -> bool {
    actual.as_secs_f64() * 1e3 >= expected_ms * 0.95
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_003_staircase() {
    let db = EchoDb::start("127.0.0.95:0".parse().unwrap())
        .await
        .unwrap();
    let mut pcfg = ProxyConfig::new("db", "127.0.0.96:0".parse().unwrap(), db.local_addr());
    pcfg.faults
        .push("latency:delay=200ms,direction=downstream".parse().unwrap());
    let proxy = Proxy::start(pcfg).await.unwrap();

    let db_cfg = |addr| DbConfig {
        addr,
        round_trips: K,
        pool: N,
        acquire_timeout: Duration::from_secs(15),
    };
    let mut slow = BackendConfig::new("slow", "127.0.0.97:0".parse().unwrap());
    slow.db = Some(db_cfg(proxy.local_addr()));
    let slow = Backend::start(slow).await.unwrap();
    let mut fast = BackendConfig::new("control", "127.0.0.98:0".parse().unwrap());
    fast.db = Some(db_cfg(db.local_addr()));
    let fast = Backend::start(fast).await.unwrap();

    // One request: K round trips of 200 ms.
    let t = Instant::now();
    assert_eq!(get_once(slow.local_addr(), "/").await.unwrap().status, 200);
    let one = t.elapsed();
    assert!(
        at_least(one, K as f64 * DELAY_MS),
        "one request took {one:?}"
    );

    // 20 concurrent requests queue behind a pool of N.
    let start = Instant::now();
    let addr = slow.local_addr();
    let tasks: Vec<_> = (0..20)
        .map(|_| {
            tokio::spawn(async move {
                let r = get_once(addr, "/").await.unwrap();
                (r.status, start.elapsed())
            })
        })
        .collect();
    // While saturated: the probe waits behind the pool and misses a 1 s probe timeout, the
    // pool gauges show the queue, and the control backend stays fast.
    let saturated = eventually(Duration::from_secs(2), || {
        let p = slow.stats().pool.unwrap();
        p.waiters >= 10 && p.in_use == N as u64
    })
    .await;
    assert!(saturated, "{:?}", slow.stats().pool);
    let probe = tokio::time::timeout(Duration::from_secs(1), get_once(addr, "/ready")).await;
    assert!(
        probe.is_err(),
        "/ready answered within its timeout under saturation"
    );
    let t = Instant::now();
    assert_eq!(get_once(fast.local_addr(), "/").await.unwrap().status, 200);
    // Faster than one request of the delayed backend, whose K round trips cannot take less
    // than K × 200 ms: the control's link carries no delay (a relative fact, not a deadline).
    assert!(
        t.elapsed() < one,
        "control moved: {:?} (the delayed backend's one request: {one:?})",
        t.elapsed()
    );
    assert_eq!(
        get_once(fast.local_addr(), "/ready").await.unwrap().status,
        200
    );

    let mut done = Vec::new();
    for t in tasks {
        let (status, at) = t.await.unwrap();
        assert_eq!(status, 200);
        done.push(at);
    }
    done.sort();
    eprintln!(
        "completions: {:?}",
        done.iter().map(|d| d.as_millis()).collect::<Vec<_>>()
    );
    let step = K as f64 * DELAY_MS;
    // The k-th completion cannot come before its step of the staircase: a pool of N finishes
    // at most N requests per K round trips.
    for (i, at) in done.iter().enumerate() {
        let k = i + 1;
        let expected = k.div_ceil(N) as f64 * step;
        assert!(
            at_least(*at, expected),
            "request {k} completed at {at:?}, before its step at {expected:.0} ms; all: {done:?}"
        );
    }
    // The pool's own counters: every request (and the probe) acquired a connection, none gave
    // up, and the last of the queue waited at least four steps.
    let p = slow.stats().pool.unwrap();
    assert!(p.acquired >= 21 && p.timeouts == 0, "{p:?}");
    assert!(
        p.wait_us_max as f64 >= 0.8 * 4.0 * step * 1e3,
        "max wait {} us",
        p.wait_us_max
    );
    assert!(
        slow.metrics_text()
            .contains("resolvelab_backend_pool_wait_seconds_bucket")
    );

    // The injection hit: the latency toxic touched the pool's connections.
    let hits = proxy.fault_hits()[0].1;
    assert!(hits >= 1 && hits <= N as u64, "latency hits {hits}");

    // Remove the fault: the same pool connections recover, no restart.
    assert!(proxy.remove_fault("latency_downstream"));
    let t = Instant::now();
    assert_eq!(get_once(slow.local_addr(), "/").await.unwrap().status, 200);
    // With the delay, K round trips take at least K × 200 ms; without it, less.
    assert!(
        t.elapsed() < Duration::from_millis((K as f64 * DELAY_MS * 0.95) as u64),
        "no recovery: {:?}",
        t.elapsed()
    );
    assert!(proxy.fault_hits().is_empty(), "the fault is gone");
    assert!(slow.stats().connections > 20);

    slow.shutdown().await;
    fast.shutdown().await;
    proxy.shutdown().await;
    db.shutdown();
}
