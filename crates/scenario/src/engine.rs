//! The engines a scenario runs on, behind one seam: the real nginx ([`RealNginx`], the lab
//! runner) and the deterministic model ([`Model`], `simrun`). Both take the same (variant-merged)
//! scenario and options and leave the same run directory, which the one checker judges. Another
//! proxy or nginx version is one more implementation of [`Engine`] and one more row of
//! [`ENGINES`].
//!
//! ```
//! use resolvelab_scenario::engine;
//! assert_eq!(engine::by_name("sim").unwrap().id(), "sim");
//! let e = engine::by_name("haproxy").err().unwrap();
//! assert!(e.to_string().contains("nginx, sim"));
//! ```

use crate::Scenario;
use crate::runner::{RunOptions, RunRecord};
use anyhow::{Result, bail};

/// One way to play a scenario.
pub trait Engine: Sync {
    /// The id users pass to `--engine`.
    fn id(&self) -> &'static str;
    /// Play the scenario into a new run directory under `opts.out` and say what happened.
    fn run(&self, sc: &Scenario, opts: &RunOptions) -> Result<RunRecord>;
}

/// The real nginx, built from the `nginx-src` crate (or `--nginx`), with the lab around it.
pub struct RealNginx;

impl Engine for RealNginx {
    fn id(&self) -> &'static str {
        "nginx"
    }
    fn run(&self, sc: &Scenario, opts: &RunOptions) -> Result<RunRecord> {
        crate::runner::run(sc, opts)
    }
}

/// The deterministic model of nginx's upstream/resolve logic (`resolvelab-sim`).
pub struct Model;

impl Engine for Model {
    fn id(&self) -> &'static str {
        "sim"
    }
    fn run(&self, sc: &Scenario, opts: &RunOptions) -> Result<RunRecord> {
        crate::simrun::run(sc, opts)
    }
}

/// Every engine, by id.
pub const ENGINES: &[&dyn Engine] = &[&RealNginx, &Model];

/// The engine with this id.
pub fn by_name(id: &str) -> Result<&'static dyn Engine> {
    match ENGINES.iter().find(|e| e.id() == id) {
        Some(e) => Ok(*e),
        None => {
            let ids: Vec<&str> = ENGINES.iter().map(|e| e.id()).collect();
            bail!("no engine `{id}` (engines: {})", ids.join(", "))
        }
    }
}

/// The ids, for `--engine`'s possible values.
pub fn ids() -> Vec<&'static str> {
    ENGINES.iter().map(|e| e.id()).collect()
}
