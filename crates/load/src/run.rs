//! The load run: what every request shares ([`Shared`]: target, request template, the
//! connect-and-exchange step, the record), the engines that send requests (`open` for rate
//! plans, `closed` for `--rate max`), and a collector thread that writes records and builds
//! the summary.

use crate::client::{Conn, Outcome, Sent};
use crate::config::LoadConfig;
use crate::plan::RatePlan;
use crate::record::{ErrorKind, Header, JsonlSink, NullSink, Record, RecordSink, SCHEMA};
use crate::summary::{Classes, Percentiles, Summary, SummaryBuilder};
use anyhow::Context;
use bytes::Bytes;
use http_body_util::Full;
use hyper::HeaderMap;
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Method, Request, Uri};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::borrow::Cow;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

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
    /// `--retry-idempotent`: re-send as real clients do (see [`Shared::exchange_on`]).
    retry_idempotent: bool,
    pub(crate) timeout: Duration,
    pub(crate) max_in_flight: usize,
    pub(crate) cancel: CancellationToken,
    tx: mpsc::UnboundedSender<Batch>,
    pub(crate) live: Arc<Live>,
    next_conn: AtomicU64,
    pub(crate) start: Instant,
    pub(crate) start_us: i64,
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
pub(crate) struct Attempt {
    res: Result<Outcome, ErrorKind>,
    conn: Option<u64>,
    /// Sent again on a new connection after a reused one was lost (`--retry-idempotent`).
    retried: bool,
    pub(crate) keep: Option<Conn>,
}

/// Methods a client re-sends on its own after a reused connection closed before a response:
/// Go's `isReplayable` (GET, HEAD, OPTIONS, TRACE), as browsers and curl do for them.
fn replayable(m: &Method) -> bool {
    matches!(
        *m,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE
    )
}

impl Shared {
    pub(crate) fn now_us(&self) -> i64 {
        // One monotonic base for every timestamp of the run: wall-clock steps cannot bend it.
        self.start_us + self.start.elapsed().as_micros() as i64
    }

    /// A request of method `m`, its headers written into `spare` (a cleared map of an earlier
    /// response on the same connection) when there is one.
    fn request(&self, m: usize, spare: Option<HeaderMap>) -> Request<Full<Bytes>> {
        let (method, body, _) = &self.methods[m];
        // Room for a typical response's headers too: hyper parses the response into this map.
        let mut headers = spare.unwrap_or_else(|| HeaderMap::with_capacity(12));
        for (n, v) in &self.template {
            headers.append(n.clone(), v.clone());
        }
        let mut req = Request::new(Full::new(body.clone()));
        *req.method_mut() = method.clone();
        *req.uri_mut() = self.uri.clone();
        *req.headers_mut() = headers;
        req
    }

    /// The address every connection goes to.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A new connection id (unique within the run).
    pub(crate) fn next_conn_id(&self) -> u64 {
        self.next_conn.fetch_add(1, Relaxed)
    }

    /// The response header whose value each record keeps (`--header-capture`).
    pub(crate) fn capture(&self) -> Option<&HeaderName> {
        self.capture.as_ref()
    }

    /// How many methods the mix has (indexes of [`Self::method`]).
    pub(crate) fn method_count(&self) -> usize {
        self.methods.len()
    }

    /// Method `m` of the mix.
    pub(crate) fn method(&self, m: usize) -> &Method {
        &self.methods[m].0
    }

    /// The bytes of a request of method `m` as HTTP/1.1 puts them on the wire: the same
    /// request line, headers and body that [`Self::request`] gives hyper, with the
    /// `Content-Length` hyper would add.
    pub(crate) fn request_bytes(&self, m: usize) -> Vec<u8> {
        let (method, body, _) = &self.methods[m];
        let path = self.uri.path_and_query().map_or("/", |p| p.as_str());
        let mut out = Vec::with_capacity(256 + body.len());
        out.extend_from_slice(format!("{method} {path} HTTP/1.1\r\n").as_bytes());
        for (n, v) in &self.template {
            out.extend_from_slice(n.as_str().as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(v.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        if !body.is_empty() || matches!(*method, Method::POST | Method::PUT | Method::PATCH) {
            out.extend_from_slice(format!("content-length: {}\r\n", body.len()).as_bytes());
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(body);
        out
    }

    /// Connect (or reuse `conn` if it is still open) and exchange one request. `conn_id` is
    /// set as soon as a connection is in use and `keep` receives it back if it may be reused,
    /// so a caller that abandons this future (timeout, cancel) still knows which one it was.
    ///
    /// With `--retry-idempotent`, a replayable request written on a *reused* connection that
    /// then closed or reset before any response byte is sent once more on a new connection
    /// (`retried`), as browsers, curl (`Curl_retry_request`) and Go's client
    /// (`shouldRetryRequest`) do; without it that is the request's error, as it always was.
    async fn exchange_on(
        &self,
        conn: Option<Conn>,
        m: usize,
        conn_id: &mut Option<u64>,
        keep: &mut Option<Conn>,
        retried: &mut bool,
    ) -> Result<Outcome, ErrorKind> {
        let (mut c, mut reused) = match conn.filter(Conn::is_open) {
            Some(c) => (c, true),
            None => (self.connect().await?, false),
        };
        let mut req = self.request(m, c.take_headers());
        // hyper hands a request back unsent when the connection was not ready for it yet
        // (wait until it is) or had closed before writing it (use a new one). Bounded: a
        // connection that keeps refusing is an error, not a loop.
        for _ in 0..3 {
            *conn_id = Some(c.id);
            match c.exchange(req, self.capture.as_ref()).await {
                Sent::Done(res) => {
                    let out = res?;
                    if out.reusable && self.keepalive {
                        *keep = Some(c);
                    }
                    return Ok(out);
                }
                Sent::Lost(kind) => {
                    let again = self.retry_idempotent
                        && reused
                        && !*retried
                        && matches!(kind, ErrorKind::Closed | ErrorKind::Reset)
                        && replayable(&self.methods[m].0);
                    if !again {
                        return Err(kind);
                    }
                    *retried = true;
                    c = self.connect().await?;
                    reused = false;
                    req = self.request(m, None);
                }
                Sent::Unsent(r) => {
                    req = *r;
                    if !(c.is_open() && c.ready().await) {
                        c = self.connect().await?;
                        reused = false;
                    }
                }
            }
        }
        Err(ErrorKind::Closed)
    }

    async fn connect(&self) -> Result<Conn, ErrorKind> {
        Conn::open(self.addr, self.next_conn_id()).await
    }

    /// Connect (or reuse `conn`), exchange, all within `--timeout`; cancellation ends it early.
    /// `cancelled` is the caller's pinned cancellation future: a worker keeps one for its whole
    /// life, so the token's waiter list is not locked once per request.
    pub(crate) async fn attempt<F: std::future::Future<Output = ()>>(
        &self,
        conn: Option<Conn>,
        m: usize,
        cancelled: std::pin::Pin<&mut F>,
    ) -> Attempt {
        let mut conn_id = None;
        let mut keep = None;
        let mut retried = false;
        let res = {
            let work = self.exchange_on(conn, m, &mut conn_id, &mut keep, &mut retried);
            tokio::select! {
                r = tokio::time::timeout(self.timeout, work) => r.unwrap_or(Err(ErrorKind::Timeout)),
                _ = cancelled => Err(ErrorKind::Other),
            }
        };
        Attempt {
            res,
            conn: conn_id,
            retried,
            keep,
        }
    }

    pub(crate) fn emit(&self, r: Record) {
        // The collector lives until every sender is gone, so this cannot fail while we run.
        let _ = self.tx.send(Batch::One(r));
    }

    /// Hand a batch of records to the collector.
    pub(crate) fn emit_many(&self, rs: Vec<Record>) {
        if !rs.is_empty() {
            let _ = self.tx.send(Batch::Many(rs));
        }
    }

    pub(crate) fn record(&self, seq: u64, t_us: i64, sent_us: i64, m: usize, a: Attempt) -> Record {
        let mut r = self.finished(seq, t_us, sent_us, self.now_us(), m, a.res, a.conn);
        r.retried = a.retried;
        r
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
            retried: false,
        }
    }

    pub(crate) fn unsent(&self, seq: u64, t_us: i64, m: usize, error: ErrorKind) -> Record {
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
            retried: false,
        }
    }
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

/// Ask the kernel for a short time slice (100 µs) for the calling thread, under the normal
/// scheduling policy (no privilege needed).
///
/// Why: a thread that wakes up to send a request on time must get a CPU now, not when the
/// process running there has used up its slice. Since Linux 6.12 the fair scheduler lets a
/// waking thread with a shorter slice than the running one preempt it at once; with the
/// default slice a waking thread on a busy machine can wait until the next tick (4 ms at
/// HZ=250), which is what bounded the schedule lag's p99 from below. Older kernels ignore
/// the request.
pub(crate) fn set_short_slice() -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        /// `struct sched_attr` as of Linux 3.14 (SCHED_ATTR_SIZE_VER0).
        #[repr(C)]
        struct SchedAttr {
            size: u32,
            sched_policy: u32,
            sched_flags: u64,
            sched_nice: i32,
            sched_priority: u32,
            sched_runtime: u64,
            sched_deadline: u64,
            sched_period: u64,
        }
        // SAFETY: plain system call on the calling thread. getpriority can return -1 as a
        // valid nice value; that is the value kept then, which is right either way.
        let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
        let attr = SchedAttr {
            size: std::mem::size_of::<SchedAttr>() as u32,
            sched_policy: libc::SCHED_OTHER as u32,
            sched_flags: 0,
            // sched_setattr sets the nice value too: keep the current one.
            sched_nice: nice,
            sched_priority: 0,
            sched_runtime: 100_000,
            sched_deadline: 0,
            sched_period: 0,
        };
        // SAFETY: tid 0 is the calling thread; `attr` is a valid sched_attr of the size it
        // declares.
        let rc = unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &attr as *const SchedAttr, 0) };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }
    #[cfg(not(target_os = "linux"))]
    Ok(())
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
            engine: None,
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
        retry_idempotent: cfg.retry_idempotent,
        timeout: cfg.timeout,
        max_in_flight: cfg.max_in_flight,
        cancel: cancel.clone(),
        tx,
        live,
        next_conn: AtomicU64::new(1),
        start,
        start_us,
    });
    let mut dispatch_lag = None;
    match &cfg.plan {
        RatePlan::Stages(_) => {
            let schedule = cfg
                .plan
                .schedule(cfg.duration, cfg.requests)
                .expect("open-loop plans have a schedule");
            let lag = crate::open::run(sh.clone(), cfg, schedule)
                .await
                .map_err(|e| match e {
                    crate::open::LaneError::Realtime(e) => anyhow::anyhow!(
                        "--realtime: cannot switch the load threads to SCHED_FIFO ({e}); run as root or grant CAP_SYS_NICE"
                    ),
                    crate::open::LaneError::Setup(e) => e,
                })?;
            dispatch_lag = Some(Percentiles::of(&lag));
        }
        RatePlan::Max => crate::closed::run(sh.clone(), cfg).await?,
    }
    // Dropping the last sender ends the collector.
    drop(sh);
    let (mut builder, io) = collector.await.context("the collector thread failed")?;
    io.context("cannot write the load results")?;
    if let Some(l) = dispatch_lag {
        builder.dispatch_lag(l);
    }
    Ok(builder.finish())
}
