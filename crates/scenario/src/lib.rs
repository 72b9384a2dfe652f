//! Scenarios: the lab's experiments as files, and the runner that plays them against a real nginx.
//!
//! A scenario (Jepsen's vocabulary) is a load *generator*, faults on a *timeline* (the nemesis),
//! the *history* it leaves in a run directory, and *expectations* written before the run that the
//! checker (`resolvelab-diagnose`) judges. The built-in library lives in `scenarios/*.toml` and is
//! embedded in the binary ([`library`]).
//!
//! ```
//! use resolvelab_scenario::{library, render::Net};
//! let sc = library::get("swap-only").unwrap();
//! let net = Net::assign(&sc, 10, 1).unwrap();
//! let body = resolvelab_scenario::render::http_body(&sc, &net).unwrap();
//! assert!(body.contains("resolve"));
//! ```

// A library says what it has to say through `resolvelab_core::progress`, never on its own
// stdout/stderr, and links only what it uses (docs/ARCHITECTURE.md, "Lints").
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]
#![cfg_attr(not(test), deny(unused_crate_dependencies))]

pub mod compare;
pub mod engine;
pub mod fidelity;
pub mod foreign;
pub mod format;
pub mod judge;
pub mod library;
pub mod lifecycle;
pub mod locate;
pub mod netns;
pub mod probe;
pub mod proxy;
pub mod render;
pub mod replay;
pub mod runner;
pub mod simrun;
pub mod timeline;

pub use format::Scenario;
