//! Deterministic models of resolvelab: what nginx's upstream/resolve logic and DNS-vs-proxy
//! balancing do, computed instead of measured.
//!
//! * [`balance`] — the balancing model of DOMAIN.md §7: DNS answer + TTL cache, proxy weighted round-robin,
//!   proxy least-connections and connection reuse with stream capacity, kept apart
//!   (`resolvelab sim balance`).
//! * [`nginx`] — a discrete-event model of nginx's upstream/resolve logic that writes the same
//!   logs as a real lab run (`resolvelab sim run`, `resolvelab sim predict`, `--engine sim`).
//! * [`proxies`] — the other proxies' DNS-event policies (HAProxy, Envoy, Caddy) on the same
//!   configuration, with the same logs (`--engine sim-haproxy`, `sim predict --engine haproxy`).
//!
//! ```
//! use resolvelab_sim::balance::{golden_input, simulate, Strategy};
//! let rows = simulate(&golden_input(), Strategy::ProxyWeighted).unwrap();
//! let picks: String = rows.iter().map(|r| r.selected.as_str()).collect();
//! assert_eq!(picks, "AAAAABCAAAAA"); // weight slots A×5, B, C — independent of DNS
//! ```

// A library says what it has to say through `resolvelab_core::progress`, never on its own
// stdout/stderr, and links only what it uses (docs/ARCHITECTURE.md, "Lints").
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]
#![cfg_attr(not(test), deny(unused_crate_dependencies))]

pub mod balance;
pub mod nginx;
pub mod proxies;
pub mod text;
