//! A tiny in-test HTTP/1.1 server (hyper) that can stall: the first request arms a window
//! `[first + stall_after, first + stall_after + stall_for)`; every request that arrives inside
//! it is held until the window ends. It answers `hello` with `x-backend` and echoes the
//! request method and body length in headers.
#![allow(dead_code)]

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::TcpListener;

#[derive(Clone, Copy)]
pub struct Stall {
    pub after: Duration,
    pub length: Duration,
}

pub struct TestServer {
    pub addr: SocketAddr,
    pub requests: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl TestServer {
    pub fn url(&self) -> String {
        format!("http://{}/t", self.addr)
    }
}

/// Start on `ip` (a distinct 127.x address per test), port chosen by the kernel.
pub async fn start(ip: &str, stall: Option<Stall>) -> TestServer {
    let listener = TcpListener::bind((ip, 0)).await.expect("bind loopback");
    let addr = listener.local_addr().unwrap();
    let requests = Arc::new(AtomicU64::new(0));
    let first: Arc<Mutex<Option<Instant>>> = Arc::new(Mutex::new(None));
    let reqs = requests.clone();
    let task = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let (reqs, first) = (reqs.clone(), first.clone());
            tokio::spawn(async move {
                let svc = service_fn(move |req: Request<hyper::body::Incoming>| {
                    let (reqs, first) = (reqs.clone(), first.clone());
                    async move {
                        reqs.fetch_add(1, Ordering::Relaxed);
                        let now = Instant::now();
                        let t0 = *first.lock().unwrap().get_or_insert(now);
                        if let Some(s) = stall {
                            let (from, to) = (t0 + s.after, t0 + s.after + s.length);
                            if now >= from && now < to {
                                tokio::time::sleep_until(to.into()).await;
                            }
                        }
                        let method = req.method().to_string();
                        let body = req
                            .into_body()
                            .collect()
                            .await
                            .map(|b| b.to_bytes().len())
                            .unwrap_or(0);
                        Ok::<_, Infallible>(
                            Response::builder()
                                .header("x-backend", "b1")
                                .header("x-method", method)
                                .header("x-body-len", body.to_string())
                                .body(Full::new(Bytes::from_static(b"hello")))
                                .unwrap(),
                        )
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    TestServer {
        addr,
        requests,
        task,
    }
}
