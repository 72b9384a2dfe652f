//! Shared conventions of resolvelab, used by every lab component and by the checker.
//!
//! * [`time`] — wall-clock epoch microseconds (`t_us`), the one time unit of every record we write.
//! * [`jsonl`] — JSON Lines logs with a `schema` on the first line, flushed per event.
//! * [`policy`] — the loopback-only address policy for generated traffic.
//! * [`dur`] — human durations (`200ms`, `2s`) and ranges (`0ms..50ms`).
//! * [`spec`] — the lab's vocabulary: DNS modes, faults, latency, rate plans, alignment — parsed
//!   and displayed once, used by every component and the model.
//! * [`evidence`] — what a run leaves: its files, their schema ids, the lab's log format.
//! * [`rundir`] — run directories and `fingerprint.json`.
//! * [`version`] — nginx versions (`1.28.3`, from `nginx -V`) and the first one with `resolve`.
//! * [`zone`] — how many slab pages an nginx upstream `zone`'s peers take, by build.
//! * [`text`] — HTML escaping and the Prometheus text exposition.
//! * [`supervise`] — child processes that never outlive the tool (process groups + `PR_SET_PDEATHSIG`).
//! * [`testing`] — what the tests share: a missing prerequisite fails under `CI=true`, is skipped elsewhere.
//!
//! ```
//! use resolvelab_core::{dur, policy};
//! assert_eq!(dur::parse("1.5s").unwrap(), std::time::Duration::from_millis(1500));
//! assert!(policy::check_target("127.0.0.20:8080".parse().unwrap(), false).is_ok());
//! assert!(policy::check_target("[::1]:53".parse().unwrap(), false).is_ok());
//! assert!(policy::check_target("192.0.2.1:80".parse().unwrap(), false).is_err());
//! ```

// A library says what it has to say through `resolvelab_core::progress`, never on its own
// stdout/stderr, and links only what it uses (docs/ARCHITECTURE.md, "Lints").
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]
#![cfg_attr(not(test), deny(unused_crate_dependencies))]

/// Serde reads and writes `$t` as its text (`FromStr` and `Display`), so a scenario file's value
/// is typed when the file is read, and a bad one is a serde error at its line. Use with
/// `#[serde(try_from = "String", into = "String")]`.
macro_rules! serde_as_text {
    ($t:ty) => {
        impl TryFrom<String> for $t {
            type Error = String;
            fn try_from(s: String) -> Result<Self, String> {
                s.parse()
            }
        }

        impl From<$t> for String {
            fn from(v: $t) -> String {
                v.to_string()
            }
        }
    };
}

pub mod doc;
pub mod dur;
pub mod evidence;
pub mod jsonl;
pub mod policy;
pub mod progress;
pub mod rundir;
pub mod spec;
pub mod supervise;
pub mod sysdns;
pub mod testing;
pub mod text;
pub mod time;
pub mod version;
pub mod zone;
