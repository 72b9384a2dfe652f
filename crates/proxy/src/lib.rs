//! resolvelab-proxy — a TCP fault proxy in the manner of Toxiproxy (`resolvelab proxy`). The
//! fault runtime it shares with the backend (toxicity, window, seed, hit counter) is
//! `resolvelab-inject`; the toxics' kinds and keys are `resolvelab_core::spec::toxic`.
//!
//! Every fault kind ("toxic") is one small file under `toxics/` behind the [`toxics::Toxic`]
//! trait; the common parts live in a wrapper. Unlike Toxiproxy every toxic counts what it really
//! touched ([`ToxicStats::hits`]: connections, plus bytes and chunks) and every connection is
//! logged (`resolvelab.proxy/v1`), so a verdict can refuse a run whose injection never hit.
//!
//! ```no_run
//! use resolvelab_proxy::{Proxy, ProxyConfig};
//! # async fn demo() -> anyhow::Result<()> {
//! let mut cfg = ProxyConfig::new(
//!     "db",
//!     "127.0.0.40:0".parse()?,   // port 0: pick a free port
//!     "127.0.0.41:5432".parse()?,
//! );
//! cfg.faults.push("latency:delay=200ms,direction=downstream".parse().map_err(anyhow::Error::msg)?);
//! let proxy = Proxy::start(cfg).await?;
//! println!("listening on {}", proxy.local_addr());
//! // … run the experiment …
//! println!("{:?}", proxy.fault_hits()); // [("latency_downstream", 12)]
//! proxy.remove_fault("latency_downstream");
//! proxy.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! The spec syntax is `KIND[:key=value,…]` with the common keys `toxicity` (0–1, decided per
//! connection), `for` (window from the moment the toxic is added), `seed`, `name`, and
//! `direction` (`upstream` = client→server, `downstream` = server→client, the default).

// A library says what it has to say through `resolvelab_core::progress`, never on its own
// stdout/stderr, and links only what it uses (docs/ARCHITECTURE.md, "Lints").
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]
#![cfg_attr(not(test), deny(unused_crate_dependencies))]

pub mod control;
pub mod file;
pub mod proxy;
pub mod toxics;

pub use proxy::{LOG_SCHEMA, Proxy, ProxyConfig, ProxyHandle, ProxyStats, ToxicStats};
pub use toxics::{Direction, ToxicSpec};
