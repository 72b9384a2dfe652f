//! The proxy under test in a lab run: an nginx release or a third-party proxy (HAProxy, Envoy,
//! Caddy), behind one seam the runner drives — render its configuration into the run
//! directory, start it and wait until it listens, reload it, stop it, and leave its evidence in
//! the lab's shape (for a third-party proxy, its log turned into the lab's access log and
//! `proxy-state` events, `resolvelab_thirdparty::lab`). Another nginx-like proxy is one more
//! [`resolvelab_thirdparty::Kind`].

use crate::render::http_body_for;
use anyhow::Result;
use resolvelab_core::rundir::RunDir;
use resolvelab_core::supervise::Supervisor;
use resolvelab_nginx::{Instance, Nginx, conf};
use resolvelab_provision::Binary;
use resolvelab_scenario::Scenario;
use resolvelab_scenario::net::Net;
use resolvelab_thirdparty::{Kind, ProxyBinary};
use std::time::Duration;

/// The proxy a real-process engine runs.
pub enum ProxyBin {
    /// An nginx release.
    Nginx(Nginx),
    /// A third-party proxy and its binary.
    Foreign(Kind, Binary),
}

impl ProxyBin {
    /// `nginx -V` / `haproxy -v` / `envoy --version` as it printed it (`fingerprint.json`).
    pub(crate) fn version_text(&self) -> &str {
        match self {
            ProxyBin::Nginx(n) => &n.info.raw,
            ProxyBin::Foreign(_, b) => &b.version_text,
        }
    }

    /// `nginx`, `haproxy`, …: the target of the proxy's own events.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            ProxyBin::Nginx(_) => "nginx",
            ProxyBin::Foreign(k, _) => k.id(),
        }
    }

    /// `nginx 1.28.3`, for progress lines.
    pub(crate) fn short(&self) -> String {
        match self {
            ProxyBin::Nginx(n) => format!("nginx {}", n.info.version),
            ProxyBin::Foreign(k, b) => format!("{} {}", k.title(), k.version(b)),
        }
    }

    /// The proxy's own log in the run directory (nginx's error log).
    pub(crate) fn log_file(&self) -> &'static str {
        match self {
            ProxyBin::Nginx(_) => resolvelab_core::evidence::file::ERROR_LOG,
            ProxyBin::Foreign(k, _) => k.log_file(),
        }
    }

    /// How often it asks the authority again, as configured: nginx's `valid` + 1 s, a
    /// third-party proxy's own period ([`resolvelab_thirdparty::lab::requery_period`]). Timeline events
    /// placed between queries, or waiting for one, count on it.
    pub(crate) fn requery_period(&self, sc: &Scenario) -> Result<Duration> {
        match self {
            ProxyBin::Nginx(_) => Ok(sc.requery_period()),
            ProxyBin::Foreign(k, _) => Ok(sc.proxy_timing(*k)?.period),
        }
    }

    /// It resolves a name inside the first request that needs it, not when it starts.
    pub(crate) fn looks_up_in_requests(&self) -> bool {
        matches!(self, ProxyBin::Foreign(Kind::Caddy, _))
    }

    pub(crate) fn sha256(&self) -> String {
        match self {
            ProxyBin::Nginx(n) => n.sha256(),
            ProxyBin::Foreign(_, b) => b.sha256(),
        }
    }

    /// What this proxy cannot play, refused before the run directory exists.
    pub(crate) fn refuse(&self, sc: &Scenario) -> Result<()> {
        match self {
            ProxyBin::Nginx(n) => {
                if sc
                    .nginx
                    .servers
                    .iter()
                    .any(|s| s.resolve && !s.host.starts_with('@'))
                {
                    n.info.require_resolve()?;
                }
                Ok(())
            }
            ProxyBin::Foreign(k, _) => resolvelab_thirdparty::lab::refuse(*k, sc),
        }
    }
}

/// Another proxy's configuration, checked to name only loopback addresses (`targets`).
fn foreign_config(k: Kind, sc: &Scenario, net: &Net) -> Result<String> {
    let text = resolvelab_thirdparty::lab::config(k, sc, net)?;
    crate::targets::text(&text)
        .map_err(|r| anyhow::anyhow!("{}: the rendered {k} configuration, {r}", sc.name))?;
    Ok(text)
}

/// The proxy under test, running.
pub(crate) enum Running {
    /// nginx, and what runs `nginx -t` on its configuration (a timeline's `nginx = "test"`).
    Nginx(Instance, resolvelab_nginx::instance::Tester),
    Foreign(Kind, resolvelab_thirdparty::Instance),
}

impl Running {
    /// Render the proxy's configuration into the run directory and start it, listening.
    pub(crate) fn start(
        bin: &ProxyBin,
        sc: &Scenario,
        net: &Net,
        dir: &RunDir,
        sup: &Supervisor,
    ) -> Result<Running> {
        let mut running = match bin {
            ProxyBin::Nginx(nginx) => {
                let conf_text = conf::lab_conf_with(
                    &dir.path,
                    &http_body_for(sc, net, Some(nginx.info.version))?,
                    &conf::LabConf {
                        workers: sc.nginx.workers,
                        ..conf::LabConf::default()
                    },
                );
                let system_dns = match net.dns.ip() {
                    std::net::IpAddr::V4(ip) if sc.resolves_at_start() => {
                        Some(resolvelab_nginx::sysdns::SystemDns::prepare(&dir.path, ip)?)
                    }
                    _ => None,
                };
                let i =
                    Instance::start_with(nginx, &dir.path, &conf_text, sup, system_dns.as_ref())?;
                let tester = i.tester(nginx, system_dns);
                Running::Nginx(i, tester)
            }
            ProxyBin::Foreign(k, b) => Running::Foreign(
                *k,
                resolvelab_thirdparty::Instance::start(
                    *k,
                    b,
                    &dir.path,
                    &foreign_config(*k, sc, net)?,
                    sc.nginx.workers,
                    sup,
                )?,
            ),
        };
        let wait = Duration::from_secs(10);
        tokio::task::block_in_place(|| match &mut running {
            Running::Nginx(i, _) => i.wait_listening(net.nginx, wait),
            Running::Foreign(_, i) => i.wait_listening(net.nginx, wait),
        })?;
        Ok(running)
    }

    pub(crate) fn pid(&self) -> Option<u32> {
        match self {
            Running::Nginx(i, _) => i.pid(),
            Running::Foreign(_, i) => i.pid(),
        }
    }

    pub(crate) fn reloader(&self) -> resolvelab_core::supervise::Reloader {
        match self {
            Running::Nginx(i, _) => i.reloader(),
            Running::Foreign(_, i) => i.reloader(),
        }
    }

    /// What runs `nginx -t` on its configuration; none for another proxy.
    pub(crate) fn tester(&self) -> Option<resolvelab_nginx::instance::Tester> {
        match self {
            Running::Nginx(_, t) => Some(t.clone()),
            Running::Foreign(..) => None,
        }
    }

    /// Stop it; a third-party proxy's log then becomes the lab's access log and events.
    pub(crate) fn stop(self, dir: &RunDir) -> Result<()> {
        let grace = Duration::from_secs(5);
        match self {
            Running::Nginx(i, _) => tokio::task::block_in_place(|| i.stop(grace)),
            Running::Foreign(k, i) => {
                tokio::task::block_in_place(|| i.stop(grace))?;
                resolvelab_thirdparty::lab::evidence(k, dir)
            }
        }
    }
}
