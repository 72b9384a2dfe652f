//! `resolvelab-load` — an open-loop HTTP/1.1 load generator that tells the truth about time.
//!
//! Requests leave on a schedule (`--rate 500`, steps `100@10s,500@30s`, ramps `0..1000@60s`)
//! whatever the server does. Every request carries its *scheduled* time, so latency is reported
//! twice: corrected (done − scheduled, what a user waiting on that schedule sees) and
//! uncorrected (done − sent, what a closed-loop tool would report). A request that cannot be
//! sent is never skipped silently: it is recorded as `late` (waited for a connection longer
//! than `--timeout`) or `dropped` (the in-flight cap was full).
//!
//! Parts:
//! * [`plan`] — rate plans and the schedule they produce;
//! * [`config`] — [`LoadConfig`]: target (loopback-only unless `allow_remote`), connections, mix;
//! * [`run_load`] — the run itself, with [`Live`] counters and a cancellation token
//!   ([`set_realtime`] gives a thread SCHED_FIFO priority, for `--realtime`). Open-loop plans
//!   run on one *lane* per worker of the caller's runtime (a thread with its own event loop,
//!   keep-alive pool and share of the schedule, woken at each request's time by a `timerfd`);
//!   `--rate max` runs its connections on one load thread per worker of the caller's runtime,
//!   each a wrk-like `epoll` loop of connection state machines that reads responses with
//!   `httparse` instead of hyper, so that the generator takes as little CPU as possible from
//!   the server it measures (see docs/load.md);
//! * [`record`] — the per-request JSON Lines record (`resolvelab.load/v1`) and its reader;
//! * [`summary`] — HDR-histogram percentiles, status classes, per-second series;
//! * [`report`] — `load report`: merge result files into text, JSON, vegeta CSV or HTML;
//! * [`progress`] — the TTY progress line.
//!
//! # Library use (the scenario runner)
//!
//! ```no_run
//! use resolvelab_load::{CancellationToken, LoadConfig, Live, Output, RatePlan, run_load};
//! # async fn demo() -> anyhow::Result<()> {
//! let mut cfg = LoadConfig::new("http://127.0.0.1:8080/", RatePlan::parse("300").map_err(anyhow::Error::msg)?, false)?;
//! cfg.duration = Some(std::time::Duration::from_secs(120));
//! cfg.header_capture = Some("x-backend".parse()?);
//! let live = Live::new();          // poll live.snapshot() for a progress line
//! let cancel = CancellationToken::new(); // cancel.cancel() stops the schedule
//! let summary = run_load(&cfg, Output::File("runs/x/load.jsonl".into()), live.clone(), cancel).await?;
//! println!("{}", summary.to_text());
//! # Ok(()) }
//! ```
//!
//! The pure parts need no network:
//!
//! ```
//! use resolvelab_load::{RatePlan, config::Target};
//! let plan = RatePlan::parse("100@1s,0..200@2s").unwrap();
//! assert_eq!(plan.schedule(None, None).unwrap().count(), 300);
//! assert!(Target::parse("http://192.0.2.7/", false).is_err()); // not loopback
//! ```

// A library says what it has to say through `resolvelab_core::progress`, never on its own
// stdout/stderr, and links only what it uses (docs/ARCHITECTURE.md, "Lints").
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]
#![cfg_attr(not(test), deny(unused_crate_dependencies))]

mod client;
mod closed;
pub mod config;
mod open;
pub mod plan;
pub mod progress;
pub mod record;
pub mod report;
mod run;
pub mod summary;
mod wire;

pub use config::{LoadConfig, Mix, Target};
pub use plan::RatePlan;
pub use record::{ErrorKind, Header, JsonlSink, Record, RecordSink};
pub use run::{Live, LiveSnapshot, Output, run_load, set_realtime};
pub use summary::Summary;
pub use tokio_util::sync::CancellationToken;
