//! The plan: what one run plays, made once from a scenario file before anything starts. The
//! variant is merged, the scale applied to typed values, every spec read (DNS settings,
//! latency, faults, the rate plan), the timeline's steps placed with the seed's jitter, and the
//! engines the scenario names read as [`EngineId`]s. Every engine (real nginx, the third-party
//! proxies, the models) reads a [`Plan`]; nothing after it parses a scenario string.
//!
//! ```
//! use resolvelab_scenario::{library, timeline::Action};
//! let sc = library::get("nxdomain").unwrap();
//! let plan = sc.plan(None, 1.0, Some(7)).unwrap();
//! assert_eq!(plan.seed, 7);
//! assert!(matches!(&plan.steps[0].action, Action::Dns { mode, .. } if mode == "nxdomain"));
//! // A variant is merged and checked by the same call; a wrong name says which exist.
//! let v = sc.plan(Some("valid30-aligned"), 1.0, None).unwrap();
//! assert_eq!(v.scenario.variant_of.as_deref(), Some("valid30-aligned"));
//! assert!(sc.plan(Some("nope"), 1.0, None).is_err());
//! ```

use crate::format::{Scenario, Specs};
use crate::timeline::{self, Step};
use resolvelab_core::spec::engine::EngineId;

/// One run's plan (see the module documentation).
#[derive(Debug, Clone)]
pub struct Plan {
    /// The scenario as played: the variant merged, the scale applied. This is what the run
    /// directory's `scenario.toml` holds, in the author's spelling.
    pub scenario: Scenario,
    /// The run's seed: `--seed`, else the scenario's `seed`, else 1.
    pub seed: u64,
    /// The DNS names' starting settings, the backends' and proxies' standing specs, the rate.
    pub specs: Specs,
    /// The timeline, each event's instant and action resolved.
    pub steps: Vec<Step>,
    /// The engines the scenario applies to (empty: every engine).
    pub engines: Vec<EngineId>,
}

/// Why a plan could not be made: one line naming the scenario file's `file:line` and the fix.
#[derive(Debug)]
pub struct PlanError(String);

impl std::fmt::Display for PlanError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PlanError {}

impl From<anyhow::Error> for PlanError {
    fn from(e: anyhow::Error) -> PlanError {
        PlanError(format!("{e:#}"))
    }
}

impl Scenario {
    /// The plan of one run of this scenario: `variant` merged in (None: as it is), durations
    /// and rates shortened by `scale` (see [`Scenario::scaled`]), the timeline placed with
    /// `seed` (None: the scenario's own, else 1).
    pub fn plan(
        &self,
        variant: Option<&str>,
        scale: f64,
        seed: Option<u64>,
    ) -> Result<Plan, PlanError> {
        let merged = match variant {
            Some(v) => self.variant(v)?,
            None => self.clone(),
        };
        let scenario = merged.scaled(scale)?;
        let seed = seed.or(scenario.seed).unwrap_or(1);
        let specs = scenario.specs()?;
        let steps = timeline::steps(&scenario.timeline, &scenario.proxies, seed)?;
        let engines = scenario.engines.iter().map(|e| e.value).collect();
        Ok(Plan {
            scenario,
            seed,
            specs,
            steps,
            engines,
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::library;
    use std::time::Duration;

    #[test]
    fn the_plan_is_scaled_and_seeded_once() {
        let sc = library::get("nxdomain").unwrap();
        let full = sc.plan(None, 1.0, Some(3)).unwrap();
        let quick = sc.plan(None, 0.5, Some(3)).unwrap();
        assert!(quick.scenario.load.duration.get() < full.scenario.load.duration.get());
        assert_eq!(full.steps[0].at, Duration::from_secs(12));
        assert_eq!(quick.steps[0].at, Duration::from_secs(6));
        // The same inputs give the same plan: an engine may be handed it twice.
        assert_eq!(sc.plan(None, 0.5, Some(3)).unwrap().steps, quick.steps);
        assert_eq!(sc.plan(None, 1.0, None).unwrap().seed, sc.seed.unwrap_or(1));
    }

    #[test]
    fn a_bad_scale_is_one_line() {
        let sc = library::get("nxdomain").unwrap();
        let e = sc.plan(None, 2.0, None).unwrap_err().to_string();
        assert!(e.starts_with("--scale 2: use a factor in (0, 1]"), "{e}");
    }
}
