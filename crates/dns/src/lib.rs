//! A mode-controlled authoritative DNS server: the failures the lab studies start in DNS.
//!
//! Each served name has a [`DnsMode`] (its syntax lives in `resolvelab_core::spec::dns`) — `static`, `alternate` (the GSLB behaviour: one A record per
//! answer, rotating), `weighted`, `multi:N`, `nxdomain`, `servfail`, `refused`, `nodata`, `drop`,
//! `delay:DUR`, `truncate` — switchable at runtime, optionally `for` a while (then it reverts)
//! and optionally aligned with the *next query* for that name, which is how an injection is
//! lined up with nginx's re-resolution. UDP and TCP, wire format by `hickory-proto`.
//! Every query can be logged (JSON Lines, schema `resolvelab.dns/v1`) and observed live; the
//! *injection hit* counter counts queries answered under a non-default mode.
//!
//! In-process use (the scenario runner does this on its tokio runtime):
//!
//! ```
//! # async fn demo() -> anyhow::Result<()> {
//! use resolvelab_dns::{DnsConfig, DnsServer, DnsMode, NameConfig};
//! use std::time::Duration;
//!
//! let cfg = DnsConfig {
//!     names: vec![NameConfig::parse_cli("app.test.local=alternate:127.0.0.20,127.0.0.30").unwrap()],
//!     ..DnsConfig::default() // 127.0.0.1, a free port, TTL 1 s
//! };
//! let dns = DnsServer::start(cfg).await?;
//! let mut queries = dns.subscribe(); // every query as it is answered
//! println!("resolver {};", dns.local_addr());
//! // NXDOMAIN for 2 s, starting exactly at nginx's next query for the name:
//! let nx: DnsMode = "nxdomain".parse().unwrap();
//! dns.set_mode("app.test.local", nx, Some(Duration::from_secs(2)), true)?;
//! # let _ = &mut queries;
//! assert_eq!(dns.hits(), 0); // no query answered under the injected mode yet
//! dns.shutdown().await?;
//! # Ok(()) }
//! # tokio::runtime::Runtime::new().unwrap().block_on(demo()).unwrap();
//! ```
//!
//! [`DnsHandle`] offers `local_addr()`, `control_addr()`, `set_mode(name, mode, for_,
//! align_next_query)`, `reset(name)`, `serve(name, mode, reason)` (a configured answer, as a
//! GSLB gives it), `mode(name)`, `hits()`, `hits_for(name)`, `names()`,
//! `subscribe()` (a `tokio::sync::broadcast` of [`QueryEvent`], the query-log lines, live),
//! `subscribe_changes()` (a broadcast of [`ModeChange`]: set, pending, aligned, revert, each with
//! its exact time), `metrics()` and `shutdown().await`. [`Engine::handle`] is the socket-free
//! packet handler (one packet in, at most one out) that the UDP and TCP loops share.
//!
//! Modules: [`zone`] (`--name`, zone and timeline
//! files), [`engine`] (the packet handler, state, metrics), [`server`] (sockets, query log),
//! [`control`] (the HTTP JSON control API and its client), [`client`] (a one-query stub resolver).

// A library says what it has to say through `resolvelab_core::progress`, never on its own
// stdout/stderr, and links only what it uses (docs/ARCHITECTURE.md, "Lints").
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]
#![cfg_attr(not(test), deny(unused_crate_dependencies))]

pub mod client;
pub mod control;
pub mod engine;
pub mod server;
#[cfg(target_os = "linux")]
mod udp;
pub mod watch;
pub mod zone;

pub use control::{ControlClient, SetRequest};
pub use engine::{Engine, ModeChange, NameStatus, QueryEvent, Reply, SetError, Transport};
/// The modes are the lab's shared vocabulary ([`resolvelab_core::spec::dns`]).
pub use resolvelab_core::spec::dns::{DnsMode, MODES_HELP};
pub use server::{DnsConfig, DnsHandle, DnsServer, LOG_SCHEMA};
pub use zone::{Align, Change, ModeSpec, NameConfig, Timeline, Unknown, Zone};
