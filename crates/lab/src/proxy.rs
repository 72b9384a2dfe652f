//! The proxy under test in a lab run: an nginx release or a third-party proxy (HAProxy, Envoy,
//! Caddy), behind one seam the runner drives — render its configuration into the run
//! directory, start it and wait until it listens, reload it, stop it, and leave its evidence in
//! the lab's shape (for a third-party proxy, its log turned into the lab's access log and
//! `proxy-state` events, `resolvelab_thirdparty::lab`). Another nginx-like proxy is one more
//! [`resolvelab_thirdparty::Kind`].

use crate::render::http_body_for;
use anyhow::Result;
use resolvelab_core::rundir::RunDir;
use resolvelab_core::supervise::Reloader;
use resolvelab_core::supervise::Supervisor;
use resolvelab_nginx::sysdns::SystemDns;
use resolvelab_nginx::{Instance, Nginx, conf};
use resolvelab_provision::Binary;
use resolvelab_scenario::Scenario;
use resolvelab_scenario::net::Net;
use resolvelab_thirdparty::{Kind, ProxyBinary};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
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
    /// nginx, restartable by the timeline, and what runs `nginx -t` on its configuration (a
    /// timeline's `nginx = "test"`).
    Nginx(Arc<NginxProc>, resolvelab_nginx::instance::Tester),
    Foreign(Kind, resolvelab_thirdparty::Instance),
}

/// How a start the timeline asked for went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Started {
    /// nginx listens again.
    Listening,
    /// nginx refused to start; its own words (its `[emerg]` line). It stays down.
    Refused(String),
    /// It was running already (a `start` step with nothing to start).
    Running,
}

/// The nginx under test, which the timeline may stop and start again (`nginx = "restart"`,
/// `"start"`): the instance now — none while a start failed — and what starts it again. The
/// master's pid and the count of restarts are atomics, so that the run's watch tells a restart
/// from a crash without waiting on the timeline's lock.
pub(crate) struct NginxProc {
    now: Mutex<Option<Instance>>,
    launcher: Launcher,
    master: AtomicU32,
    restarts: AtomicU32,
    reloads: Arc<AtomicU32>,
    nginx: Nginx,
    dir: PathBuf,
    conf: PathBuf,
    dns: Option<SystemDns>,
    sup: Arc<Supervisor>,
    listen: SocketAddr,
}

/// How long a stopping nginx has to finish its requests (SIGQUIT), and a start to listen.
const STOP_GRACE: Duration = Duration::from_secs(5);
const START_WAIT: Duration = Duration::from_secs(10);

impl NginxProc {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Instance>> {
        self.now.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The master's pid; 0 while nginx is down.
    pub(crate) fn master(&self) -> u32 {
        self.master.load(Ordering::SeqCst)
    }

    /// Starts asked for after the first (each replaces the master on purpose).
    pub(crate) fn restarts(&self) -> u32 {
        self.restarts.load(Ordering::SeqCst)
    }

    fn reloader(&self) -> Reloader {
        let pid = Some(self.master()).filter(|&p| p != 0);
        Reloader::new(pid, libc::SIGHUP, "nginx", self.reloads.clone())
    }

    /// Stop nginx gracefully and start it again on the same configuration.
    pub(crate) fn restart(&self) -> Result<Started> {
        let mut now = self.lock();
        // Counted before the master goes: the watch reads a master that exits after a change
        // of this count as a restart, not a crash.
        self.restarts.fetch_add(1, Ordering::SeqCst);
        self.master.store(0, Ordering::SeqCst);
        if let Some(i) = now.take() {
            i.stop(STOP_GRACE)?;
        }
        self.start_locked(&mut now)
    }

    /// Start nginx if it is down.
    pub(crate) fn start(&self) -> Result<Started> {
        let mut now = self.lock();
        if now.is_some() {
            return Ok(Started::Running);
        }
        self.restarts.fetch_add(1, Ordering::SeqCst);
        self.start_locked(&mut now)
    }

    fn start_locked(&self, now: &mut Option<Instance>) -> Result<Started> {
        let (nginx, dir, conf) = (self.nginx.clone(), self.dir.clone(), self.conf.clone());
        let (sup, dns) = (self.sup.clone(), self.dns.clone());
        let mut i = self
            .launcher
            .run(move || Instance::launch(&nginx, &dir, &conf, &sup, dns.as_ref()))??;
        match i.wait_listening(self.listen, START_WAIT) {
            Ok(()) => {
                self.master.store(i.pid().unwrap_or(0), Ordering::SeqCst);
                *now = Some(i);
                Ok(Started::Listening)
            }
            Err(e) => {
                // The start's own `[emerg]` is the error log's last one.
                let words = resolvelab_nginx::instance::last_emerg(&self.dir)
                    .unwrap_or_else(|| format!("{e:#}"));
                i.stop(STOP_GRACE)?;
                Ok(Started::Refused(words))
            }
        }
    }

    fn stop(&self) -> Result<()> {
        self.master.store(0, Ordering::SeqCst);
        match self.lock().take() {
            Some(i) => i.stop(STOP_GRACE),
            None => Ok(()),
        }
    }
}

/// A thread that lives as long as the run's nginx, which every restart forks from: a supervised
/// child gets `PR_SET_PDEATHSIG`, which fires when the *thread* that forked it ends — and the
/// timeline's steps run on tokio's blocking threads, which end after 10 s idle (a restarted
/// nginx died 10 s after its start until this).
struct Launcher {
    jobs: Mutex<std::sync::mpsc::Sender<Box<dyn FnOnce() + Send>>>,
}

impl Launcher {
    fn new() -> Result<Launcher> {
        let (tx, rx) = std::sync::mpsc::channel::<Box<dyn FnOnce() + Send>>();
        std::thread::Builder::new()
            .name("nginx-launcher".into())
            // Ends when the sender goes (the run's nginx is stopped and dropped).
            .spawn(move || rx.into_iter().for_each(|job| job()))?;
        Ok(Launcher {
            jobs: Mutex::new(tx),
        })
    }

    /// Run `f` on the launcher's thread and wait for its result.
    fn run<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> Result<T> {
        let (tx, rx) = std::sync::mpsc::channel();
        let job: Box<dyn FnOnce() + Send> = Box::new(move || {
            let _ = tx.send(f());
        });
        (self.jobs.lock().unwrap_or_else(|p| p.into_inner()))
            .send(job)
            .map_err(|_| anyhow::anyhow!("the nginx launcher thread is gone"))?;
        rx.recv()
            .map_err(|_| anyhow::anyhow!("the nginx launcher thread ended mid-start"))
    }
}

/// What the run's timeline and watch hold of a proxy: which master runs now, how often it was
/// reloaded or restarted on purpose (both replace processes), and the means to do either.
#[derive(Clone)]
pub(crate) enum Control {
    /// nginx, restartable.
    Nginx(Arc<NginxProc>),
    /// Another proxy: one master for the whole run (0: unknown), reloaded by signal.
    Fixed(u32, Reloader),
}

impl Control {
    /// The master's pid now; 0 while it is down or unknown.
    pub(crate) fn master(&self) -> u32 {
        match self {
            Control::Nginx(p) => p.master(),
            Control::Fixed(pid, _) => *pid,
        }
    }

    /// Reloads asked for so far.
    pub(crate) fn reloads(&self) -> u32 {
        match self {
            Control::Nginx(p) => p.reloads.load(Ordering::SeqCst),
            Control::Fixed(_, r) => r.count(),
        }
    }

    /// Restarts and starts asked for so far.
    pub(crate) fn restarts(&self) -> u32 {
        match self {
            Control::Nginx(p) => p.restarts(),
            Control::Fixed(..) => 0,
        }
    }

    /// Reload it (the master running now).
    pub(crate) fn reload(&self) -> Result<()> {
        match self {
            Control::Nginx(p) => p.reloader().reload().map_err(|e| {
                anyhow::anyhow!("{e:#} (a restart left it down: only a start brings it back)")
            }),
            Control::Fixed(_, r) => r.reload(),
        }
    }

    /// The nginx a restart or start acts on; none for another proxy.
    pub(crate) fn nginx(&self) -> Option<&NginxProc> {
        match self {
            Control::Nginx(p) => Some(p),
            Control::Fixed(..) => None,
        }
    }
}

impl Running {
    /// Render the proxy's configuration into the run directory and start it, listening.
    pub(crate) fn start(
        bin: &ProxyBin,
        sc: &Scenario,
        net: &Net,
        dir: &RunDir,
        sup: &Arc<Supervisor>,
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
                let mut i =
                    Instance::start_with(nginx, &dir.path, &conf_text, sup, system_dns.as_ref())?;
                tokio::task::block_in_place(|| i.wait_listening(net.nginx, START_WAIT))?;
                let tester = i.tester(nginx, system_dns.clone());
                let proc = NginxProc {
                    master: AtomicU32::new(i.pid().unwrap_or(0)),
                    restarts: AtomicU32::new(0),
                    reloads: Arc::new(AtomicU32::new(0)),
                    nginx: nginx.clone(),
                    dir: i.run_dir.clone(),
                    conf: i.conf.clone(),
                    dns: system_dns,
                    sup: sup.clone(),
                    listen: net.nginx,
                    now: Mutex::new(Some(i)),
                    launcher: Launcher::new()?,
                };
                return Ok(Running::Nginx(Arc::new(proc), tester));
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
        if let Running::Foreign(_, i) = &mut running {
            tokio::task::block_in_place(|| i.wait_listening(net.nginx, START_WAIT))?;
        }
        Ok(running)
    }

    /// What the timeline and the run's watch hold of it.
    pub(crate) fn control(&self) -> Control {
        match self {
            Running::Nginx(p, _) => Control::Nginx(p.clone()),
            Running::Foreign(_, i) => Control::Fixed(i.pid().unwrap_or(0), i.reloader()),
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
            Running::Nginx(p, _) => tokio::task::block_in_place(|| p.stop()),
            Running::Foreign(k, i) => {
                tokio::task::block_in_place(|| i.stop(grace))?;
                resolvelab_thirdparty::lab::evidence(k, dir)
            }
        }
    }
}
