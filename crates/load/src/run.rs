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
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Method, Request, Uri};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
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
    req: Padded<ReqCounters>,
    fin: Padded<DoneCounters>,
}

#[derive(Debug, Default)]
#[repr(align(64))]
struct Padded<T>(T);

impl<T> std::ops::Deref for Padded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

#[derive(Debug, Default)]
struct ReqCounters {
    scheduled: AtomicU64,
    sent: AtomicU64,
    in_flight: AtomicUsize,
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

/// State shared by the scheduler and the request tasks.
struct Shared {
    addr: SocketAddr,
    uri: Uri,
    host: HeaderValue,
    methods: Vec<(Method, Bytes)>,
    headers: Vec<(HeaderName, HeaderValue)>,
    capture: Option<HeaderName>,
    keepalive: bool,
    timeout: Duration,
    max_in_flight: usize,
    cancel: CancellationToken,
    tx: mpsc::UnboundedSender<Record>,
    live: Arc<Live>,
    next_conn: AtomicU64,
    start: Instant,
    start_us: i64,
    idle: Mutex<Vec<Conn>>,
    permits: Arc<Semaphore>,
}

/// The result of one attempt.
struct Attempt {
    res: Result<Outcome, ErrorKind>,
    conn: Option<u64>,
    keep: Option<Conn>,
}

impl Shared {
    fn now_us(&self) -> i64 {
        // One monotonic base for every timestamp of the run: wall-clock steps cannot bend it.
        self.start_us + self.start.elapsed().as_micros() as i64
    }

    fn request(&self, m: usize) -> Request<Full<Bytes>> {
        let (method, body) = &self.methods[m];
        let mut b = Request::builder()
            .method(method.clone())
            .uri(self.uri.clone())
            .header(hyper::header::HOST, self.host.clone())
            .header(hyper::header::USER_AGENT, "resolvelab-load/0.1");
        if !self.keepalive {
            b = b.header(hyper::header::CONNECTION, "close");
        }
        for (n, v) in &self.headers {
            b = b.header(n, v);
        }
        b.body(Full::new(body.clone()))
            .expect("request parts were validated when the config was built")
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
            let work = async {
                let reused = conn.and_then(|mut c| c.usable().then_some(c));
                let mut c = match reused {
                    Some(c) => c,
                    None => Conn::open(self.addr, self.next_conn.fetch_add(1, Relaxed)).await?,
                };
                conn_id = Some(c.id);
                let out = c.exchange(self.request(m), self.capture.as_ref()).await?;
                if out.reusable && self.keepalive {
                    keep = Some(c);
                }
                Ok(out)
            };
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
        let _ = self.tx.send(r);
    }

    fn record(&self, seq: u64, t_us: i64, sent_us: i64, m: usize, a: &Attempt) -> Record {
        let done = self.now_us();
        let (status, bytes, header, error) = match &a.res {
            Ok(o) => (Some(o.status), o.bytes, o.header.clone(), None),
            Err(e) => (None, 0, None, Some(*e)),
        };
        Record {
            t_us,
            sent_us: Some(sent_us),
            latency_us: Some(done - t_us),
            uncorrected_us: Some(done - sent_us),
            status,
            bytes,
            error,
            conn: a.conn,
            method: self.methods[m].0.to_string(),
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
            method: self.methods[m].0.to_string(),
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
    let a = sh.attempt(conn, m, cancelled.as_mut()).await;
    let rec = sh.record(seq, t_us, sent, m, &a);
    if let Some(c) = a.keep {
        sh.idle.lock().unwrap_or_else(|p| p.into_inner()).push(c);
    }
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

/// A closed-loop worker for `--rate max`: one request after the other on its own connection.
async fn max_worker(
    sh: Arc<Shared>,
    next_seq: Arc<AtomicU64>,
    limit: u64,
    end: Option<Instant>,
    mut rng: ChaCha8Rng,
    mix: crate::config::Mix,
) {
    let mut conn: Option<Conn> = None;
    let token = sh.cancel.clone();
    let cancelled = token.cancelled();
    tokio::pin!(cancelled);
    loop {
        if sh.cancel.is_cancelled() || end.is_some_and(|e| Instant::now() >= e) {
            return;
        }
        let seq = next_seq.fetch_add(1, Relaxed);
        if seq >= limit {
            return;
        }
        let m = mix.pick(rng.random::<f64>());
        sh.live.req.scheduled.fetch_add(1, Relaxed);
        sh.live.req.in_flight.fetch_add(1, Relaxed);
        let sent = sh.now_us();
        sh.live.req.sent.fetch_add(1, Relaxed);
        let a = sh.attempt(conn.take(), m, cancelled.as_mut()).await;
        // Closed loop: the request is "scheduled" when it is sent.
        let rec = sh.record(seq, sent, sent, m, &a);
        conn = a.keep;
        sh.emit(rec);
        sh.live.req.in_flight.fetch_sub(1, Relaxed);
    }
}

/// The collector: every record goes to the sink and the summary, and updates the live counters.
///
/// It polls the channel (draining everything, then napping 2 ms) instead of blocking on it:
/// a blocked receiver makes every send a futex wake-up, which at tens of thousands of requests
/// per second costs more than the request itself.
fn collect(
    mut rx: mpsc::UnboundedReceiver<Record>,
    mut sink: Box<dyn RecordSink>,
    mut builder: SummaryBuilder,
    live: Arc<Live>,
) -> (SummaryBuilder, std::io::Result<()>) {
    let mut io_result = Ok(());
    loop {
        let mut got = false;
        let closed = loop {
            match rx.try_recv() {
                Ok(r) => {
                    got = true;
                    builder.add(&r);
                    live.fin.classes[r.class()].fetch_add(1, Relaxed);
                    if let Some(e) = r.error {
                        live.fin.errors[e.index()].fetch_add(1, Relaxed);
                    }
                    live.fin.done.fetch_add(1, Relaxed);
                    if io_result.is_ok() {
                        io_result = sink.record(&r);
                    }
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
            )
        })
        .collect();

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
        host,
        methods,
        headers: cfg.headers.clone(),
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
        RatePlan::Max => {
            let next = Arc::new(AtomicU64::new(0));
            let end = cfg.duration.map(|d| start + d);
            let limit = cfg.requests.unwrap_or(u64::MAX);
            let mut seeder = ChaCha8Rng::seed_from_u64(cfg.seed);
            for _ in 0..cfg.connections {
                let rng = ChaCha8Rng::seed_from_u64(seeder.random::<u64>());
                tracker.spawn(max_worker(
                    sh.clone(),
                    next.clone(),
                    limit,
                    end,
                    rng,
                    cfg.mix.clone(),
                ));
            }
        }
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
