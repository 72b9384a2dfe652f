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

use crate::client::Conn;
use crate::config::{LoadConfig, Mix};
use crate::plan::Schedule;
use crate::record::ErrorKind;
use crate::run::Shared;
use hdrhistogram::Histogram;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;
use tokio_util::task::TaskTracker;

/// How many requests a lane that has fallen behind dispatches in a row before it lets the
/// requests it started run: a backlog is sent in bursts, not all before any of it.
const BURST: u32 = 16;

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
    // A child token: if a lane fails to start, the others stop without cancelling the caller.
    let stop = sh.cancel.child_token();
    let mut done = Vec::with_capacity(n);
    let mut first_error = None;
    for t in 0..n {
        let permits = cfg.connections / n + usize::from(t < cfg.connections % n);
        let (tx, rx) = tokio::sync::oneshot::channel();
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
}

fn lane_thread(spec: LaneSpec) -> Result<Histogram<u64>, LaneError> {
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
    let mut lag = Histogram::<u64>::new(3).expect("valid sigfig");
    let cancelled = stop.cancelled();
    tokio::pin!(cancelled);
    let mut in_a_row = 0;
    let mut failure = None;
    for (seq, off) in schedule {
        let m = mix.pick(rng.random::<f64>());
        if seq % n != t {
            continue;
        }
        let due = sh.start + off;
        let now = if Instant::now() >= due {
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
                r = timer.until(due) => match r {
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
        crate::summary::put(&mut lag, (now - due).as_micros() as u64);
        let t_us = sh.start_us + off.as_micros() as i64;
        sh.live.req.scheduled.fetch_add(1, Relaxed);
        if sh.live.req.in_flight.load(Relaxed) >= sh.max_in_flight {
            sh.emit(sh.unsent(seq, t_us, m, ErrorKind::Dropped));
            continue;
        }
        sh.live.req.in_flight.fetch_add(1, Relaxed);
        tracker.spawn(scheduled(sh.clone(), lane.clone(), seq, due, t_us, m));
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
