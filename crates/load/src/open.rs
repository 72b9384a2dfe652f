//! Open-loop plans: each request leaves at its scheduled time, from one of a few *lanes*.
//!
//! A lane is a thread with its own current-thread runtime, its own keep-alive pool and its
//! share of the schedule (request `k` belongs to lane `k mod lanes`). The lane waits for each
//! of its requests' times on a `timerfd` registered with its own event loop, so the wake-up at
//! a request's time is the wake-up of the thread that sends it:
//!
//! * tokio's timer has millisecond resolution, which at 5,000 requests/s would release
//!   requests in bunches of five; a `timerfd` armed for the exact nanosecond does not;
//! * a separate scheduler thread that sleeps and then hands each request to a runtime worker
//!   costs two wake-ups per request (the scheduler's, then the worker's); on a busy machine
//!   each one is a chance to wait for a CPU, and the hand-off alone took 30–55 µs at the median
//!   on the benchmark machine. Here there is one wake-up, and no queue between threads.
//!
//! Lanes never share a connection: a tokio socket belongs to the event loop that registered
//! it.
//!
//! With more than one lane, every lane is also the *backup* of the others: a request whose
//! lane has not claimed it [`BACKUP_AFTER`] past its time is claimed and sent by the first
//! other lane awake ([`Claims`]: each request is claimed exactly once). A lane's wake-up is
//! late when the CPU it waits for is not running it — on a virtual machine, when the
//! hypervisor runs another guest on that vCPU, for milliseconds at a time — and those stalls
//! rarely hit two vCPUs at once. A backup costs no extra wake-up while the lanes keep time: a
//! lane looks at the other lanes' requests only when it wakes for its own, or when one of
//! theirs is overdue before its own next one. For the same reason each lane is pinned to a CPU
//! of its own (lane `k` to the `k`-th allowed CPU): two lanes the scheduler runs on one vCPU
//! stall together. On the benchmark VM the two together cut the schedule lag's p99 by
//! about three times at the same steal time (docs/bench/load.md).

use crate::client::Conn;
use crate::config::{LoadConfig, Mix};
use crate::plan::Schedule;
use crate::record::ErrorKind;
use crate::run::Shared;
use hdrhistogram::Histogram;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::VecDeque;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;
use tokio_util::task::TaskTracker;

/// How many requests a lane that has fallen behind dispatches in a row before it lets the
/// requests it started run: a backlog is sent in bursts, not all before any of it.
const BURST: u32 = 16;

/// How late a request may be before another lane sends it instead of its own: above the
/// wake-up latency of a lane whose CPU is running (p99 ~100–200 µs on the benchmark machine),
/// well below the 1 ms the schedule-lag target allows.
pub(crate) const BACKUP_AFTER: Duration = Duration::from_micros(250);

/// Which requests have been claimed by a lane, so that each is sent exactly once.
///
/// A ring of the highest sequence number (+1) claimed in each slot: claiming is a `fetch_max`.
/// A slot that holds a later request than the one asked about means the earlier one was
/// claimed too, because a lane never gets past a request without claiming it or finding it
/// claimed, and a ring holds more requests than are ever within [`BACKUP_AFTER`] of each other.
pub(crate) struct Claims {
    slots: Box<[AtomicU64]>,
}

impl Claims {
    const RING: usize = 1 << 14;

    pub(crate) fn new() -> Claims {
        Claims {
            slots: (0..Self::RING).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    fn slot(&self, seq: u64) -> &AtomicU64 {
        &self.slots[seq as usize & (Self::RING - 1)]
    }

    /// Claim request `seq`: `true` if this call got it, `false` if another lane had.
    pub(crate) fn claim(&self, seq: u64) -> bool {
        self.slot(seq).fetch_max(seq + 1, AcqRel) <= seq
    }

    /// Has request `seq` been claimed?
    pub(crate) fn is_claimed(&self, seq: u64) -> bool {
        self.slot(seq).load(Acquire) > seq
    }
}

/// A request of the schedule, as a lane holds it until it is sent or found claimed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Due {
    seq: u64,
    /// Offset from the start of the run.
    off: Duration,
    method: usize,
}

/// A lane's view of the schedule: when to wake next, and which requests to send when it does
/// (its own on time, the other lanes' once [`BACKUP_AFTER`] overdue). Times are offsets from
/// the start of the run. No clock and no I/O inside, so the hand-over can be tested exactly.
struct Picker<I> {
    schedule: I,
    /// This lane's number and the number of lanes: request `k` is lane `k mod n`'s own.
    t: u64,
    n: u64,
    /// This lane's next own request, once the schedule has been read up to it.
    mine: Option<Due>,
    /// The other lanes' requests before `mine`, not yet seen claimed, in order.
    theirs: VecDeque<Due>,
    claims: Arc<Claims>,
}

impl<I: Iterator<Item = Due>> Picker<I> {
    fn new(schedule: I, t: u64, n: u64, claims: Arc<Claims>) -> Picker<I> {
        Picker {
            schedule,
            t,
            n,
            mine: None,
            theirs: VecDeque::new(),
            claims,
        }
    }

    /// When the lane must wake next: its next own request's time, or earlier if one of the
    /// other lanes' would be overdue before that. `None`: nothing left for this lane.
    fn next_wake(&mut self) -> Option<Duration> {
        if self.mine.is_none() {
            self.mine = loop {
                match self.schedule.next() {
                    Some(r) if r.seq % self.n == self.t => break Some(r),
                    Some(r) => self.theirs.push_back(r),
                    None => break None,
                }
            };
        }
        while self
            .theirs
            .front()
            .is_some_and(|r| self.claims.is_claimed(r.seq))
        {
            self.theirs.pop_front();
        }
        let backup = self.theirs.front().map(|r| r.off + BACKUP_AFTER);
        match (self.mine.map(|r| r.off), backup) {
            (Some(m), Some(b)) => Some(m.min(b)),
            (m, b) => m.or(b),
        }
    }

    /// The requests this lane sends at `now`, claimed, oldest first, appended to `out`.
    fn due_at(&mut self, now: Duration, out: &mut Vec<Due>) {
        while let Some(r) = self.theirs.front().copied() {
            let claimed = self.claims.is_claimed(r.seq);
            if !claimed && r.off + BACKUP_AFTER > now {
                break;
            }
            self.theirs.pop_front();
            if !claimed && self.claims.claim(r.seq) {
                out.push(r);
            }
        }
        if let Some(r) = self.mine.filter(|r| r.off <= now) {
            self.mine = None;
            // Claimed already when another lane covered for this one.
            if self.claims.claim(r.seq) {
                out.push(r);
            }
        }
    }
}

/// One lane's keep-alive pool and its share of `--connections`.
pub(crate) struct Lane {
    idle: Mutex<Vec<Conn>>,
    permits: Arc<Semaphore>,
}

/// How many lanes a run uses: `lanes`, else one per worker of the calling runtime, but never
/// more than there are keep-alive connections to share out.
fn lanes(cfg: &LoadConfig) -> usize {
    let workers = cfg
        .lanes
        .unwrap_or_else(|| tokio::runtime::Handle::current().metrics().num_workers());
    if cfg.keepalive {
        workers.clamp(1, cfg.connections.max(1))
    } else {
        workers.max(1)
    }
}

/// Why a lane could not run.
pub(crate) enum LaneError {
    /// `--realtime` was asked for and `sched_setscheduler` refused.
    Realtime(std::io::Error),
    /// The thread, its runtime or its timer could not be set up.
    Setup(anyhow::Error),
}

/// Run an open-loop schedule on its lanes; returns the generator lag (dispatch − scheduled)
/// of every dispatched request.
pub(crate) async fn run(
    sh: Arc<Shared>,
    cfg: &LoadConfig,
    schedule: Schedule,
) -> Result<Histogram<u64>, LaneError> {
    let n = lanes(cfg);
    let claims = Arc::new(Claims::new());
    // A child token: if a lane fails to start, the others stop without cancelling the caller.
    let stop = sh.cancel.child_token();
    let mut done = Vec::with_capacity(n);
    let mut first_error = None;
    for t in 0..n {
        let permits = cfg.connections / n + usize::from(t < cfg.connections % n);
        let (tx, rx) = tokio::sync::oneshot::channel();
        let claims = claims.clone();
        let (sh, schedule, mix, seed, realtime, short_slice, stop2) = (
            sh.clone(),
            schedule.clone(),
            cfg.mix.clone(),
            cfg.seed,
            cfg.realtime,
            cfg.short_slice,
            stop.clone(),
        );
        let spawned = std::thread::Builder::new()
            .name(format!("load-lane-{t}"))
            .spawn(move || {
                let res = lane_thread(LaneSpec {
                    sh,
                    schedule,
                    mix,
                    seed,
                    realtime,
                    short_slice,
                    stop: stop2,
                    t: t as u64,
                    n: n as u64,
                    permits: permits.max(1),
                    claims,
                });
                let _ = tx.send(res);
            });
        match spawned {
            Ok(_) => done.push(rx),
            Err(e) => {
                first_error = Some(LaneError::Setup(anyhow::anyhow!(
                    "cannot start a load thread: {e}"
                )));
                stop.cancel();
                break;
            }
        }
    }
    let mut lag = Histogram::<u64>::new(3).expect("valid sigfig");
    for rx in done {
        let err = match rx.await {
            Ok(Ok(h)) => {
                // Same precision and bounds on both sides: adding cannot fail.
                let _ = lag.add(&h);
                continue;
            }
            Ok(Err(e)) => e,
            Err(_) => LaneError::Setup(anyhow::anyhow!(
                "a load thread ended without finishing its requests"
            )),
        };
        stop.cancel();
        first_error.get_or_insert(err);
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(lag),
    }
}

struct LaneSpec {
    sh: Arc<Shared>,
    schedule: Schedule,
    mix: Mix,
    seed: u64,
    realtime: bool,
    short_slice: bool,
    stop: tokio_util::sync::CancellationToken,
    /// This lane's number and the number of lanes.
    t: u64,
    n: u64,
    permits: usize,
    claims: Arc<Claims>,
}

fn lane_thread(spec: LaneSpec) -> Result<Histogram<u64>, LaneError> {
    if spec.n > 1 {
        // Each lane on its own CPU, so that a backup lane is not stalled with the lane it
        // covers for (best effort: a restricted or single CPU set leaves the lanes unpinned).
        let _ = pin_to_own_cpu(spec.t as usize);
    }
    if spec.realtime {
        crate::run::set_realtime().map_err(LaneError::Realtime)?;
    } else if spec.short_slice {
        // Best effort: without it the lane still keeps time, only less well on a busy machine.
        let _ = crate::run::set_short_slice();
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            LaneError::Setup(
                anyhow::Error::new(e).context("cannot start the runtime of a load thread"),
            )
        })?;
    rt.block_on(lane_main(spec))
}

async fn lane_main(spec: LaneSpec) -> Result<Histogram<u64>, LaneError> {
    let LaneSpec {
        sh,
        schedule,
        mix,
        seed,
        stop,
        t,
        n,
        permits,
        claims,
        ..
    } = spec;
    let mut timer = timer::Timer::new().map_err(|e| {
        LaneError::Setup(anyhow::Error::new(e).context("cannot create the schedule timer"))
    })?;
    let lane = Arc::new(Lane {
        idle: Mutex::new(Vec::new()),
        permits: Arc::new(Semaphore::new(permits)),
    });
    let tracker = TaskTracker::new();
    // tokio wakes its own event loop (an eventfd write, then an extra epoll_wait) whenever a
    // timer is registered that is due before the loop's planned wake-up — with no other timer
    // pending, that is every request's --timeout timer: two system calls per request for
    // nothing. A heartbeat due sooner than any --timeout keeps a nearer timer pending.
    let schedule_over = tokio_util::sync::CancellationToken::new();
    let beat = (sh.timeout / 2).clamp(Duration::from_millis(1), Duration::from_millis(50));
    let over = schedule_over.clone();
    tracker.spawn(async move {
        let mut tick = tokio::time::interval(beat);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                biased;
                () = over.cancelled() => break,
                _ = tick.tick() => {}
            }
        }
    });
    // Every lane draws the whole method sequence and keeps its own requests' methods, so the
    // method of request k depends on --seed and k only, not on the number of lanes.
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut picker = Picker::new(
        schedule.map(|(seq, off)| Due {
            seq,
            off,
            method: mix.pick(rng.random::<f64>()),
        }),
        t,
        n,
        claims,
    );
    let mut lag = Histogram::<u64>::new(3).expect("valid sigfig");
    let cancelled = stop.cancelled();
    tokio::pin!(cancelled);
    let mut in_a_row = 0;
    let mut failure = None;
    let mut now_due = Vec::new();
    while let Some(wake) = picker.next_wake() {
        let wake = sh.start + wake;
        let now = if Instant::now() >= wake {
            in_a_row += 1;
            if in_a_row >= BURST {
                in_a_row = 0;
                tokio::task::yield_now().await;
            }
            if stop.is_cancelled() {
                break;
            }
            Instant::now()
        } else {
            in_a_row = 0;
            tokio::select! {
                biased;
                () = &mut cancelled => break,
                r = timer.until(wake) => match r {
                    Ok(now) => now,
                    Err(e) => {
                        // Stop scheduling, but let the requests already sent finish and be
                        // recorded.
                        failure = Some(LaneError::Setup(
                            anyhow::Error::new(e).context("the schedule timer failed"),
                        ));
                        break;
                    }
                },
            }
        };
        picker.due_at(now - sh.start, &mut now_due);
        for r in now_due.drain(..) {
            let due = sh.start + r.off;
            crate::summary::put(&mut lag, (now - due).as_micros() as u64);
            let t_us = sh.start_us + r.off.as_micros() as i64;
            sh.live.req.scheduled.fetch_add(1, Relaxed);
            if sh.live.req.in_flight.load(Relaxed) >= sh.max_in_flight {
                sh.emit(sh.unsent(r.seq, t_us, r.method, ErrorKind::Dropped));
                continue;
            }
            sh.live.req.in_flight.fetch_add(1, Relaxed);
            tracker.spawn(scheduled(
                sh.clone(),
                lane.clone(),
                r.seq,
                due,
                t_us,
                r.method,
            ));
        }
    }
    schedule_over.cancel();
    tracker.close();
    tracker.wait().await;
    match failure {
        Some(e) => Err(e),
        None => Ok(lag),
    }
}

/// One scheduled request: wait for a keep-alive connection if all of the lane's are busy
/// (counted as lag, `late` past the timeout), then send.
async fn scheduled(sh: Arc<Shared>, lane: Arc<Lane>, seq: u64, due: Instant, t_us: i64, m: usize) {
    let token = sh.cancel.clone();
    let cancelled = token.cancelled();
    tokio::pin!(cancelled);
    let permit = if sh.keepalive {
        let wait = tokio::time::timeout_at(
            (due + sh.timeout).into(),
            lane.permits.clone().acquire_owned(),
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
        lane.idle.lock().unwrap_or_else(|p| p.into_inner()).pop()
    } else {
        None
    };
    let sent = sh.now_us();
    sh.live.req.sent.fetch_add(1, Relaxed);
    let mut a = sh.attempt(conn, m, cancelled.as_mut()).await;
    if let Some(c) = a.keep.take() {
        lane.idle.lock().unwrap_or_else(|p| p.into_inner()).push(c);
    }
    let rec = sh.record(seq, t_us, sent, m, a);
    drop(permit);
    sh.emit(rec);
    sh.live.req.in_flight.fetch_sub(1, Relaxed);
}

/// Pin the calling thread to the `k`-th CPU it may run on (modulo their number); nothing when
/// it may run on only one.
#[cfg(target_os = "linux")]
fn pin_to_own_cpu(k: usize) -> std::io::Result<()> {
    // SAFETY: cpu_set_t is plain data; the calls get valid pointers and sizes.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let cpus: Vec<usize> = (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect();
        if cpus.len() < 2 {
            return Ok(());
        }
        let mut one: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpus[k % cpus.len()], &mut one);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &one) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(not(target_os = "linux"))]
fn pin_to_own_cpu(_k: usize) -> std::io::Result<()> {
    Ok(())
}

#[cfg(target_os = "linux")]
mod timer {
    //! A `timerfd` on the lane's event loop, armed for the exact nanosecond, where tokio's
    //! own timer rounds to milliseconds.
    use std::io;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::time::{Duration, Instant};
    use tokio::io::Interest;
    use tokio::io::unix::AsyncFd;

    pub(super) struct Timer {
        fd: AsyncFd<OwnedFd>,
    }

    impl Timer {
        pub(super) fn new() -> io::Result<Timer> {
            // SAFETY: plain system call; the result is checked before use.
            let fd = unsafe {
                libc::timerfd_create(
                    libc::CLOCK_MONOTONIC,
                    libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
                )
            };
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: `fd` is a new descriptor that nothing else owns.
            let fd = unsafe { OwnedFd::from_raw_fd(fd) };
            // SAFETY: the AsyncFd owns the descriptor and nothing closes or replaces it while
            // it is registered.
            let fd = unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE)? };
            Ok(Timer { fd })
        }

        /// Arm the timer to fire `after` from now, as an absolute CLOCK_MONOTONIC time (a
        /// relative one would start counting only once the system call runs).
        fn arm(&self, after: Duration) -> io::Result<()> {
            let mut now = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: `now` is a valid, writable timespec.
            if unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) } != 0 {
                return Err(io::Error::last_os_error());
            }
            let spec = libc::itimerspec {
                it_interval: libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                },
                it_value: add(now, after),
            };
            // SAFETY: valid descriptor and spec; the old value is not asked for.
            let rc = unsafe {
                libc::timerfd_settime(
                    self.fd.as_raw_fd(),
                    libc::TFD_TIMER_ABSTIME,
                    &spec,
                    std::ptr::null_mut(),
                )
            };
            if rc != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        }

        /// Wait until `due`; returns the instant of the wake-up. The clock, not the timer's
        /// word, decides: a stale expiry of an earlier arming only causes another wait.
        pub(super) async fn until(&mut self, due: Instant) -> io::Result<Instant> {
            loop {
                let now = Instant::now();
                if now >= due {
                    return Ok(now);
                }
                // Arming resets the expiry count, so the descriptor needs no read() to drain
                // it: one system call per wait instead of two.
                self.arm(due - now)?;
                self.fd.readable().await?.clear_ready();
            }
        }
    }

    /// `t + d`, normalised (0 ≤ tv_nsec < 10⁹).
    pub(super) fn add(t: libc::timespec, d: Duration) -> libc::timespec {
        let ns = t.tv_nsec as u64 + u64::from(d.subsec_nanos());
        libc::timespec {
            tv_sec: t.tv_sec + d.as_secs() as libc::time_t + (ns / 1_000_000_000) as libc::time_t,
            tv_nsec: (ns % 1_000_000_000) as _,
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod timer {
    //! Elsewhere: tokio's timer (millisecond resolution).
    use std::io;
    use std::time::Instant;

    pub(super) struct Timer;

    impl Timer {
        pub(super) fn new() -> io::Result<Timer> {
            Ok(Timer)
        }

        pub(super) async fn until(&mut self, due: Instant) -> io::Result<Instant> {
            tokio::time::sleep_until(due.into()).await;
            Ok(Instant::now())
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::timer::{Timer, add};
    use std::time::{Duration, Instant};

    #[test]
    fn timespec_addition_carries_nanoseconds() {
        let t = libc::timespec {
            tv_sec: 10,
            tv_nsec: 999_999_000,
        };
        let r = add(t, Duration::new(2, 1_500));
        assert_eq!((r.tv_sec, r.tv_nsec), (13, 500));
        let r = add(t, Duration::from_nanos(999));
        assert_eq!((r.tv_sec, r.tv_nsec), (10, 999_999_999));
    }

    #[test]
    fn the_timer_never_wakes_before_the_due_time() {
        // The clock decides, not the timer: whatever the machine's load, `until` returns at or
        // after `due` (how long after is a benchmark's business, not a test's).
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let mut timer = Timer::new().unwrap();
            let start = Instant::now();
            for us in [0u64, 1, 150, 999, 2_500, 7_000] {
                let due = start + Duration::from_micros(us) + Duration::from_millis(10);
                let woke = timer.until(due).await.unwrap();
                assert!(woke >= due, "woke {:?} before due", due - woke);
            }
            // A time already past returns at once.
            let past = Instant::now() - Duration::from_millis(5);
            assert!(timer.until(past).await.unwrap() >= past);
        });
    }
}

#[cfg(test)]
mod picker_tests {
    use super::{BACKUP_AFTER, Claims, Due, Picker};
    use rand::{RngExt, SeedableRng};
    use rand_chacha::ChaCha8Rng;
    use std::sync::Arc;
    use std::time::Duration;

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    /// `count` requests every `every` µs.
    fn schedule(count: u64, every: u64) -> impl Iterator<Item = Due> + Clone {
        (0..count).map(move |seq| Due {
            seq,
            off: us(seq * every),
            method: (seq % 3) as usize,
        })
    }

    /// Run `n` lanes over the schedule in simulated time. A lane that asks to wake at `w`
    /// wakes at `late(lane, w)` (≥ w). Returns every send: (request, lane, time).
    fn simulate(
        n: u64,
        count: u64,
        every: u64,
        mut late: impl FnMut(u64, Duration) -> Duration,
    ) -> Vec<(Due, u64, Duration)> {
        let claims = Arc::new(Claims::new());
        let mut lanes: Vec<_> = (0..n)
            .map(|t| Picker::new(schedule(count, every), t, n, claims.clone()))
            .collect();
        let mut wake: Vec<Option<Duration>> = (0..n as usize)
            .map(|t| lanes[t].next_wake().map(|w| late(t as u64, w)))
            .collect();
        let mut sent = Vec::new();
        let mut out = Vec::new();
        // The lane that wakes first runs next, as on a machine.
        while let Some((t, now)) = wake
            .iter()
            .enumerate()
            .filter_map(|(t, w)| w.map(|w| (t, w)))
            .min_by_key(|&(t, w)| (w, t))
        {
            lanes[t].due_at(now, &mut out);
            sent.extend(out.drain(..).map(|r| (r, t as u64, now)));
            wake[t] = lanes[t].next_wake().map(|w| late(t as u64, w.max(now)));
        }
        sent
    }

    fn assert_each_once(sent: &[(Due, u64, Duration)], count: u64) {
        let mut seqs: Vec<u64> = sent.iter().map(|(r, _, _)| r.seq).collect();
        seqs.sort_unstable();
        assert_eq!(
            seqs,
            (0..count).collect::<Vec<_>>(),
            "every request exactly once"
        );
        for (r, _, at) in sent {
            assert!(*at >= r.off, "request {} sent before its time", r.seq);
            assert_eq!(
                r.method,
                (r.seq % 3) as usize,
                "the method travels with the request"
            );
        }
    }

    #[test]
    fn claims_are_exclusive_and_survive_the_ring() {
        let c = Claims::new();
        assert!(!c.is_claimed(7));
        assert!(c.claim(7));
        assert!(!c.claim(7));
        assert!(c.is_claimed(7));
        assert!(!c.is_claimed(8));
        // A later request in the same slot implies the earlier one was claimed.
        let later = 9 + Claims::RING as u64;
        assert!(c.claim(later));
        assert!(c.is_claimed(9) && !c.claim(9));
    }

    #[test]
    fn lanes_that_keep_time_send_only_their_own() {
        for n in [1, 2, 3] {
            let sent = simulate(n, 1000, 200, |_, w| w);
            assert_each_once(&sent, 1000);
            for (r, lane, at) in &sent {
                assert_eq!((r.seq % n, *at), (*lane, r.off), "n = {n}");
            }
        }
    }

    #[test]
    fn a_stalled_lane_is_covered_by_the_other() {
        // Lane 1 gets no CPU from 10 ms to 30 ms (a wake-up asked for inside comes at 30 ms).
        let (from, to) = (us(10_000), us(30_000));
        let sent = simulate(2, 250, 200, |lane, w| {
            if lane == 1 && w >= from && w < to {
                to
            } else {
                w
            }
        });
        assert_each_once(&sent, 250);
        for (r, lane, at) in &sent {
            if r.seq % 2 == 1 && r.off >= from && r.off + BACKUP_AFTER < to {
                // Lane 0 sent it, exactly BACKUP_AFTER late.
                assert_eq!((*lane, *at), (0, r.off + BACKUP_AFTER), "request {}", r.seq);
            } else if r.off + BACKUP_AFTER < from || r.off >= to {
                assert_eq!((*lane, *at), (r.seq % 2, r.off), "request {}", r.seq);
            }
        }
        // No request waited longer than the backup delay (plus the stall's edge).
        let worst = sent.iter().map(|(r, _, at)| *at - r.off).max().unwrap();
        assert!(worst <= BACKUP_AFTER, "worst lag {worst:?}");
    }

    #[test]
    fn random_lateness_never_loses_or_repeats_a_request() {
        for seed in 0..20 {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let n = 2 + seed % 3;
            let sent = simulate(n, 2000, 150, |_, w| {
                // Mostly on time, sometimes a few ms late.
                let extra = if rng.random::<f64>() < 0.05 {
                    rng.random_range(0..5_000)
                } else {
                    rng.random_range(0..60)
                };
                w + us(extra)
            });
            assert_each_once(&sent, 2000);
        }
    }
}
