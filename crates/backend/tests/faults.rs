//! Every backend fault kind: its effect on a real client and its hit counter.

mod common;

use common::*;
use resolvelab_backend::{Backend, BackendConfig, BackendHandle};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

async fn backend(ip: &str, faults: &[&str]) -> BackendHandle {
    let mut cfg = BackendConfig::new("b1", format!("{ip}:0").parse().unwrap());
    for f in faults {
        cfg.faults.push(f.parse().unwrap());
    }
    Backend::start(cfg).await.unwrap()
}

/// Poll (bounded: 5 s) until a fresh connection is answered 200: the listener is back.
async fn serves_again(b: &BackendHandle) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Ok(r) = get_once(b.local_addr(), "/").await {
            assert_eq!(r.status, 200);
            return;
        }
        assert!(Instant::now() < deadline, "never listened again");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn hits(b: &BackendHandle, name: &str) -> u64 {
    b.faults()
        .into_iter()
        .find(|f| f.name == name)
        .unwrap()
        .hits
}

#[tokio::test]
async fn plain_keepalive_names_backend_and_logs() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("b.jsonl");
    let mut cfg = BackendConfig::new("b1", "127.0.0.81:0".parse().unwrap());
    cfg.log = Some(log.clone());
    cfg.body_size = Some(100);
    let b = Backend::start(cfg).await.unwrap();
    let mut c = connect(b.local_addr()).await.unwrap();
    let r1 = c.get("/").await.unwrap();
    let r2 = c.request("POST", "/x", "payload").await.unwrap();
    assert_eq!((r1.status, r1.backend.as_str(), r1.req), (200, "b1", 1));
    assert_eq!(
        (r2.conn, r2.req),
        (r1.conn, 2),
        "same keep-alive connection"
    );
    let body = r1.body.unwrap();
    assert_eq!(body.len(), 100);
    assert!(body.starts_with(b"backend b1\n"));
    assert_eq!(c.get("/health").await.unwrap().body.unwrap(), "ok\n");
    assert!(
        eventually(Duration::from_secs(5), || {
            std::fs::read_to_string(&log)
                .unwrap_or_default()
                .matches("\"request\"")
                .count()
                == 3
        })
        .await
    );
    let (schema, rows) = resolvelab_core::jsonl::read_values(&log).unwrap();
    assert_eq!(schema.as_deref(), Some("resolvelab.backend/v1"));
    let reqs: Vec<_> = rows
        .iter()
        .map(|r| r.1.as_ref().unwrap())
        .filter(|v| v["event"] == "request")
        .collect();
    assert_eq!(reqs[1]["req"], 2);
    assert_eq!(reqs[1]["conn"], reqs[0]["conn"]);
    assert_eq!(reqs[1]["method"], "POST");
    assert!(reqs[0]["t_us"].as_i64().unwrap() > 1_700_000_000_000_000);
    b.shutdown().await;
}

#[tokio::test]
async fn reclaim_drops_a_request_in_the_gap() {
    let b = backend("127.0.0.82", &["reclaim:delay=200ms..200ms"]).await;
    let mut c = connect(b.local_addr()).await.unwrap();
    assert_eq!(c.get("/").await.unwrap().status, 200);
    // Reuse at once, inside the 200 ms gap: the server swallows it and closes without a byte.
    let t = Instant::now();
    let e = c
        .get("/")
        .await
        .expect_err("the request in the gap must fail");
    assert!(
        t.elapsed() >= Duration::from_millis(100),
        "{:?}",
        t.elapsed()
    );
    assert!(e.contains("closed") || e.contains("incomplete"), "{e}");
    let f = &b.faults()[0];
    assert_eq!((f.hits, f.caught), (1, 1));
    // An idle connection is just closed, and counted, without a catch.
    let mut c = connect(b.local_addr()).await.unwrap();
    c.get("/").await.unwrap();
    assert!(c.closed_within(Duration::from_secs(3)).await);
    let f = &b.faults()[0];
    assert_eq!((f.hits, f.caught), (2, 1));
    b.shutdown().await;
}

#[tokio::test]
async fn reclaim_toxicity_is_respected() {
    let b = backend(
        "127.0.0.83",
        &["reclaim:toxicity=0.3,delay=0ms..1ms,seed=5"],
    )
    .await;
    // Concurrent connections draw from the same seeded stream: which connection gets which
    // draw varies, the number of closes does not.
    let tasks: Vec<_> = (0..60)
        .map(|_| {
            let addr = b.local_addr();
            tokio::spawn(async move {
                let mut c = connect(addr).await.unwrap();
                c.get("/").await.unwrap();
                // Generous and bounded: a close comes within 1 ms of the answer, but a busy
                // host may see it late; the connections left open wait in parallel.
                c.closed_within(Duration::from_secs(3)).await
            })
        })
        .collect();
    let mut closed = 0;
    for t in tasks {
        if t.await.unwrap() {
            closed += 1;
        }
    }
    // The backend's own counter decides; every close it counted reached its client.
    assert_eq!(hits(&b, "reclaim"), closed);
    assert!((8..=32).contains(&closed), "{closed}");
    b.shutdown().await;
}

#[tokio::test]
async fn idle_timeout_closes_idle_connections_only() {
    let b = backend("127.0.0.84", &["idle-timeout:500ms"]).await;
    let mut c = connect(b.local_addr()).await.unwrap();
    // Busy connections are not closed: three requests 100 ms apart.
    for _ in 0..3 {
        assert_eq!(c.get("/").await.unwrap().status, 200);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(hits(&b, "idle-timeout"), 0);
    let t = Instant::now();
    assert!(c.closed_within(Duration::from_secs(3)).await);
    assert!(
        t.elapsed() >= Duration::from_millis(300),
        "{:?}",
        t.elapsed()
    );
    assert_eq!(hits(&b, "idle-timeout"), 1);
    b.shutdown().await;
}

#[tokio::test]
async fn rst_resets() {
    let b = backend("127.0.0.85", &["rst"]).await;
    let mut s = TcpStream::connect(b.local_addr()).await.unwrap();
    let _ = s.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n").await;
    let mut buf = [0u8; 64];
    let r = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf))
        .await
        .unwrap();
    assert_eq!(r.unwrap_err().kind(), std::io::ErrorKind::ConnectionReset);
    assert_eq!(hits(&b, "rst"), 1);
    b.shutdown().await;
}

#[tokio::test]
async fn refuse_closes_the_port_for_a_window() {
    let b = backend("127.0.0.86", &["refuse:for=400ms"]).await;
    assert!(eventually(Duration::from_secs(2), || hits(&b, "refuse") == 1).await);
    let e = TcpStream::connect(b.local_addr()).await.unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused);
    serves_again(&b).await;
    assert_eq!(hits(&b, "refuse"), 1);
    b.shutdown().await;
}

#[tokio::test]
async fn hang_never_answers() {
    let b = backend("127.0.0.87", &["hang"]).await;
    let r = tokio::time::timeout(Duration::from_millis(400), get_once(b.local_addr(), "/")).await;
    assert!(r.is_err(), "no answer expected");
    assert_eq!(hits(&b, "hang"), 1);
    b.shutdown().await;
}

#[tokio::test]
async fn close_after_headers_cuts_the_body() {
    let b = backend("127.0.0.88", &["close-after-headers"]).await;
    let r = get_once(b.local_addr(), "/").await.unwrap();
    assert_eq!(r.status, 200, "headers arrive");
    assert!(r.body.is_err(), "the body never completes");
    assert_eq!(hits(&b, "close-after-headers"), 1);
    b.shutdown().await;
}

#[tokio::test]
async fn status_fault_with_toxicity_counts_every_hit() {
    let b = backend("127.0.0.89", &["status:code=503,toxicity=0.4,seed=11"]).await;
    let mut c = connect(b.local_addr()).await.unwrap();
    let mut n503 = 0;
    for _ in 0..200 {
        if c.get("/").await.unwrap().status == 503 {
            n503 += 1;
        }
    }
    assert_eq!(hits(&b, "status"), n503);
    assert!((50..=110).contains(&n503), "{n503}");
    // /health is exempt from request faults.
    assert_eq!(c.get("/health").await.unwrap().status, 200);
    b.shutdown().await;
}

#[tokio::test]
async fn slow_headers_and_latency_model() {
    let mut cfg = BackendConfig::new("b1", "127.0.0.90:0".parse().unwrap());
    cfg.latency = "50ms".parse().unwrap();
    cfg.faults.push("slow-headers:600ms".parse().unwrap());
    let b = Backend::start(cfg).await.unwrap();
    let t = Instant::now();
    assert_eq!(get_once(b.local_addr(), "/").await.unwrap().status, 200);
    assert!(
        t.elapsed() >= Duration::from_millis(650),
        "{:?}",
        t.elapsed()
    );
    assert_eq!(hits(&b, "slow-headers"), 1);
    b.remove_fault("slow-headers");
    let t = Instant::now();
    get_once(b.local_addr(), "/").await.unwrap();
    let e = t.elapsed();
    assert!(
        e >= Duration::from_millis(50) && e < Duration::from_millis(600),
        "{e:?}"
    );
    b.shutdown().await;
}

#[tokio::test]
async fn control_api_adds_lists_and_removes_faults() {
    let mut cfg = BackendConfig::new("b1", "127.0.0.91:0".parse().unwrap());
    cfg.control = Some("127.0.0.91:0".parse().unwrap());
    let b = Backend::start(cfg).await.unwrap();
    let ctl = b.control_addr().unwrap();
    let mut c = connect(ctl).await.unwrap();
    let r = c
        .request("POST", "/faults", "status:code=418")
        .await
        .unwrap();
    assert_eq!(r.status, 201);
    assert_eq!(get_once(b.local_addr(), "/").await.unwrap().status, 418);
    let list = c.get("/faults").await.unwrap().body.unwrap();
    let v: serde_json::Value = serde_json::from_slice(&list).unwrap();
    assert_eq!(v[0]["hits"], 1);
    let m = String::from_utf8(c.get("/metrics").await.unwrap().body.unwrap().to_vec()).unwrap();
    assert!(
        m.contains(
            "resolvelab_backend_fault_hits_total{backend=\"b1\",fault=\"status\",kind=\"status\"} 1"
        ),
        "{m}"
    );
    assert!(m.contains("status=\"418\"} 1"), "{m}");
    let bad = c.request("POST", "/faults", "explode").await.unwrap();
    assert_eq!(bad.status, 400);
    assert_eq!(
        c.request("DELETE", "/faults/status", "")
            .await
            .unwrap()
            .status,
        204
    );
    assert_eq!(get_once(b.local_addr(), "/").await.unwrap().status, 200);
    b.shutdown().await;
}

/// `restart`: an established keep-alive connection is reset (not left working, as `refuse`
/// leaves it), new connections are refused for the window, and the backend serves again after.
#[tokio::test]
async fn restart_resets_established_connections_and_refuses_new_ones() {
    let b = backend("127.0.0.187", &[]).await;
    let mut kept = connect(b.local_addr()).await.unwrap();
    assert_eq!(kept.get("/").await.unwrap().status, 200);
    // The same with `refuse`: the established connection keeps working.
    b.add_fault_str("refuse:for=300ms").unwrap();
    let refused = TcpStream::connect(b.local_addr()).await;
    assert!(refused.is_err(), "refuse closes the listener");
    assert_eq!(kept.get("/").await.unwrap().status, 200, "refuse spared it");
    assert!(b.remove_fault("refuse"));
    // Listening again before the restart (so its window closes an open listener: one hit).
    serves_again(&b).await;
    // Only `kept` is open (the probes' connections have closed): the restart resets one.
    assert!(eventually(Duration::from_secs(3), || b.stats().open == 1).await);
    b.add_fault_str("restart:for=400ms").unwrap();
    // Reset at once: the client's connection ends (bounded wait) and a request on it fails.
    assert!(
        kept.closed_within(Duration::from_secs(3)).await,
        "not reset"
    );
    assert!(kept.get("/").await.is_err());
    let e = TcpStream::connect(b.local_addr()).await.unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused);
    // One hit for the connection it reset, one for the window it refused.
    assert!(
        eventually(Duration::from_secs(2), || hits(&b, "restart") == 2).await,
        "{}",
        hits(&b, "restart")
    );
    serves_again(&b).await;
    b.shutdown().await;
}
