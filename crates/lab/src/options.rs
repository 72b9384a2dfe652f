//! What every engine takes and leaves, whichever plays the scenario: the options of a run
//! ([`RunOptions`], with what a model replaying a lab run takes from it, [`LabInputs`]) and the
//! record it leaves (`run.json`, [`RunRecord`]). Neither the real-proxy runner nor the model
//! owns them, so the run lifecycle, the studies and the engines import them from here.
//!
//! ```
//! use resolvelab_lab::options::RunOptions;
//! let o = RunOptions { seed: Some(7), ..RunOptions::default() };
//! assert_eq!(o.out, std::path::PathBuf::from("runs"));
//! ```

use std::collections::BTreeMap;
use std::path::PathBuf;

/// How to run a scenario.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Parent directory of run directories (`runs`).
    pub out: PathBuf,
    /// RNG seed (overrides the scenario's).
    pub seed: Option<u64>,
    /// Duration/rate scale factor (0, 1].
    pub scale: f64,
    /// An explicit nginx binary (`--nginx`): the `nginx` engine's.
    pub nginx: Option<PathBuf>,
    /// Explicit binaries of other engines (`--engine-bin NAME=PATH`), by engine id.
    pub engine_bins: BTreeMap<String, PathBuf>,
    /// Pin the run's loopback /24 to `127.A.B.0/24` (default: random per run).
    pub net: Option<(u8, u8)>,
    /// Print progress lines.
    pub progress: bool,
    /// `--engine sim` only: what the model takes from the real-nginx run it replays
    /// ([`crate::replay`]); the real engine ignores it.
    pub replay: Option<LabInputs>,
}

/// What a model run takes from the lab run it replays, beside its seed and /24: the model has
/// no clock and no CPU of its own, so these come from the lab like the seed does.
#[derive(Debug, Clone, PartialEq)]
pub struct LabInputs {
    /// The lab run's `load_start_us`: the same phase of nginx's one-second clock
    /// (`fail_timeout` is checked in whole seconds, which moves a wipeout's end by up to 1 s),
    /// and logs that line up with the lab's.
    pub load_start_us: i64,
    /// The lab run's `load.jsonl`: requests arrive when the lab's generator actually sent them,
    /// not on the plan's grid. A loaded host holds requests back and releases them together,
    /// and such bursts open extra client connections, which decides how requests spread over
    /// nginx's workers.
    pub arrivals: Option<PathBuf>,
    /// A `[fleet]` run's instances' starts, in start order: µs before the load start of each
    /// instance's first DNS query (nginx resolves at its start), read from the lab's DNS log
    /// by the querying socket ([`crate::replay::instance_starts`]). Each re-queries on its own
    /// phase from there. Empty: the plan's `stagger`.
    pub instance_starts_us: Vec<i64>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            out: PathBuf::from("runs"),
            seed: None,
            scale: 1.0,
            nginx: None,
            engine_bins: BTreeMap::new(),
            net: None,
            progress: true,
            replay: None,
        }
    }
}

/// What a run left (`run.json`): the evidence type, shared with its readers.
pub use resolvelab_core::evidence::run::{Network, Run as RunRecord, RunStatus};
