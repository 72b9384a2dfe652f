//! `--rate max`: closed-loop connections on one event loop per load thread, written the way
//! wrk is: each connection is a small state machine (connect → write → read → record → write
//! the next request) driven by `epoll` (through `mio`), with the request bytes rendered once
//! and the response read by [`crate::wire`] (httparse).
//!
//! Why not hyper and tokio here, as in the open loop: a throughput test on a two-core machine
//! measures the server *and* the generator, and with hyper and a runtime the generator spent
//! 18.7 k instructions per request (wrk: 4.5 k), 14 k of them in hyper — CPU taken from the
//! server under test. Here a request costs one `write`, one `read` and a share of an
//! `epoll_wait`; no futures, wakers, header maps or channels. The per-request bookkeeping is
//! batched: records go to the collector in chunks, the live counters are published per chunk,
//! and `--timeout` and cancellation are checked every [`TICK`] by the loop itself.

use crate::client::{Outcome, io_kind};
use crate::config::{LoadConfig, Mix};
use crate::record::{ErrorKind, Record};
use crate::run::Shared;
use crate::wire::{Feed, ResponseReader};
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::io::{self, Read, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How often the loop looks at deadlines and cancellation and hands records over: the bound
/// on how late a timeout or a Ctrl-C is noticed, and on how stale the progress line is.
const TICK: Duration = Duration::from_millis(5);

/// Records per chunk at most, so a loop that never reaches a tick (a fast server) still hands
/// its records over.
const BATCH: usize = 1024;

/// Bytes read per `read` call. One buffer per thread: a connection's partial head is copied
/// into its own reader, so the buffer is free again after every call.
const READ_BUF: usize = 64 * 1024;

/// Run the closed loop: `cfg.connections` connections spread over as many threads as the
/// calling runtime has workers (a current-thread runtime: one). Returns when every connection
/// has ended (`--requests` reached, `--duration` over, or `sh.cancel` fired).
pub(crate) async fn run(sh: Arc<Shared>, cfg: &LoadConfig) -> anyhow::Result<()> {
    let threads = tokio::runtime::Handle::current()
        .metrics()
        .num_workers()
        .clamp(1, cfg.connections);
    let next_seq = Arc::new(AtomicU64::new(0));
    let limit = cfg.requests.unwrap_or(u64::MAX);
    // `now_us` is start_us + monotonic elapsed time, so this end is on the same clock.
    let end_us = cfg
        .duration
        .map(|d| sh.start_us.saturating_add(d.as_micros() as i64));
    // The method sequence of connection k depends only on --seed and k.
    let mut seeder = ChaCha8Rng::seed_from_u64(cfg.seed);
    let seeds: Vec<u64> = (0..cfg.connections).map(|_| seeder.random()).collect();
    // Each method's request, rendered once for every thread.
    let requests: Arc<[Request]> = (0..sh.method_count())
        .map(|m| Request {
            bytes: sh.request_bytes(m),
            head: *sh.method(m) == hyper::Method::HEAD,
        })
        .collect();
    // A child token: if a thread fails, the others are stopped without cancelling the
    // caller's token.
    let stop = sh.cancel.child_token();
    let mut done = Vec::with_capacity(threads);
    let mut spawn_error = None;
    for t in 0..threads {
        let mine: Vec<u64> = seeds.iter().skip(t).step_by(threads).copied().collect();
        let (tx, rx) = tokio::sync::oneshot::channel();
        let (sh, next_seq, mix, stop2, requests) = (
            sh.clone(),
            next_seq.clone(),
            cfg.mix.clone(),
            stop.clone(),
            requests.clone(),
        );
        let spawned = std::thread::Builder::new()
            .name(format!("load-max-{t}"))
            .spawn(move || {
                let shared = Common {
                    sh: &sh,
                    next_seq: &next_seq,
                    limit,
                    end_us,
                    mix: &mix,
                    stop: &stop2,
                    requests: &requests,
                };
                let _ = tx.send(EventLoop::new(shared, mine).and_then(EventLoop::run));
            });
        match spawned {
            Ok(_) => done.push(rx),
            Err(e) => {
                spawn_error = Some(e);
                stop.cancel();
                break;
            }
        }
    }
    let mut first_error = spawn_error.map(|e| anyhow::anyhow!("cannot start a load thread: {e}"));
    for rx in done {
        let res = match rx.await {
            Ok(Ok(())) => continue,
            Ok(Err(e)) => anyhow::Error::new(e).context("the event loop of a load thread failed"),
            Err(_) => anyhow::anyhow!("a load thread ended without finishing its requests"),
        };
        stop.cancel();
        first_error.get_or_insert(res);
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// What the threads share.
struct Common<'a> {
    sh: &'a Shared,
    next_seq: &'a AtomicU64,
    limit: u64,
    end_us: Option<i64>,
    mix: &'a Mix,
    stop: &'a CancellationToken,
    /// Per method of the mix.
    requests: &'a [Request],
}

/// A request as it goes on the wire, and whether its response has no body (HEAD).
struct Request {
    bytes: Vec<u8>,
    head: bool,
}

/// Where a connection's current request is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Between requests (in `ready`, or about to start).
    Ready,
    /// Waiting for the TCP handshake.
    Connecting,
    /// `written` bytes of the request are out; waiting until the socket takes more.
    Writing { written: usize },
    /// The request is out; reading the response.
    Reading,
    /// No more requests for this connection (the run is over).
    Ended,
}

/// One closed-loop connection.
struct Conn {
    rng: ChaCha8Rng,
    stream: Option<TcpStream>,
    /// Id of the connection in `stream` (or being opened), as the records name it.
    id: u64,
    /// The TCP handshake has completed (a request that fails before is not on a connection).
    connected: bool,
    step: Step,
    seq: u64,
    sent_us: i64,
    method: usize,
    deadline_us: i64,
    reader: ResponseReader,
}

/// One thread's connections and its `epoll`.
struct EventLoop<'a> {
    c: Common<'a>,
    poll: Poll,
    conns: Vec<Conn>,
    /// Connections to start a request on at the end of this turn: those that need a new
    /// connection. Never started from inside the completion of the one before: a target
    /// refusing connections would otherwise recurse, and keep this thread from its tick.
    ready: Vec<usize>,
    buf: Box<[u8]>,
    cancelled: bool,
    alive: usize,
    batch: Vec<Record>,
    /// Requests started since the live counters were last published.
    started: u64,
    in_flight: usize,
    published_in_flight: usize,
}

impl<'a> EventLoop<'a> {
    fn new(c: Common<'a>, seeds: Vec<u64>) -> io::Result<EventLoop<'a>> {
        let sh = c.sh;
        let conns: Vec<Conn> = seeds
            .into_iter()
            .map(|seed| Conn {
                rng: ChaCha8Rng::seed_from_u64(seed),
                stream: None,
                id: 0,
                connected: false,
                step: Step::Ready,
                seq: 0,
                sent_us: 0,
                method: 0,
                deadline_us: i64::MAX,
                reader: ResponseReader::new(sh.capture().cloned()),
            })
            .collect();
        let n = conns.len();
        Ok(EventLoop {
            poll: Poll::new()?,
            ready: (0..n).collect(),
            alive: n,
            conns,
            buf: vec![0; READ_BUF].into_boxed_slice(),
            cancelled: false,
            batch: Vec::with_capacity(BATCH),
            started: 0,
            in_flight: 0,
            published_in_flight: 0,
            c,
        })
    }

    fn run(mut self) -> io::Result<()> {
        let mut events = Events::with_capacity(self.conns.len().clamp(64, 1024));
        let tick_us = TICK.as_micros() as i64;
        let mut next_tick = self.c.sh.now_us() + tick_us;
        loop {
            for i in std::mem::take(&mut self.ready) {
                self.start(i);
            }
            if self.alive == 0 {
                break;
            }
            let now = self.c.sh.now_us();
            if now >= next_tick {
                self.tick(now);
                next_tick = now + tick_us;
            }
            let wait = if self.ready.is_empty() {
                Duration::from_micros((next_tick - now).max(0) as u64)
            } else {
                Duration::ZERO
            };
            if let Err(e) = self.poll.poll(&mut events, Some(wait)) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            for ev in events.iter() {
                let i = ev.token().0;
                match self.conns[i].step {
                    Step::Connecting => self.connected(i),
                    Step::Writing { written } => self.write(i, written),
                    Step::Reading => self.read(i, ev.is_read_closed()),
                    // An event of a connection that has already moved on.
                    Step::Ready | Step::Ended => {}
                }
            }
        }
        self.flush();
        Ok(())
    }

    /// Start connection `i`'s next request, or end the connection if the run is over.
    fn start(&mut self, i: usize) {
        let now = self.c.sh.now_us();
        let over = self.cancelled || self.c.end_us.is_some_and(|e| now >= e);
        let seq = if over {
            u64::MAX
        } else {
            self.c.next_seq.fetch_add(1, Relaxed)
        };
        if over || seq >= self.c.limit {
            self.conns[i].step = Step::Ended;
            self.conns[i].stream = None;
            self.alive -= 1;
            return;
        }
        let timeout_us = i64::try_from(self.c.sh.timeout.as_micros()).unwrap_or(i64::MAX);
        let conn = &mut self.conns[i];
        conn.method = self.c.mix.pick(conn.rng.random::<f64>());
        conn.seq = seq;
        conn.sent_us = now;
        conn.deadline_us = now.saturating_add(timeout_us);
        conn.reader.reset(self.c.requests[conn.method].head);
        self.started += 1;
        self.in_flight += 1;
        if self.conns[i].stream.is_some() {
            self.write(i, 0);
        } else {
            self.connect(i);
        }
    }

    fn connect(&mut self, i: usize) {
        let id = self.c.sh.next_conn_id();
        let conn = &mut self.conns[i];
        conn.id = id;
        conn.connected = false;
        let opened = TcpStream::connect(self.c.sh.addr()).and_then(|mut s| {
            self.poll
                .registry()
                .register(&mut s, Token(i), Interest::READABLE | Interest::WRITABLE)
                .map(|()| s)
        });
        match opened {
            Ok(s) => {
                conn.stream = Some(s);
                conn.step = Step::Connecting;
            }
            Err(e) => self.finish(i, Err(io_kind(&e)), false),
        }
    }

    /// An event while connecting: the handshake ended one way or the other (or not yet).
    fn connected(&mut self, i: usize) {
        let Some(s) = self.conns[i].stream.as_ref() else {
            return;
        };
        let res = match s.take_error() {
            Ok(Some(e)) | Err(e) => Err(e),
            Ok(None) => s.peer_addr(),
        };
        match res {
            Ok(_) => {
                // Small requests must leave now, not when Nagle decides.
                let _ = s.set_nodelay(true);
                self.conns[i].connected = true;
                self.write(i, 0);
            }
            Err(e) if e.kind() == io::ErrorKind::NotConnected => {}
            Err(e) => self.finish(i, Err(io_kind(&e)), false),
        }
    }

    fn write(&mut self, i: usize, mut written: usize) {
        let req = &self.c.requests[self.conns[i].method].bytes;
        let Some(s) = self.conns[i].stream.as_mut() else {
            return;
        };
        loop {
            match s.write(&req[written..]) {
                Ok(n) => {
                    written += n;
                    if written == req.len() {
                        // The response cannot be there yet: wait for its event rather than
                        // spend a read that would only find the socket empty.
                        self.conns[i].step = Step::Reading;
                        return;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.conns[i].step = Step::Writing { written };
                    return;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return self.finish(i, Err(io_kind(&e)), false),
            }
        }
    }

    /// Read what has arrived; `peer_closed`: the event said the peer has closed its side.
    fn read(&mut self, i: usize, peer_closed: bool) {
        let conn = &mut self.conns[i];
        let Some(s) = conn.stream.as_mut() else {
            return;
        };
        loop {
            match s.read(&mut self.buf) {
                Ok(0) => {
                    let res = conn.reader.eof();
                    return self.finish(i, res, false);
                }
                Ok(n) => match conn.reader.feed(&self.buf[..n]) {
                    Ok(Feed::More) => {}
                    Ok(Feed::Done { extra }) => {
                        let out = conn.reader.outcome();
                        // A close that arrived with the response: the next request would be
                        // written into a closed connection.
                        let keep = out.reusable && !extra && !peer_closed;
                        return self.finish(i, Ok(out), keep);
                    }
                    Err(k) => return self.finish(i, Err(k), false),
                },
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return self.finish(i, Err(io_kind(&e)), false),
            }
        }
    }

    /// Record connection `i`'s request and queue its next one.
    fn finish(&mut self, i: usize, res: Result<Outcome, ErrorKind>, keep: bool) {
        let sh = self.c.sh;
        let done = sh.now_us();
        let conn = &mut self.conns[i];
        if !(keep && sh.keepalive) {
            // Closing the socket also removes it from the epoll set.
            conn.stream = None;
        }
        conn.deadline_us = i64::MAX;
        conn.step = Step::Ready;
        let id = conn.connected.then_some(conn.id);
        let r = sh.finished(
            conn.seq,
            conn.sent_us,
            conn.sent_us,
            done,
            conn.method,
            res,
            id,
        );
        let reuse = conn.stream.is_some();
        self.in_flight -= 1;
        self.batch.push(r);
        if self.batch.len() >= BATCH {
            self.flush();
        }
        if reuse {
            // The next request leaves now, as wrk's does: the server works on it while this
            // thread handles the rest of the events. (A write cannot end a request without
            // closing the connection, so this cannot recurse.)
            self.start(i);
        } else {
            self.ready.push(i);
        }
    }

    /// Every TICK: notice cancellation, expire requests past `--timeout`, hand records over.
    fn tick(&mut self, now: i64) {
        if !self.cancelled && self.c.stop.is_cancelled() {
            self.cancelled = true;
        }
        for i in 0..self.conns.len() {
            let c = &self.conns[i];
            let busy = matches!(
                c.step,
                Step::Connecting | Step::Writing { .. } | Step::Reading
            );
            if busy && self.cancelled {
                self.finish(i, Err(ErrorKind::Other), false);
            } else if busy && now >= c.deadline_us {
                self.finish(i, Err(ErrorKind::Timeout), false);
            }
        }
        self.flush();
    }

    /// Publish the live counters and hand the finished records to the collector (counters
    /// first, so `sent` never trails `done`).
    fn flush(&mut self) {
        let live = &self.c.sh.live;
        let started = std::mem::take(&mut self.started);
        if started > 0 {
            live.req.scheduled.fetch_add(started, Relaxed);
            live.req.sent.fetch_add(started, Relaxed);
        }
        let (now, before) = (self.in_flight, self.published_in_flight);
        self.published_in_flight = now;
        if now > before {
            live.req.in_flight.fetch_add(now - before, Relaxed);
        } else if now < before {
            live.req.in_flight.fetch_sub(before - now, Relaxed);
        }
        if !self.batch.is_empty() {
            let b = std::mem::replace(&mut self.batch, Vec::with_capacity(BATCH));
            self.c.sh.emit_many(b);
        }
    }
}
