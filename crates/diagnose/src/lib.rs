//! The checker of resolvelab: read nginx access/error logs (and, for lab runs, our DNS and event
//! logs), and explain every 502 — which failure class it belongs to (DESIGN.md ids), with a
//! confidence, the evidence lines (`file:line`) and the fix. The same checker judges lab runs
//! ([`analyze_run`]) and production logs ([`diagnose`]).
//!
//! ```
//! use resolvelab_diagnose::{diagnose, Options};
//! use resolvelab_history::logformat::LogFormat;
//! let dir = tempfile::tempdir().unwrap();
//! let a = dir.path().join(resolvelab_core::evidence::file::ACCESS_LOG);
//! let e = dir.path().join(resolvelab_core::evidence::file::ERROR_LOG);
//! // Three isolated 2-hop NLUs would need a swap; here: one plain upstream failure.
//! std::fs::write(&a, "1796018401.100 200 \"127.0.0.20:8080\" \"200\" 0.001 GET 1 1 \"0.001\" \"0.000\" \"GET / HTTP/1.1\" 127.0.0.1\n\
//! 1796018401.200 502 \"127.0.0.20:8080\" \"502\" 0.001 GET 2 1 \"0.001\" \"0.000\" \"GET / HTTP/1.1\" 127.0.0.1\n").unwrap();
//! std::fs::write(&e, "").unwrap();
//! let mut o = Options::new(vec![a], vec![e]);
//! o.log_format = LogFormat::lab();
//! o.tz_offset_s = Some(0);
//! let d = diagnose(&o).unwrap();
//! assert_eq!((d.requests, d.failures, d.nlu.total), (2, 1, 0));
//! assert_eq!(d.incidents[0].class, "upstream-failure");
//! ```

// A library says what it has to say through `resolvelab_core::progress`, never on its own
// stdout/stderr, and links only what it uses (docs/ARCHITECTURE.md, "Lints").
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]
#![cfg_attr(not(test), deny(unused_crate_dependencies))]

pub mod checker;
pub mod classes;
pub mod classify;
pub mod conf;
pub mod evidence;
pub mod expect;
pub mod fleet;
pub mod run;
pub mod timeline;
pub mod verdict;

pub use checker::{Options, StreamStats, diagnose, diagnose_with_history, diagnose_with_stats};
pub use conf::NginxConf;
pub use run::analyze_run;
pub use verdict::{Diagnosis, Incident, TimeRange, Verdict};
