//! The proxy under test in a lab run: an nginx release or HAProxy, behind one seam the runner
//! drives — render its configuration into the run directory, start it and wait until it
//! listens, reload it, stop it, and leave its evidence in the lab's shape (for HAProxy, its log
//! turned into the lab's access log and `proxy-state` events). Another proxy is one more arm
//! of [`ProxyBin`] and [`Running`].

use crate::Scenario;
use crate::render::{Net, http_body};
use anyhow::{Context, Result};
use resolvelab_core::rundir::RunDir;
use resolvelab_core::supervise::Supervisor;
use resolvelab_nginx::{Instance, Nginx, conf};
use std::time::Duration;

/// The proxy a real-process engine runs.
pub enum ProxyBin {
    /// An nginx release.
    Nginx(Nginx),
    /// HAProxy.
    Haproxy(resolvelab_haproxy::Haproxy),
}

impl ProxyBin {
    /// `nginx -V` / `haproxy -v` as it printed it (`fingerprint.json`).
    pub(crate) fn version_text(&self) -> &str {
        match self {
            ProxyBin::Nginx(n) => &n.info.raw,
            ProxyBin::Haproxy(h) => &h.version_text,
        }
    }

    /// `nginx` or `haproxy`: the target of the proxy's own events.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            ProxyBin::Nginx(_) => "nginx",
            ProxyBin::Haproxy(_) => "haproxy",
        }
    }

    /// `nginx 1.28.3`, for progress lines.
    pub(crate) fn short(&self) -> String {
        match self {
            ProxyBin::Nginx(n) => format!("nginx {}", n.info.version),
            ProxyBin::Haproxy(h) => format!("HAProxy {}", h.version()),
        }
    }

    pub(crate) fn sha256(&self) -> String {
        match self {
            ProxyBin::Nginx(n) => n.sha256(),
            ProxyBin::Haproxy(h) => h.sha256(),
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
            ProxyBin::Haproxy(_) => crate::haproxy::refuse_unmodelled(sc),
        }
    }
}

/// The proxy under test, running.
pub(crate) enum Running {
    Nginx(Instance),
    Haproxy(resolvelab_haproxy::Instance),
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
                    &http_body(sc, net)?,
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
                Running::Nginx(Instance::start_with(
                    nginx,
                    &dir.path,
                    &conf_text,
                    sup,
                    system_dns.as_ref(),
                )?)
            }
            ProxyBin::Haproxy(h) => Running::Haproxy(resolvelab_haproxy::Instance::start(
                h,
                &dir.path,
                &crate::haproxy::config(sc, net)?,
                sup,
            )?),
        };
        let wait = Duration::from_secs(10);
        tokio::task::block_in_place(|| match &mut running {
            Running::Nginx(i) => i.wait_listening(net.nginx, wait),
            Running::Haproxy(i) => i.wait_listening(net.nginx, wait),
        })?;
        Ok(running)
    }

    pub(crate) fn pid(&self) -> Option<u32> {
        match self {
            Running::Nginx(i) => i.pid(),
            Running::Haproxy(i) => i.pid(),
        }
    }

    pub(crate) fn reloader(&self) -> resolvelab_core::supervise::Reloader {
        match self {
            Running::Nginx(i) => i.reloader(),
            Running::Haproxy(i) => i.reloader(),
        }
    }

    /// Stop it; HAProxy's log then becomes the lab's access log, its state lines events.
    pub(crate) fn stop(self, dir: &RunDir) -> Result<()> {
        let grace = Duration::from_secs(5);
        match self {
            Running::Nginx(i) => tokio::task::block_in_place(|| i.stop(grace)),
            Running::Haproxy(i) => {
                tokio::task::block_in_place(|| i.stop(grace))?;
                haproxy_evidence(dir)
            }
        }
    }
}

/// `haproxy.log` → `access.log` in the lab format, and its timestamped state lines (a server's
/// address changed, a server put in maintenance) into `events.jsonl` in time order.
fn haproxy_evidence(dir: &RunDir) -> Result<()> {
    use resolvelab_core::evidence::{Event, event_kind, file};
    let got = resolvelab_history::haproxy::to_lab(
        &dir.file(resolvelab_haproxy::LOG),
        &dir.file(file::ACCESS_LOG),
    )?;
    let path = dir.file(file::EVENTS);
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let mut lines = text.lines();
    let header = lines.next().unwrap_or_default().to_string();
    let mut all: Vec<(i64, String)> = lines
        .map(|l| {
            let t = serde_json::from_str::<Event>(l).map_or(0, |e| e.t_us);
            (t, l.to_string())
        })
        .collect();
    for (t_us, message) in got.states {
        let e = Event {
            note: Some(message),
            ..Event::new(t_us, event_kind::PROXY_STATE, "haproxy")
        };
        all.push((t_us, serde_json::to_string(&e)?));
    }
    all.sort_by_key(|(t, _)| *t);
    let mut out = header;
    out.push('\n');
    for (_, l) in all {
        out.push_str(&l);
        out.push('\n');
    }
    resolvelab_core::rundir::write_atomic(&path, out.as_bytes())?;
    Ok(())
}
