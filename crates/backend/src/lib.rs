//! resolvelab-backend — a fault-injectable HTTP/1.1 keep-alive origin for the lab.
//!
//! Every response names the backend (`x-backend` header and body), plus `x-conn` (connection
//! id) and `x-req` (request number on that connection). Responses follow a latency model and a
//! status mix; `/health` always answers 200; `/ready` needs a DB pool connection when `--db` is
//! used. Faults are precise, probabilistic (`toxicity`), windowed (`for`), seeded and
//! **counted** (`hits`): `reclaim`, `idle-timeout`, `rst`, `refuse`, `hang`,
//! `close-after-headers`, `status`, `slow-headers`. See [`fault::BackendFaultKind`]. A backend
//! may speak TLS ([`tls`]: a certificate authority made for the run).
//!
//! The reclaim race (DOMAIN.md §8): on loopback nginx sees an instant close before it reuses the
//! connection, so `reclaim` closes *after a random delay* (default 0–50 ms) and swallows
//! anything the client sends in that gap; a request caught there fails in nginx as
//! `upstream prematurely closed connection`, and is counted in [`FaultStatus::caught`].
//!
//! ```no_run
//! use resolvelab_backend::{Backend, BackendConfig, BackendFault};
//! # async fn demo() -> anyhow::Result<()> {
//! let mut cfg = BackendConfig::new("b1", "127.0.0.20:0".parse()?);
//! cfg.faults.push("reclaim:toxicity=0.3,delay=0ms..50ms".parse::<BackendFault>().map_err(anyhow::Error::msg)?);
//! let b = Backend::start(cfg).await?;
//! println!("serving on {}", b.local_addr());
//! // … drive load through nginx …
//! println!("{:?}", b.fault_hits()); // [("reclaim", 517)]
//! b.clear_faults();
//! b.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! The slow dependency of the latency-injection experiment (DOMAIN.md §6): start an [`EchoDb`], put a `resolvelab_proxy` proxy with
//! `latency:delay=200ms,direction=downstream` in front of it, and give the backend a
//! [`DbConfig`] (`round_trips`, `pool`, `acquire_timeout`); each request then waits for a pool
//! connection and makes K sequential round trips, and [`BackendStats::pool`] exports the pool
//! gauges and the wait-time histogram.

// A library says what it has to say through `resolvelab_core::progress`, never on its own
// stdout/stderr, and links only what it uses (docs/ARCHITECTURE.md, "Lints").
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]
#![cfg_attr(not(test), deny(unused_crate_dependencies))]

mod control;
pub mod db;
pub mod fault;
pub mod log;
pub mod response;
mod server;
pub mod tls;

pub use db::{DbConfig, EchoDb, PoolStats};
pub use fault::{BackendFault, BackendFaultKind, FaultStatus};
pub use log::LOG_SCHEMA;
pub use response::{Latency, StatusMix};
pub use server::{Backend, BackendConfig, BackendHandle, BackendStats};
