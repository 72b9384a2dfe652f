//! `--engine sim`: the same scenario against the deterministic model of nginx (`resolvelab-sim`).

use crate::Scenario;
use crate::runner::{RunOptions, RunRecord};

/// Run a scenario on the simulated nginx, leaving a run directory like a real run.
pub fn run(sc: &Scenario, _opts: &RunOptions) -> anyhow::Result<RunRecord> {
    anyhow::bail!(
        "--engine sim is not wired to scenarios yet (scenario `{}`)",
        sc.name
    )
}
