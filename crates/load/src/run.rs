//! The load run: a scheduler thread that dispatches requests on time, request tasks on the
//! tokio runtime, and a collector thread that writes records and builds the summary.
//!
//! Why a thread for the scheduler: tokio's timer has millisecond resolution, which at 5,000
//! requests/s would release requests in bunches of five; `std::thread::sleep` (nanosleep) keeps
//! the dispatch within tens of microseconds of the schedule.

use crate::client::{Conn, Outcome};
use crate::config::LoadConfig;
use crate::plan::RatePlan;
use crate::record::{ErrorKind, Header, JsonlSink, NullSink, Record, RecordSink, SCHEMA};
use crate::summary::{Classes, Percentiles, Summary, SummaryBuilder};
use anyhow::Context;
use bytes::Bytes;
use hdrhistogram::Histogram;
use http_body_util::Full;
use hyper::HeaderMap;
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Method, Request, Uri};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::borrow::Cow;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{Semaphore, mpsc};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Where the per-request records go.
pub enum Output {
    /// Nowhere (summary only).
    None,
    /// A JSON Lines file (created/truncated).
    File(PathBuf),
    /// Standard output (`--out -`).
    Stdout,
    /// Any sink the caller provides (its header, if any, is the caller's business).
    Sink(Box<dyn RecordSink>),
}

/// Live counters of a run, readable at any time from any thread (e.g. for a progress line).
#[derive(Debug, Default)]
pub struct Live {
    // Request tasks write the first group, the collector thread the second: separate cache
    // lines keep the two cores from bouncing one line back and forth on every request.
    pub(crate) req: Padded<ReqCounters>,
    fin: Padded<DoneCounters>,
}

#[derive(Debug, Default)]
#[repr(align(64))]
pub(crate) struct Padded<T>(T);

impl<T> std::ops::Deref for Padded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

#[derive(Debug, Default)]
pub(crate) struct ReqCounters {
    pub(crate) scheduled: AtomicU64,
    pub(crate) sent: AtomicU64,
    pub(crate) in_flight: AtomicUsize,
}

#[derive(Debug, Default)]
struct DoneCounters {
    done: AtomicU64,
    classes: [AtomicU64; 6],
    errors: [AtomicU64; 7],
}

/// A copy of the live counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LiveSnapshot {
    /// Requests whose scheduled time has come (sent, dropped or waiting).
    pub scheduled: u64,
    /// Requests sent.
    pub sent: u64,
    /// Requests finished and recorded (response, error, late or dropped).
    pub done: u64,
    /// Requests outstanding now.
    pub in_flight: usize,
    /// Status classes of the finished requests.
    pub classes: Classes,
    /// Error counts, indexed like [`ErrorKind::ALL`].
    pub errors: [u64; 7],
}

impl Live {
    /// New, zeroed counters (share them with `Arc`).
    pub fn new() -> Arc<Live> {
        Arc::new(Live::default())
    }

    /// Read all counters.
    pub fn snapshot(&self) -> LiveSnapshot {
        let c: Vec<u64> = self.fin.classes.iter().map(|a| a.load(Relaxed)).collect();
        let mut errors = [0; 7];
        for (e, a) in errors.iter_mut().zip(&self.fin.errors) {
            *e = a.load(Relaxed);
        }
        LiveSnapshot {
            scheduled: self.req.scheduled.load(Relaxed),
            sent: self.req.sent.load(Relaxed),
            done: self.fin.done.load(Relaxed),
            in_flight: self.req.in_flight.load(Relaxed),
            classes: Classes {
                c1xx: c[0],
                c2xx: c[1],
                c3xx: c[2],
                c4xx: c[3],
                c5xx: c[4],
                errors: c[5],
            },
            errors,
        }
    }
}

/// What request tasks hand to the collector: one record (open loop, where a record should
/// reach the file as soon as it exists) or a batch (`--rate max`, where one channel send per
/// request would cost more than the bookkeeping itself).
pub(crate) enum Batch {
    One(Record),
    Many(Vec<Record>),
}

/// State shared by the scheduler and the request tasks.
pub(crate) struct Shared {
    addr: SocketAddr,
    uri: Uri,
    /// Per method of the mix: the method, its body, and its name for the records.
    methods: Vec<(Method, Bytes, Cow<'static, str>)>,
    /// Every request's headers (Host, User-Agent, `--header`s, `Connection: close`), built
    /// once: each request clones this map instead of hashing and inserting every header.
    template: HeaderMap,
    capture: Option<HeaderName>,
    pub(crate) keepalive: bool,
    pub(crate) timeout: Duration,
    max_in_flight: usize,
    pub(crate) cancel: CancellationToken,
    tx: mpsc::UnboundedSender<Batch>,
    pub(crate) live: Arc<Live>,
    next_conn: AtomicU64,
    start: Instant,
    pub(crate) start_us: i64,
    idle: Mutex<Vec<Conn>>,
    permits: Arc<Semaphore>,
}

/// The name of a method as a record stores it; the standard ones need no allocation.
fn method_name(m: &Method) -> Cow<'static, str> {
    const STANDARD: [(Method, &str); 9] = [
        (Method::GET, "GET"),
        (Method::POST, "POST"),
        (Method::PUT, "PUT"),
        (Method::DELETE, "DELETE"),
        (Method::HEAD, "HEAD"),
        (Method::OPTIONS, "OPTIONS"),
        (Method::CONNECT, "CONNECT"),
        (Method::PATCH, "PATCH"),
        (Method::TRACE, "TRACE"),
    ];
    STANDARD
        .iter()
        .find(|(s, _)| s == m)
        .map_or_else(|| Cow::Owned(m.to_string()), |(_, n)| Cow::Borrowed(*n))
}

/// The result of one attempt.
struct Attempt {
    res: Result<Outcome, ErrorKind>,
    conn: Option<u64>,
    keep: Option<Conn>,
}

impl Shared {
    pub(crate) fn now_us(&self) -> i64 {
        // One monotonic base for every timestamp of the run: wall-clock steps cannot bend it.
        self.start_us + self.start.elapsed().as_micros() as i64
    }

    fn request(&self, m: usize) -> Request<Full<Bytes>> {
        let (method, body, _) = &self.methods[m];
        let mut req = Request::new(Full::new(body.clone()));
        *req.method_mut() = method.clone();
        *req.uri_mut() = self.uri.clone();
        *req.headers_mut() = self.template.clone();
        req
    }

    /// Connect (or reuse `conn` if it is still usable) and exchange one request. `conn_id` is
    /// set as soon as a connection is in use and `keep` receives it back if it may be reused,
    /// so a caller that abandons this future (timeout, cancel) still knows which one it was.
    pub(crate) async fn exchange_on(
        &self,
        conn: Option<Conn>,
        m: usize,
        conn_id: &mut Option<u64>,
        keep: &mut Option<Conn>,
    ) -> Result<Outcome, ErrorKind> {
        let reused = conn.and_then(|mut c| c.usable().then_some(c));
        let mut c = match reused {
            Some(c) => c,
            None => Conn::open(self.addr, self.next_conn.fetch_add(1, Relaxed)).await?,
        };
        *conn_id = Some(c.id);
        let out = c.exchange(self.request(m), self.capture.as_ref()).await?;
        if out.reusable && self.keepalive {
            *keep = Some(c);
        }
        Ok(out)
    }

    /// Connect (or reuse `conn`), exchange, all within `--timeout`; cancellation ends it early.
    /// `cancelled` is the caller's pinned cancellation future: a worker keeps one for its whole
    /// life, so the token's waiter list is not locked once per request.
    async fn attempt<F: std::future::Future<Output = ()>>(
        &self,
        conn: Option<Conn>,
        m: usize,
        cancelled: std::pin::Pin<&mut F>,
    ) -> Attempt {
        let mut conn_id = None;
        let mut keep = None;
        let res = {
            let work = self.exchange_on(conn, m, &mut conn_id, &mut keep);
            tokio::select! {
                r = tokio::time::timeout(self.timeout, work) => r.unwrap_or(Err(ErrorKind::Timeout)),
                _ = cancelled => Err(ErrorKind::Other),
            }
        };
        Attempt {
            res,
            conn: conn_id,
            keep,
        }
    }

    fn emit(&self, r: Record) {
        // The collector lives until every sender is gone, so this cannot fail while we run.
        let _ = self.tx.send(Batch::One(r));
    }

    /// Hand a batch of records to the collector.
    pub(crate) fn emit_many(&self, rs: Vec<Record>) {
        if !rs.is_empty() {
            let _ = self.tx.send(Batch::Many(rs));
        }
    }

    fn record(&self, seq: u64, t_us: i64, sent_us: i64, m: usize, a: Attempt) -> Record {
        self.finished(seq, t_us, sent_us, self.now_us(), m, a.res, a.conn)
    }

    /// The record of a request that was sent at `sent_us` and ended at `done`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn finished(
        &self,
        seq: u64,
        t_us: i64,
        sent_us: i64,
        done: i64,
        m: usize,
        res: Result<Outcome, ErrorKind>,
        conn: Option<u64>,
    ) -> Record {
        let (status, bytes, header, error) = match res {
            Ok(o) => (Some(o.status), o.bytes, o.header, None),
            Err(e) => (None, 0, None, Some(e)),
        };
        Record {
            t_us,
            sent_us: Some(sent_us),
            latency_us: Some(done - t_us),
            uncorrected_us: Some(done - sent_us),
            status,
            bytes,
            error,
            conn,
            method: self.methods[m].2.clone(),
            header,
            seq,
        }
    }

    fn unsent(&self, seq: u64, t_us: i64, m: usize, error: ErrorKind) -> Record {
        Record {
            t_us,
            sent_us: None,
            latency_us: None,
            uncorrected_us: None,
            status: None,
            bytes: 0,
            error: Some(error),
            conn: None,
            method: self.methods[m].2.clone(),
            header: None,
            seq,
        }
    }
}

/// One scheduled request: wait for a keep-alive connection if all are busy (counted as lag,
/// `late` past the timeout), then send.
async fn scheduled(sh: Arc<Shared>, seq: u64, due: Instant, t_us: i64, m: usize) {
    let token = sh.cancel.clone();
    let cancelled = token.cancelled();
    tokio::pin!(cancelled);
    let permit = if sh.keepalive {
        let wait = tokio::time::timeout_at(
            (due + sh.timeout).into(),
            sh.permits.clone().acquire_owned(),
        );
        let got = tokio::select! {
            p = wait => p.ok().and_then(|p| p.ok()),
            _ = cancelled.as_mut() => None,
        };
        match got {
            Some(p) => Some(p),
            None => {
                let kind = if sh.cancel.is_cancelled() {
                    ErrorKind::Other
                } else {
                    ErrorKind::Late
                };
                sh.emit(sh.unsent(seq, t_us, m, kind));
                sh.live.req.in_flight.fetch_sub(1, Relaxed);
                return;
            }
        }
    } else {
        None
    };
    let conn = if sh.keepalive {
        sh.idle.lock().unwrap_or_else(|p| p.into_inner()).pop()
    } else {
        None
    };
    let sent = sh.now_us();
    sh.live.req.sent.fetch_add(1, Relaxed);
    let mut a = sh.attempt(conn, m, cancelled.as_mut()).await;
    if let Some(c) = a.keep.take() {
        sh.idle.lock().unwrap_or_else(|p| p.into_inner()).push(c);
    }
    let rec = sh.record(seq, t_us, sent, m, a);
    drop(permit);
    sh.emit(rec);
    sh.live.req.in_flight.fetch_sub(1, Relaxed);
}

/// Give the calling thread real-time (`SCHED_FIFO`, priority 10) scheduling, so that on a
/// busy machine it runs as soon as its sleep ends. Needs root or `CAP_SYS_NICE`. The CLI
/// calls it for its runtime workers too (`--realtime`); the kernel's RT throttling still
/// leaves 5 % of each second to ordinary processes.
pub fn set_realtime() -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        let param = libc::sched_param { sched_priority: 10 };
        // SAFETY: pid 0 is the calling thread; `param` is a valid, initialised struct.
        let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }
    #[cfg(not(target_os = "linux"))]
    Err(std::io::Error::other(
        "--realtime is only supported on Linux",
    ))
}

/// The scheduler thread: dispatches every request of the schedule at its time.
fn schedule_thread(
    sh: Arc<Shared>,
    schedule: crate::plan::Schedule,
    seed: u64,
    mix: crate::config::Mix,
    handle: tokio::runtime::Handle,
    tracker: TaskTracker,
) -> Histogram<u64> {
    // The default 50 µs timer slack would be a quarter of the gap between requests at 5,000/s.
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_TIMERSLACK only changes this thread's timer slack; no pointers involved.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut lag = Histogram::<u64>::new(3).expect("valid sigfig");
    for (seq, off) in schedule {
        let due = sh.start + off;
        let now = loop {
            if sh.cancel.is_cancelled() {
                return lag;
            }
            let now = Instant::now();
            if now >= due {
                break now;
            }
            // Short sleeps keep cancellation responsive during slow plans.
            std::thread::sleep((due - now).min(Duration::from_millis(50)));
        };
        crate::summary::put(&mut lag, (now - due).as_micros() as u64);
        let t_us = sh.start_us + off.as_micros() as i64;
        let m = mix.pick(rng.random::<f64>());
        sh.live.req.scheduled.fetch_add(1, Relaxed);
        if sh.live.req.in_flight.load(Relaxed) >= sh.max_in_flight {
            sh.emit(sh.unsent(seq, t_us, m, ErrorKind::Dropped));
            continue;
        }
        sh.live.req.in_flight.fetch_add(1, Relaxed);
        tracker.spawn_on(scheduled(sh.clone(), seq, due, t_us, m), &handle);
    }
    lag
}

/// The collector: every record goes to the sink and the summary, and updates the live counters.
///
/// It polls the channel (draining everything, then napping 2 ms) instead of blocking on it:
/// a blocked receiver makes every send a futex wake-up, which at tens of thousands of requests
/// per second costs more than the request itself.
fn collect(
    mut rx: mpsc::UnboundedReceiver<Batch>,
    mut sink: Box<dyn RecordSink>,
    mut builder: SummaryBuilder,
    live: Arc<Live>,
) -> (SummaryBuilder, std::io::Result<()>) {
    let mut io_result = Ok(());
    loop {
        let mut got = false;
        let closed = loop {
            match rx.try_recv() {
                Ok(b) => {
                    got = true;
                    let rs: &[Record] = match &b {
                        Batch::One(r) => std::slice::from_ref(r),
                        Batch::Many(v) => v,
                    };
                    // Counted locally, published once per batch.
                    let (mut classes, mut errors) = ([0u64; 6], [0u64; 7]);
                    for r in rs {
                        builder.add(r);
                        classes[r.class()] += 1;
                        if let Some(e) = r.error {
                            errors[e.index()] += 1;
                        }
                        if io_result.is_ok() {
                            io_result = sink.record(r);
                        }
                    }
                    for (a, n) in live.fin.classes.iter().zip(classes) {
                        if n > 0 {
                            a.fetch_add(n, Relaxed);
                        }
                    }
                    for (a, n) in live.fin.errors.iter().zip(errors) {
                        if n > 0 {
                            a.fetch_add(n, Relaxed);
                        }
                    }
                    // After the records: a reader of `done` then sees their classes too.
                    live.fin.done.fetch_add(rs.len() as u64, Relaxed);
                }
                Err(mpsc::error::TryRecvError::Empty) => break false,
                Err(mpsc::error::TryRecvError::Disconnected) => break true,
            }
        };
        // Caught up: flush so an interrupted run still leaves every finished request on disk.
        if got && io_result.is_ok() {
            io_result = sink.flush();
        }
        if closed {
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    if io_result.is_ok() {
        io_result = sink.flush();
    }
    (builder, io_result)
}

impl LoadConfig {
    /// The header line this config writes, with the given start time.
    pub fn header(&self, start_us: i64) -> Header {
        Header {
            schema: SCHEMA.to_string(),
            target: self.target.url.clone(),
            plan: self.plan.to_string(),
            start_us,
            seed: self.seed,
            connections: if self.keepalive { self.connections } else { 0 },
            header_capture: self.header_capture.as_ref().map(|h| h.to_string()),
        }
    }
}

/// Run the load described by `cfg`, writing one record per request to `output`, updating
/// `live` as requests finish, until the schedule ends or `cancel` fires. Every scheduled
/// request yields exactly one record (late and dropped ones included). Must be called inside
/// a tokio runtime (multi-thread recommended).
pub async fn run_load(
    cfg: &LoadConfig,
    output: Output,
    live: Arc<Live>,
    cancel: CancellationToken,
) -> anyhow::Result<Summary> {
    cfg.validate()?;
    let addr = cfg.target.resolve(cfg.allow_remote).await?;
    let uri: Uri = cfg
        .target
        .path
        .parse()
        .with_context(|| format!("target {}: bad path", cfg.target.url))?;
    let host = HeaderValue::from_str(&cfg.target.authority)
        .with_context(|| format!("target {}: bad host", cfg.target.url))?;
    let mut body_rng = ChaCha8Rng::seed_from_u64(cfg.seed ^ 0xB0D1);
    let body: Bytes = (0..cfg.body_size)
        .map(|_| b'a' + (body_rng.random::<u8>() % 26))
        .collect::<Vec<u8>>()
        .into();
    let methods = cfg
        .mix
        .methods
        .iter()
        .map(|(m, _)| {
            let bodyless = matches!(
                *m,
                Method::GET | Method::HEAD | Method::DELETE | Method::OPTIONS | Method::TRACE
            );
            (
                m.clone(),
                if bodyless { Bytes::new() } else { body.clone() },
                method_name(m),
            )
        })
        .collect();
    let mut template = HeaderMap::with_capacity(cfg.headers.len() + 3);
    template.insert(hyper::header::HOST, host);
    template.insert(
        hyper::header::USER_AGENT,
        HeaderValue::from_static("resolvelab-load/0.1"),
    );
    if !cfg.keepalive {
        template.insert(hyper::header::CONNECTION, HeaderValue::from_static("close"));
    }
    for (n, v) in &cfg.headers {
        template.append(n.clone(), v.clone());
    }

    let start = Instant::now();
    let start_us = resolvelab_core::time::now_us();
    let sink: Box<dyn RecordSink> = match output {
        Output::None => Box::new(NullSink),
        Output::File(p) => Box::new(JsonlSink::create(&p, &cfg.header(start_us))?),
        Output::Stdout => Box::new(JsonlSink::new(std::io::stdout(), &cfg.header(start_us))?),
        Output::Sink(s) => s,
    };
    let (tx, rx) = mpsc::unbounded_channel();
    let mut builder = SummaryBuilder::new(start_us, cfg.plan.is_open_loop());
    builder.header_name(cfg.header_capture.as_ref().map(|h| h.to_string()));
    let live2 = live.clone();
    let collector = tokio::task::spawn_blocking(move || collect(rx, sink, builder, live2));

    let sh = Arc::new(Shared {
        addr,
        uri,
        methods,
        template,
        capture: cfg.header_capture.clone(),
        keepalive: cfg.keepalive,
        timeout: cfg.timeout,
        max_in_flight: cfg.max_in_flight,
        cancel: cancel.clone(),
        tx,
        live,
        next_conn: AtomicU64::new(1),
        start,
        start_us,
        idle: Mutex::new(Vec::new()),
        permits: Arc::new(Semaphore::new(cfg.connections)),
    });
    let tracker = TaskTracker::new();
    let mut dispatch_lag = None;
    match &cfg.plan {
        RatePlan::Stages(_) => {
            let schedule = cfg
                .plan
                .schedule(cfg.duration, cfg.requests)
                .expect("open-loop plans have a schedule");
            let (sh2, tr2, mix, seed) = (sh.clone(), tracker.clone(), cfg.mix.clone(), cfg.seed);
            let handle = tokio::runtime::Handle::current();
            // Its own thread (not the blocking pool) so its timer slack dies with it.
            let (done_tx, done_rx) = tokio::sync::oneshot::channel();
            let realtime = cfg.realtime;
            std::thread::Builder::new()
                .name("load-scheduler".into())
                .spawn(move || {
                    if realtime && let Err(e) = set_realtime() {
                        let _ = done_tx.send(Err(e));
                        return;
                    }
                    let lag = schedule_thread(sh2, schedule, seed, mix, handle, tr2);
                    let _ = done_tx.send(Ok(lag));
                })
                .context("cannot start the scheduler thread")?;
            let lag = done_rx
                .await
                .context("the scheduler thread failed")?
                .map_err(|e| {
                    anyhow::anyhow!(
                        "--realtime: cannot switch the scheduler to SCHED_FIFO ({e}); run as root or grant CAP_SYS_NICE"
                    )
                })?;
            dispatch_lag = Some(Percentiles::of(&lag));
        }
        RatePlan::Max => crate::closed::run(sh.clone(), cfg).await?,
    }
    tracker.close();
    tracker.wait().await;
    // Dropping the last sender ends the collector.
    drop(sh);
    let (mut builder, io) = collector.await.context("the collector thread failed")?;
    io.context("cannot write the load results")?;
    if let Some(l) = dispatch_lag {
        builder.dispatch_lag(l);
    }
    Ok(builder.finish())
}
