//! `--rate max`: closed-loop workers, one thread per runtime worker, no scheduler in the
//! request path.
//!
//! Why its own threads: on a multi-thread runtime every request of a closed loop pays for
//! work stealing, cross-thread wake-ups and a timer entry, which at tens of thousands of
//! requests per second is more CPU than hyper's HTTP/1 machinery itself — and every
//! microsecond the generator spends is taken from the server it measures. Here each thread runs
//! a current-thread runtime whose one future polls its share of the connections
//! (`FuturesUnordered`: only the connections that were woken are polled). A request's wake-ups
//! never leave the thread, and those a connection gives itself are absorbed by [`Settle`]
//! instead of costing an event-loop turn. The per-request bookkeeping is batched: records go
//! to the collector in chunks, the live counters are published per chunk, and `--timeout` and
//! cancellation are enforced by one watchdog per thread that ticks every few milliseconds,
//! instead of a timer entry and a cancellation waiter per request.

use crate::config::{LoadConfig, Mix};
use crate::record::{ErrorKind, Record};
use crate::run::Shared;
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use futures_util::task::AtomicWaker;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::cell::{Cell, RefCell};
use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed, Ordering::SeqCst};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How often the watchdog looks at deadlines and cancellation and hands records over: the
/// bound on how late a timeout or a Ctrl-C is noticed, and on how stale the progress line is.
const TICK: Duration = Duration::from_millis(5);

/// Records per chunk at most, so a watchdog held up by a busy thread cannot let a chunk grow
/// without bound.
const BATCH: usize = 1024;

/// Run the closed loop: `cfg.connections` workers spread over as many threads as the calling
/// runtime has workers (a current-thread runtime: one). Returns when every worker has ended
/// (`--requests` reached, `--duration` over, or `sh.cancel` fired).
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
    // The same per-connection seeds as before threads were introduced: the method sequence of
    // connection k depends only on --seed and k.
    let mut seeder = ChaCha8Rng::seed_from_u64(cfg.seed);
    let seeds: Vec<u64> = (0..cfg.connections).map(|_| seeder.random()).collect();
    // A child token: if a thread cannot be started, the ones already running are stopped
    // without cancelling the caller's token.
    let stop = sh.cancel.child_token();
    let mut done = Vec::with_capacity(threads);
    let mut spawn_error = None;
    for t in 0..threads {
        let mine: Vec<u64> = seeds.iter().skip(t).step_by(threads).copied().collect();
        let (tx, rx) = tokio::sync::oneshot::channel();
        let (sh, next_seq, mix, stop2) =
            (sh.clone(), next_seq.clone(), cfg.mix.clone(), stop.clone());
        let spawned = std::thread::Builder::new()
            .name(format!("load-max-{t}"))
            .spawn(move || {
                let res = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map(|rt| {
                        let w = Workers {
                            sh: &sh,
                            next_seq: &next_seq,
                            limit,
                            end_us,
                            mix: &mix,
                            stop: &stop2,
                        };
                        rt.block_on(w.thread_main(mine));
                    });
                let _ = tx.send(res);
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
            Ok(Err(e)) => {
                anyhow::Error::new(e).context("cannot start the runtime of a load thread")
            }
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

/// What every worker of a thread shares, by reference (the thread owns it all).
struct Workers<'a> {
    sh: &'a Shared,
    next_seq: &'a AtomicU64,
    limit: u64,
    end_us: Option<i64>,
    mix: &'a Mix,
    stop: &'a CancellationToken,
}

/// Polls its future again, right away, while the future wakes itself during its own poll.
///
/// A hyper connection driven by the task that uses it wakes that task at every step of a
/// request (the request is queued for the connection, the response is handed back): each of
/// those wake-ups would otherwise go through `FuturesUnordered`, which yields to the runtime
/// after two of them — one `epoll_wait` per request. Absorbing them here turns a request into
/// one poll that sends and one poll that reads the response.
struct Settle<F> {
    inner: Pin<Box<F>>,
    state: Arc<SelfWake>,
    /// A waker of `state`, built once: hyper sees the same waker on every poll and never
    /// needs to replace the one it stored.
    waker: Waker,
}

struct SelfWake {
    /// The inner future is being polled: a wake-up now only means "poll again".
    polling: AtomicBool,
    woken: AtomicBool,
    outer: AtomicWaker,
}

impl Wake for SelfWake {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        if self.polling.load(SeqCst) {
            self.woken.store(true, SeqCst);
        } else {
            self.outer.wake();
        }
    }
}

impl<F: Future> Settle<F> {
    fn new(inner: F) -> Self {
        let state = Arc::new(SelfWake {
            polling: AtomicBool::new(false),
            woken: AtomicBool::new(false),
            outer: AtomicWaker::new(),
        });
        Settle {
            inner: Box::pin(inner),
            waker: Waker::from(state.clone()),
            state,
        }
    }
}

impl<F: Future> Future for Settle<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // Settle is Unpin (the inner future is boxed).
        let this = self.get_mut();
        this.state.outer.register(cx.waker());
        let mut inner_cx = Context::from_waker(&this.waker);
        // Bounded, so a future that always wakes itself cannot hold the thread.
        for _ in 0..16 {
            this.state.polling.store(true, SeqCst);
            this.state.woken.store(false, SeqCst);
            let r = this.inner.as_mut().poll(&mut inner_cx);
            this.state.polling.store(false, SeqCst);
            if r.is_ready() {
                return r;
            }
            // A wake-up between the poll and clearing `polling` was absorbed: poll again.
            if !this.state.woken.swap(false, SeqCst) {
                return Poll::Pending;
            }
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// Per-thread state. Single-threaded by construction, hence `Cell`s and no atomics.
struct Ctl {
    /// The run was cancelled: in-flight requests end as `other`, no new ones start.
    cancelled: Cell<bool>,
    /// Finished records not yet handed to the collector.
    batch: RefCell<Vec<Record>>,
    /// Requests started since the live counters were last published.
    started: Cell<u64>,
    /// Requests outstanding on this thread, and the value last added to the live counter.
    in_flight: Cell<usize>,
    published_in_flight: Cell<usize>,
    /// Workers still running; the watchdog ends when this reaches 0.
    alive: Cell<usize>,
    watchdog: RefCell<Option<Waker>>,
    slots: Vec<Slot>,
}

/// A worker's deadline, as the watchdog sees it.
struct Slot {
    /// `--timeout` deadline of the request in flight (`i64::MAX` when none).
    deadline_us: Cell<i64>,
    /// The watchdog found the deadline passed.
    expired: Cell<bool>,
    waker: RefCell<Option<Waker>>,
}

/// Keep `slot` holding a waker for the current task (a clone only when the task changed).
fn register(slot: &RefCell<Option<Waker>>, w: &Waker) {
    let mut s = slot.borrow_mut();
    if !s.as_ref().is_some_and(|old| old.will_wake(w)) {
        *s = Some(w.clone());
    }
}

fn wake(slot: &RefCell<Option<Waker>>) {
    if let Some(w) = slot.borrow().as_ref() {
        w.wake_by_ref();
    }
}

impl Ctl {
    fn push(&self, r: Record, sh: &Shared) {
        let full = {
            let mut b = self.batch.borrow_mut();
            b.push(r);
            b.len() >= BATCH
        };
        if full {
            self.flush(sh);
        }
    }

    /// Publish the live counters and hand the finished records to the collector (counters
    /// first, so `sent` never trails `done`).
    fn flush(&self, sh: &Shared) {
        let started = self.started.replace(0);
        if started > 0 {
            sh.live.req.scheduled.fetch_add(started, Relaxed);
            sh.live.req.sent.fetch_add(started, Relaxed);
        }
        let now = self.in_flight.get();
        let before = self.published_in_flight.replace(now);
        if now > before {
            sh.live.req.in_flight.fetch_add(now - before, Relaxed);
        } else if now < before {
            sh.live.req.in_flight.fetch_sub(before - now, Relaxed);
        }
        if !self.batch.borrow().is_empty() {
            let b = std::mem::replace(&mut *self.batch.borrow_mut(), Vec::with_capacity(BATCH));
            sh.emit_many(b);
        }
    }
}

impl Workers<'_> {
    /// One thread: its workers and its watchdog, polled by one future.
    async fn thread_main(self, seeds: Vec<u64>) {
        let ctl = Ctl {
            cancelled: Cell::new(false),
            batch: RefCell::new(Vec::with_capacity(BATCH)),
            started: Cell::new(0),
            in_flight: Cell::new(0),
            published_in_flight: Cell::new(0),
            alive: Cell::new(seeds.len()),
            watchdog: RefCell::new(None),
            slots: seeds
                .iter()
                .map(|_| Slot {
                    deadline_us: Cell::new(i64::MAX),
                    expired: Cell::new(false),
                    waker: RefCell::new(None),
                })
                .collect(),
        };
        let mut all: FuturesUnordered<Pin<Box<dyn Future<Output = ()> + '_>>> =
            FuturesUnordered::new();
        for (i, seed) in seeds.into_iter().enumerate() {
            all.push(Box::pin(Settle::new(self.worker(&ctl, i, seed))));
        }
        // In the same set: polled only when its own timer (or the last worker) wakes it.
        all.push(Box::pin(self.watchdog(&ctl)));
        // No cooperative budget: the set already yields to the runtime after polling as many
        // futures as it holds, and a budget exhausted mid-way would force an extra yield (an
        // extra epoll_wait) every few dozen requests.
        tokio::task::coop::unconstrained(async { while all.next().await.is_some() {} }).await;
        ctl.flush(self.sh);
    }

    /// One connection's closed loop: send, wait for the whole response, record, repeat.
    async fn worker(&self, ctl: &Ctl, i: usize, seed: u64) {
        let sh = self.sh;
        let slot = &ctl.slots[i];
        let timeout_us = i64::try_from(sh.timeout.as_micros()).unwrap_or(i64::MAX);
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut conn = None;
        loop {
            // Read right before the send: the closed loop's "scheduled" and sent time.
            let sent = sh.now_us();
            if ctl.cancelled.get() || self.end_us.is_some_and(|e| sent >= e) {
                break;
            }
            let seq = self.next_seq.fetch_add(1, Relaxed);
            if seq >= self.limit {
                break;
            }
            let m = self.mix.pick(rng.random::<f64>());
            ctl.started.set(ctl.started.get() + 1);
            ctl.in_flight.set(ctl.in_flight.get() + 1);
            slot.expired.set(false);
            slot.deadline_us.set(sent.saturating_add(timeout_us));
            let (mut conn_id, mut keep) = (None, None);
            let res = {
                let work = sh.exchange_on(conn.take(), m, &mut conn_id, &mut keep);
                tokio::pin!(work);
                let guard = poll_fn(|cx| {
                    if ctl.cancelled.get() {
                        Poll::Ready(ErrorKind::Other)
                    } else if slot.expired.get() {
                        Poll::Ready(ErrorKind::Timeout)
                    } else {
                        register(&slot.waker, cx.waker());
                        Poll::Pending
                    }
                });
                tokio::select! {
                    biased;
                    r = &mut work => r,
                    e = guard => Err(e),
                }
            };
            slot.deadline_us.set(i64::MAX);
            let done = sh.now_us();
            conn = keep;
            ctl.push(sh.finished(seq, sent, sent, done, m, res, conn_id), sh);
            ctl.in_flight.set(ctl.in_flight.get() - 1);
        }
        ctl.alive.set(ctl.alive.get() - 1);
        if ctl.alive.get() == 0 {
            wake(&ctl.watchdog);
        }
    }

    /// Every TICK: notice cancellation, expire requests past `--timeout`, hand records over.
    async fn watchdog(&self, ctl: &Ctl) {
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let all_done = poll_fn(|cx| {
            if ctl.alive.get() == 0 {
                Poll::Ready(())
            } else {
                register(&ctl.watchdog, cx.waker());
                Poll::Pending
            }
        });
        tokio::pin!(all_done);
        loop {
            tokio::select! {
                biased;
                () = &mut all_done => return,
                _ = tick.tick() => {}
            }
            if !ctl.cancelled.get() && self.stop.is_cancelled() {
                ctl.cancelled.set(true);
                ctl.slots.iter().for_each(|s| wake(&s.waker));
            }
            let now = self.sh.now_us();
            for s in &ctl.slots {
                if !s.expired.get() && now >= s.deadline_us.get() {
                    s.expired.set(true);
                    wake(&s.waker);
                }
            }
            ctl.flush(self.sh);
        }
    }
}
