//! The lab: plays a scenario (`resolvelab-scenario`) on an engine — a real nginx release, a
//! third-party proxy or the model — and leaves a run directory the one checker judges; and the
//! studies built on runs: the judge, `compare` (engines side by side), `fidelity` and `replay`
//! (the model against real runs).
//!
//! * [`engine`] — the engines behind one trait, by [`EngineId`](resolvelab_core::spec::engine::EngineId).
//! * [`runner`] — a run on a real proxy: DNS authority, backends, proxy, load, timeline, probes
//!   ([`gslb`]: a name answered by health checks).
//! * [`simrun`] — the same scenario played by the model.
//! * [`render`] — nginx's configuration, rendered from the scenario (each third-party proxy's is in its folder of `resolvelab-thirdparty`).
//! * [`judge`], [`compare`], [`fidelity`], [`replay`] — the studies.
//!
//! ```
//! use resolvelab_scenario::{library, net::Net};
//! let sc = library::get("swap-only").unwrap();
//! let net = Net::assign(&sc, 10, 1).unwrap();
//! let body = resolvelab_lab::render::http_body(&sc, &net).unwrap();
//! assert!(body.contains("resolve"));
//! ```

// A library says what it has to say through `resolvelab_core::progress`, never on its own
// stdout/stderr, and links only what it uses (docs/ARCHITECTURE.md, "Lints").
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]
#![cfg_attr(not(test), deny(unused_crate_dependencies))]

pub mod compare;
pub mod engine;
pub mod fidelity;
pub mod fleet;
pub mod gslb;
pub mod judge;
pub mod lifecycle;
pub mod netns;
pub mod options;
pub mod probe;
pub mod proxy;
pub mod render;
pub mod replay;
pub mod runner;
pub mod simrun;
pub mod targets;
