//! Scenarios: the lab's experiments as files. A scenario (Jepsen's vocabulary) is a load
//! *generator*, faults on a *timeline* (the nemesis), and *expectations* written before the run
//! that the checker (`resolvelab-diagnose`) judges. This crate reads and checks the file, with
//! `file:line` errors before anything starts, and knows the built-in library
//! (`scenarios/*.toml`, embedded in the binary, [`library`]). It depends on `resolvelab-core`
//! alone: playing a scenario is `resolvelab-lab`'s job.
//!
//! ```
//! use resolvelab_scenario::{library, net::Net};
//! let sc = library::get("swap-only").unwrap();
//! assert!(sc.nginx.servers.iter().any(|s| s.resolve));
//! let net = Net::assign(&sc, 10, 1).unwrap();
//! assert_eq!(net.dns.ip().to_string(), "127.10.1.53");
//! ```

// A library says what it has to say through `resolvelab_core::progress`, never on its own
// stdout/stderr, and links only what it uses (docs/ARCHITECTURE.md, "Lints").
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]
#![cfg_attr(not(test), deny(unused_crate_dependencies))]

pub mod format;
pub mod knobs;
pub mod library;
pub mod locate;
pub mod net;
pub mod plan;
pub mod timeline;

pub use format::Scenario;
pub use plan::Plan;
