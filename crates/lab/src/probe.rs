//! Readiness probes (`[[probe]]`): what a kubelet would see of a backend during the run.
//!
//! Seed 003's third lesson: when a dependency slows down, the readiness probe queues behind the
//! same connection pool as the traffic and times out, so the orchestrator pulls a node that is
//! only slow. Each prober asks `GET path` on a fixed schedule (`t0 + k × interval`, never
//! drifting behind a slow answer), on a fresh connection like a kubelet, and writes one line per
//! probe to `probes.jsonl` (`schema: resolvelab.probes/v1`).

use anyhow::Result;
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use resolvelab_core::jsonl::JsonlWriter;
use resolvelab_core::time::now_us;
use resolvelab_load::CancellationToken;
use resolvelab_scenario::format::ProbeSpec;
use serde::Serialize;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::time::Instant;

/// The `schema` of `probes.jsonl`.
pub const SCHEMA: &str = resolvelab_core::evidence::schema::PROBES;

/// One probe's outcome, one line of `probes.jsonl`.
#[derive(Debug, Clone, Serialize)]
pub struct ProbeRecord {
    /// Scheduled time, epoch µs (`t0 + k × interval`).
    pub t_us: i64,
    /// When the probe actually started, epoch µs.
    pub sent_us: i64,
    /// The probed backend's name.
    pub target: String,
    /// Path requested.
    pub path: String,
    /// Answer within the timeout with a 2xx status.
    pub ok: bool,
    /// HTTP status, when an answer came in time.
    pub status: Option<u16>,
    /// Time to the answer (or to giving up), µs.
    pub latency_us: i64,
    /// `timeout`, `connect: …`, `http: …` when there was no answer.
    pub error: Option<String>,
}

/// Probe `addr` on `spec`'s schedule from `t0` until `cancel`; returns how many probes ran.
pub async fn run(
    spec: ProbeSpec,
    addr: SocketAddr,
    out: Arc<JsonlWriter>,
    t0: Instant,
    cancel: CancellationToken,
) -> Result<u64> {
    resolvelab_core::policy::check_target(addr, false).map_err(anyhow::Error::msg)?;
    let interval = spec.interval.get();
    let timeout = spec.timeout.get();
    // Epoch time of `t0`, so scheduled times are exact multiples of the interval.
    let base_us = now_us() - t0.elapsed().as_micros() as i64;
    let mut n = 0u64;
    loop {
        let due = t0 + interval * n as u32;
        tokio::select! {
            _ = cancel.cancelled() => return Ok(n),
            _ = tokio::time::sleep_until(due) => {}
        }
        let t_us = base_us + (interval * n as u32).as_micros() as i64;
        let sent_us = now_us();
        let start = Instant::now();
        let outcome = tokio::select! {
            _ = cancel.cancelled() => return Ok(n),
            r = tokio::time::timeout(timeout, get(addr, &spec.path)) => r,
        };
        let (status, error) = match outcome {
            Err(_) => (None, Some("timeout".to_string())),
            Ok(Ok(s)) => (Some(s), None),
            Ok(Err(e)) => (None, Some(e)),
        };
        out.write(&ProbeRecord {
            t_us,
            sent_us,
            target: spec.target.clone(),
            path: spec.path.clone(),
            ok: status.is_some_and(|s| (200..300).contains(&s)),
            status,
            latency_us: start.elapsed().as_micros() as i64,
            error,
        })?;
        n += 1;
    }
}

/// One `GET` on a new connection; the status once the whole body is read (a readiness probe
/// and a GSLB health check ask the same way).
pub(crate) async fn get(addr: SocketAddr, path: &str) -> Result<u16, String> {
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
        .await
        .map_err(|e| format!("http: {e}"))?;
    let req = hyper::Request::get(path)
        .header(hyper::header::HOST, addr.to_string())
        .header(hyper::header::CONNECTION, "close")
        .body(Empty::<Bytes>::new())
        .map_err(|e| format!("http: {e}"))?;
    // The connection future ends when the exchange does; it is dropped with this function.
    let exchange = async {
        let resp = send
            .send_request(req)
            .await
            .map_err(|e| format!("http: {e}"))?;
        let status = resp.status().as_u16();
        resp.into_body()
            .collect()
            .await
            .map_err(|e| format!("http: {e}"))?;
        Ok(status)
    };
    tokio::pin!(conn);
    tokio::pin!(exchange);
    tokio::select! {
        r = &mut exchange => r,
        r = &mut conn => match r {
            Err(e) => Err(format!("http: {e}")),
            // Connection done; the exchange resolves next.
            Ok(()) => exchange.await,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn probes_record_ok_and_timeout_on_schedule() {
        // A listener that answers the first connection at once and never answers the second.
        let l = tokio::net::TcpListener::bind("127.0.0.93:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let mut held = Vec::new();
            for i in 0.. {
                let Ok((mut s, _)) = l.accept().await else {
                    break;
                };
                if i == 0 {
                    let mut buf = [0u8; 1024];
                    let _ = s.read(&mut buf).await;
                    let _ = s
                        .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 6\r\nconnection: close\r\n\r\nready\n")
                        .await;
                } else {
                    held.push(s);
                }
            }
        });
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("probes.jsonl");
        let out = Arc::new(JsonlWriter::create(&path, SCHEMA).unwrap());
        let spec = ProbeSpec {
            target: "b1".into(),
            path: "/ready".into(),
            interval: "200ms".parse().unwrap(),
            timeout: "100ms".parse().unwrap(),
        };
        let cancel = CancellationToken::new();
        let task = tokio::spawn(run(spec, addr, out, Instant::now(), cancel.clone()));
        // Poll the file until three probes are in, with a deadline.
        let deadline = Instant::now() + Duration::from_secs(10);
        let lines = loop {
            let text = std::fs::read_to_string(&path).unwrap();
            let lines: Vec<serde_json::Value> = text
                .lines()
                .skip(1)
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            if lines.len() >= 3 || Instant::now() > deadline {
                break lines;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        cancel.cancel();
        let n = task.await.unwrap().unwrap();
        assert!(n >= 3, "{n} probes");
        assert_eq!(lines[0]["ok"], true);
        assert_eq!(lines[0]["status"], 200);
        assert_eq!(lines[1]["ok"], false);
        assert_eq!(lines[1]["error"], "timeout");
        // On schedule: 200 ms apart whatever the answers took, and never sent early.
        let gap = lines[2]["t_us"].as_i64().unwrap() - lines[1]["t_us"].as_i64().unwrap();
        assert_eq!(gap, 200_000);
        for l in &lines {
            assert!(l["sent_us"].as_i64().unwrap() >= l["t_us"].as_i64().unwrap());
        }
    }
}
