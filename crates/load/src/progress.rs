//! The progress line on a terminal: elapsed/total, live request rate, in flight, status classes
//! and errors by kind. Silent when standard error is not a terminal.

use crate::record::ErrorKind;
use crate::run::Live;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A running progress line; [`Progress::finish`] clears it.
pub struct Progress {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// The text after the bar, from two snapshots `dt` apart.
pub fn line(now: &crate::LiveSnapshot, before: &crate::LiveSnapshot, dt: Duration) -> String {
    let rps = (now.sent - before.sent) as f64 / dt.as_secs_f64().max(1e-3);
    let c = &now.classes;
    let mut s = format!(
        "{rps:>7.0} rps  sent {}  in-flight {}  2xx {} 3xx {} 4xx {} 5xx {}",
        now.sent, now.in_flight, c.c2xx, c.c3xx, c.c4xx, c.c5xx
    );
    for k in ErrorKind::ALL {
        let n = now.errors[k.index()];
        if n > 0 {
            s.push_str(&format!("  {k} {n}"));
        }
    }
    s
}

impl Progress {
    /// Start a progress line if standard error is a terminal and `quiet` is false; `total` is
    /// the planned length of the run, if known.
    pub fn start(live: Arc<Live>, total: Option<Duration>, quiet: bool) -> Progress {
        let stop = Arc::new(AtomicBool::new(false));
        if quiet || !std::io::stderr().is_terminal() {
            return Progress { stop, thread: None };
        }
        let stop2 = stop.clone();
        let thread = std::thread::spawn(move || {
            let bar = match total {
                Some(t) => {
                    let b = ProgressBar::with_draw_target(
                        Some(t.as_millis() as u64),
                        ProgressDrawTarget::stderr_with_hz(4),
                    );
                    b.set_style(
                        ProgressStyle::with_template("{elapsed:>4}/{prefix} [{bar:20}] {msg}")
                            .unwrap_or_else(|_| ProgressStyle::default_bar())
                            .progress_chars("=> "),
                    );
                    b
                }
                None => {
                    let b =
                        ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr_with_hz(4));
                    b.set_style(
                        ProgressStyle::with_template("{elapsed:>4} {spinner} {msg}")
                            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
                    );
                    b
                }
            };
            bar.set_prefix(
                total
                    .map(|t| format!("{}s", t.as_secs()))
                    .unwrap_or_default(),
            );
            let start = Instant::now();
            let mut before = live.snapshot();
            let mut t_before = Instant::now();
            while !stop2.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(250));
                let now = live.snapshot();
                let msg = line(&now, &before, t_before.elapsed());
                bar.set_message(msg);
                if total.is_some() {
                    bar.set_position(start.elapsed().as_millis() as u64);
                } else {
                    bar.tick();
                }
                before = now;
                t_before = Instant::now();
            }
            bar.finish_and_clear();
        });
        Progress {
            stop,
            thread: Some(thread),
        }
    }

    /// Stop and clear the line.
    pub fn finish(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}
