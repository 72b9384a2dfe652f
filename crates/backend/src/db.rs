//! The slow-dependency stand-in of the latency-injection experiment (DOMAIN.md §6): an echo "database" and a bounded connection pool
//! whose wait time is measured (the metric the seed found missing).

use hdrhistogram::Histogram;
use resolvelab_core::policy;
use serde::Serialize;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};

/// How the backend reaches its database.
#[derive(Debug, Clone, PartialEq)]
pub struct DbConfig {
    /// The DB (or a proxy in front of it).
    pub addr: SocketAddr,
    /// Sequential round trips per request.
    pub round_trips: u32,
    /// Pool size.
    pub pool: usize,
    /// Longest wait for a pool connection before answering 503.
    pub acquire_timeout: Duration,
}

/// A running echo DB: every line it receives is sent back (one line = one round trip).
pub struct EchoDb {
    addr: SocketAddr,
    queries: Arc<AtomicU64>,
    stop: watch::Sender<bool>,
}

impl EchoDb {
    /// Listen on `addr` (port 0 picks one) and echo lines.
    pub async fn start(addr: SocketAddr) -> anyhow::Result<EchoDb> {
        let l = TcpListener::bind(addr)
            .await
            .map_err(|e| anyhow::anyhow!("echo-db cannot listen on {addr}: {e}"))?;
        let addr = l.local_addr()?;
        let queries = Arc::new(AtomicU64::new(0));
        let (stop, mut stop_rx) = watch::channel(false);
        let q = queries.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    r = l.accept() => {
                        let Ok((s, _)) = r else { continue };
                        let _ = s.set_nodelay(true);
                        let q = q.clone();
                        let mut stop_c = stop_rx.clone();
                        tokio::spawn(async move {
                            let (r, mut w) = s.into_split();
                            let mut lines = BufReader::new(r);
                            let mut line = String::new();
                            loop {
                                line.clear();
                                tokio::select! {
                                    n = lines.read_line(&mut line) => match n {
                                        Ok(0) | Err(_) => return,
                                        Ok(_) => {
                                            q.fetch_add(1, Ordering::Relaxed);
                                            if w.write_all(line.as_bytes()).await.is_err() {
                                                return;
                                            }
                                        }
                                    },
                                    _ = stop_c.changed() => return,
                                }
                            }
                        });
                    }
                    _ = stop_rx.changed() => return,
                }
            }
        });
        Ok(EchoDb {
            addr,
            queries,
            stop,
        })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Lines echoed so far.
    pub fn queries(&self) -> u64 {
        self.queries.load(Ordering::Relaxed)
    }

    /// Stop listening and close every connection.
    pub fn shutdown(&self) {
        let _ = self.stop.send(true);
    }
}

/// Pool gauges and the wait-time histogram, as `/metrics` exports them.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PoolStats {
    /// Configured size.
    pub size: usize,
    /// Connections checked out now.
    pub in_use: u64,
    /// Requests waiting for a connection now.
    pub waiters: u64,
    /// Successful acquisitions.
    pub acquired: u64,
    /// Acquisitions that gave up after `acquire_timeout`.
    pub timeouts: u64,
    /// Round trips that failed (connection lost).
    pub errors: u64,
    /// Wait-time percentiles in microseconds: p50, p90, p99, max.
    pub wait_us_p50: u64,
    /// 90th percentile.
    pub wait_us_p90: u64,
    /// 99th percentile.
    pub wait_us_p99: u64,
    /// Largest wait.
    pub wait_us_max: u64,
    /// Cumulative histogram buckets: (upper bound in seconds, count ≤ bound).
    pub wait_buckets: Vec<(f64, u64)>,
    /// Sum of all waits in seconds.
    pub wait_sum_s: f64,
}

pub(crate) struct Pool {
    cfg: DbConfig,
    idle: Mutex<Vec<BufReader<TcpStream>>>,
    sem: Arc<Semaphore>,
    in_use: AtomicU64,
    waiters: AtomicU64,
    acquired: AtomicU64,
    timeouts: AtomicU64,
    errors: AtomicU64,
    wait: Mutex<Histogram<u64>>,
}

/// Why a request could not use the DB.
#[derive(Debug)]
pub(crate) enum DbError {
    /// No pool connection within `acquire_timeout`.
    Timeout(Duration),
    /// Connect or round trip failed.
    Io(String),
}

pub(crate) struct PoolConn {
    pool: Arc<Pool>,
    conn: Option<BufReader<TcpStream>>,
    /// A round trip was started and not finished (the request was cancelled): the connection
    /// may still carry an answer, so it must not go back to the pool.
    dirty: bool,
    _permit: OwnedSemaphorePermit,
}

const BUCKETS_S: &[f64] = &[
    0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

impl Pool {
    pub(crate) fn new(cfg: DbConfig, allow_remote: bool) -> anyhow::Result<Arc<Pool>> {
        policy::check_target(cfg.addr, allow_remote).map_err(anyhow::Error::msg)?;
        if cfg.pool == 0 {
            anyhow::bail!("--pool 0: the pool needs at least one connection");
        }
        Ok(Arc::new(Pool {
            sem: Arc::new(Semaphore::new(cfg.pool)),
            idle: Mutex::new(Vec::new()),
            in_use: AtomicU64::new(0),
            waiters: AtomicU64::new(0),
            acquired: AtomicU64::new(0),
            timeouts: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            // 1 µs .. 1 h, 3 significant digits.
            wait: Mutex::new(
                Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid bounds"),
            ),
            cfg,
        }))
    }

    pub(crate) fn round_trips(&self) -> u32 {
        self.cfg.round_trips
    }

    pub(crate) async fn acquire(self: &Arc<Pool>) -> Result<(PoolConn, Duration), DbError> {
        self.waiters.fetch_add(1, Ordering::Relaxed);
        let t0 = Instant::now();
        let r =
            tokio::time::timeout(self.cfg.acquire_timeout, self.sem.clone().acquire_owned()).await;
        self.waiters.fetch_sub(1, Ordering::Relaxed);
        let waited = t0.elapsed();
        {
            let mut h = self.wait.lock().unwrap_or_else(|p| p.into_inner());
            h.saturating_record(waited.as_micros().max(1) as u64);
        }
        let permit = match r {
            Ok(Ok(p)) => p,
            _ => {
                self.timeouts.fetch_add(1, Ordering::Relaxed);
                return Err(DbError::Timeout(waited));
            }
        };
        self.acquired.fetch_add(1, Ordering::Relaxed);
        self.in_use.fetch_add(1, Ordering::Relaxed);
        let mut pc = PoolConn {
            pool: self.clone(),
            conn: None,
            dirty: false,
            _permit: permit,
        };
        let idle = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
        pc.conn = match idle {
            Some(c) => Some(c),
            None => {
                let s = TcpStream::connect(self.cfg.addr).await.map_err(|e| {
                    self.errors.fetch_add(1, Ordering::Relaxed);
                    DbError::Io(format!("connect {}: {e}", self.cfg.addr))
                })?;
                let _ = s.set_nodelay(true);
                Some(BufReader::new(s))
            }
        };
        Ok((pc, waited))
    }

    pub(crate) fn stats(&self) -> PoolStats {
        let h = self.wait.lock().unwrap_or_else(|p| p.into_inner());
        let q = |p: f64| {
            if h.is_empty() {
                0
            } else {
                h.value_at_quantile(p)
            }
        };
        let mut buckets = Vec::with_capacity(BUCKETS_S.len());
        for b in BUCKETS_S {
            let hi = (b * 1e6) as u64;
            buckets.push((*b, h.count_between(0, hi)));
        }
        let sum_us: f64 = h
            .iter_recorded()
            .map(|v| v.value_iterated_to() as f64 * v.count_at_value() as f64)
            .sum();
        PoolStats {
            size: self.cfg.pool,
            in_use: self.in_use.load(Ordering::Relaxed),
            waiters: self.waiters.load(Ordering::Relaxed),
            acquired: self.acquired.load(Ordering::Relaxed),
            timeouts: self.timeouts.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
            wait_us_p50: q(0.5),
            wait_us_p90: q(0.9),
            wait_us_p99: q(0.99),
            wait_us_max: if h.is_empty() { 0 } else { h.max() },
            wait_buckets: buckets,
            wait_sum_s: sum_us / 1e6,
        }
    }
}

impl PoolConn {
    /// One round trip: send a line, read it back.
    pub(crate) async fn round_trip(&mut self, i: u32) -> Result<(), DbError> {
        let Some(c) = self.conn.as_mut() else {
            return Err(DbError::Io("connection lost".into()));
        };
        let q = format!("q{i}\n");
        self.dirty = true;
        let r: std::io::Result<bool> = async {
            c.get_mut().write_all(q.as_bytes()).await?;
            let mut line = String::new();
            let n = c.read_line(&mut line).await?;
            Ok(n > 0 && line == q)
        }
        .await;
        self.dirty = false;
        match r {
            Ok(true) => Ok(()),
            Ok(false) => {
                self.conn = None;
                self.pool.errors.fetch_add(1, Ordering::Relaxed);
                Err(DbError::Io(
                    "db closed the connection or answered garbage".into(),
                ))
            }
            Err(e) => {
                self.conn = None;
                self.pool.errors.fetch_add(1, Ordering::Relaxed);
                Err(DbError::Io(e.to_string()))
            }
        }
    }
}

impl Drop for PoolConn {
    fn drop(&mut self) {
        self.pool.in_use.fetch_sub(1, Ordering::Relaxed);
        if let Some(c) = self.conn.take()
            && !self.dirty
        {
            self.pool
                .idle
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(c);
        }
    }
}
