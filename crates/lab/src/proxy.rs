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
use resolvelab_core::sysdns::SystemDns;
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

/// The proxy under test, running: restartable by the timeline (`nginx = "restart"`,
/// `"start"`), and, for nginx, what runs `nginx -t` on its configuration (a timeline's
/// `nginx = "test"`).
pub(crate) struct Running {
    proc: Arc<ProxyProc>,
    tester: Option<resolvelab_nginx::instance::Tester>,
    foreign: Option<Kind>,
}

/// How a start the timeline asked for went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Started {
    /// The proxy listens again.
    Listening,
    /// The proxy refused to start; its own words (nginx's `[emerg]` line, HAProxy's
    /// `[ALERT]`s). It stays down.
    Refused(String),
    /// It was running already (a `start` step with nothing to start).
    Running,
}

/// What a start launches: the run's nginx on its configuration, or another proxy on its own.
enum Launch {
    Nginx {
        nginx: Nginx,
        conf: PathBuf,
    },
    Foreign {
        kind: Kind,
        bin: Binary,
        cfg: String,
        workers: u32,
    },
}

/// One start's processes.
enum Live {
    Nginx(Instance),
    Foreign(resolvelab_thirdparty::Instance),
}

impl Live {
    fn pid(&self) -> Option<u32> {
        match self {
            Live::Nginx(i) => i.pid(),
            Live::Foreign(i) => i.pid(),
        }
    }

    fn wait_listening(&mut self, addr: SocketAddr) -> Result<()> {
        match self {
            Live::Nginx(i) => i.wait_listening(addr, START_WAIT),
            Live::Foreign(i) => i.wait_listening(addr, START_WAIT),
        }
    }

    fn stop(self) -> Result<()> {
        match self {
            Live::Nginx(i) => i.stop(STOP_GRACE),
            Live::Foreign(i) => i.stop(STOP_GRACE),
        }
    }
}

/// The proxy under test, which the timeline may stop and start again: the processes now —
/// none while a start failed — and what starts them again. The master's pid and the count of
/// restarts are atomics, so that the run's watch tells a restart from a crash without waiting
/// on the timeline's lock.
pub(crate) struct ProxyProc {
    now: Mutex<Option<Live>>,
    launch: Launch,
    launcher: Launcher,
    master: AtomicU32,
    restarts: AtomicU32,
    reloads: Arc<AtomicU32>,
    /// `nginx`, `haproxy`: the proxy's name in errors; and its reload signal.
    what: &'static str,
    reload_signal: libc::c_int,
    dir: PathBuf,
    dns: Option<SystemDns>,
    sup: Arc<Supervisor>,
    listen: SocketAddr,
    /// The proxy whose state the scenario keeps across a reload or restart.
    keeps_state: Option<Kind>,
}

/// How long a stopping proxy has to finish its requests (its soft stop), and a start to listen.
const STOP_GRACE: Duration = Duration::from_secs(5);
const START_WAIT: Duration = Duration::from_secs(10);

impl ProxyProc {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Live>> {
        self.now.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The master's pid; 0 while the proxy is down.
    pub(crate) fn master(&self) -> u32 {
        self.master.load(Ordering::SeqCst)
    }

    /// `nginx`, `haproxy`, …: the proxy's name, the target of its events.
    pub(crate) fn name(&self) -> &'static str {
        self.what
    }

    /// Starts asked for after the first (each replaces the master on purpose).
    pub(crate) fn restarts(&self) -> u32 {
        self.restarts.load(Ordering::SeqCst)
    }

    fn reloader(&self) -> Reloader {
        let pid = Some(self.master()).filter(|&p| p != 0);
        Reloader::new(pid, self.reload_signal, self.what, self.reloads.clone())
    }

    /// Stop the proxy gracefully and start it again on the same configuration.
    pub(crate) fn restart(&self) -> Result<Started> {
        let mut now = self.lock();
        // Counted before the master goes: the watch reads a master that exits after a change
        // of this count as a restart, not a crash.
        self.restarts.fetch_add(1, Ordering::SeqCst);
        self.master.store(0, Ordering::SeqCst);
        if let Some(i) = now.take() {
            i.stop()?;
        }
        self.start_locked(&mut now)
    }

    /// Start the proxy if it is down.
    pub(crate) fn start(&self) -> Result<Started> {
        let mut now = self.lock();
        if now.is_some() {
            return Ok(Started::Running);
        }
        self.restarts.fetch_add(1, Ordering::SeqCst);
        self.start_locked(&mut now)
    }

    fn start_locked(&self, now: &mut Option<Live>) -> Result<Started> {
        let (dir, sup, dns) = (self.dir.clone(), self.sup.clone(), self.dns.clone());
        let mut live = match &self.launch {
            Launch::Nginx { nginx, conf } => {
                let (nginx, conf) = (nginx.clone(), conf.clone());
                Live::Nginx(
                    self.launcher
                        .run(move || Instance::launch(&nginx, &dir, &conf, &sup, dns.as_ref()))??,
                )
            }
            Launch::Foreign {
                kind,
                bin,
                cfg,
                workers,
            } => {
                let (kind, bin, cfg, workers) = (*kind, bin.clone(), cfg.clone(), *workers);
                let started = self.launcher.run(move || {
                    resolvelab_thirdparty::Instance::start_with(
                        kind,
                        &bin,
                        &dir,
                        &cfg,
                        workers,
                        &sup,
                        dns.as_ref(),
                    )
                })?;
                match started {
                    Ok(i) => Live::Foreign(i),
                    // Its configuration check failed: the proxy's own words, one line.
                    Err(e) => return Ok(Started::Refused(format!("{e:#}"))),
                }
            }
        };
        match live.wait_listening(self.listen) {
            Ok(()) => {
                self.master.store(live.pid().unwrap_or(0), Ordering::SeqCst);
                *now = Some(live);
                Ok(Started::Listening)
            }
            Err(e) => {
                // nginx's start's own `[emerg]` is the error log's last one.
                let emerg = match &self.launch {
                    Launch::Nginx { .. } => resolvelab_nginx::instance::last_emerg(&self.dir),
                    Launch::Foreign { .. } => None,
                };
                live.stop()?;
                Ok(Started::Refused(emerg.unwrap_or_else(|| format!("{e:#}"))))
            }
        }
    }

    fn stop(&self) -> Result<()> {
        self.master.store(0, Ordering::SeqCst);
        match self.lock().take() {
            Some(i) => i.stop(),
            None => Ok(()),
        }
    }
}

/// A thread that lives as long as the run's proxy, which every restart forks from: a supervised
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
            .name("proxy-launcher".into())
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
pub(crate) struct Control(Arc<ProxyProc>);

impl Control {
    /// The master's pid now; 0 while it is down.
    pub(crate) fn master(&self) -> u32 {
        self.0.master()
    }

    /// Reloads asked for so far.
    pub(crate) fn reloads(&self) -> u32 {
        self.0.reloads.load(Ordering::SeqCst)
    }

    /// Restarts and starts asked for so far.
    pub(crate) fn restarts(&self) -> u32 {
        self.0.restarts()
    }

    /// Reload it (the master running now).
    pub(crate) fn reload(&self) -> Result<()> {
        self.0.reloader().reload().map_err(|e| {
            anyhow::anyhow!("{e:#} (a restart left it down: only a start brings it back)")
        })
    }

    /// Before a reload or restart, the running proxy's state saved where the next process
    /// reads it, when the scenario keeps it (`[haproxy] server_state`): what was saved, or why
    /// not — a failure does not stop the reload, as it would not stop an operator's script.
    pub(crate) fn save_state(&self) -> Option<Result<String>> {
        let k = self.0.keeps_state?;
        let dir = self.0.dir.clone();
        Some(resolvelab_thirdparty::proxy(k).save_state(&dir))
    }

    /// What a restart or start acts on.
    pub(crate) fn proc(&self) -> &ProxyProc {
        &self.0
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
        // Names resolved at start go to the run's authority, through the proxy's own
        // /etc/resolv.conf.
        let dns = match net.dns.ip() {
            std::net::IpAddr::V4(ip) if sc.resolves_at_start() => {
                Some(SystemDns::prepare(&dir.path, ip)?)
            }
            _ => None,
        };
        let (live, launch, tester, foreign) = match bin {
            ProxyBin::Nginx(nginx) => {
                let conf_text = conf::lab_conf_with(
                    &dir.path,
                    &http_body_for(sc, net, Some(nginx.info.version))?,
                    &conf::LabConf {
                        workers: sc.nginx.workers,
                        ..conf::LabConf::default()
                    },
                );
                let i = Instance::start_with(nginx, &dir.path, &conf_text, sup, dns.as_ref())?;
                let tester = i.tester(nginx, dns.clone());
                let launch = Launch::Nginx {
                    nginx: nginx.clone(),
                    conf: i.conf.clone(),
                };
                (Live::Nginx(i), launch, Some(tester), None)
            }
            ProxyBin::Foreign(k, b) => {
                let cfg = foreign_config(*k, sc, net)?;
                let workers = sc.nginx.workers;
                let i = resolvelab_thirdparty::Instance::start_with(
                    *k,
                    b,
                    &dir.path,
                    &cfg,
                    workers,
                    sup,
                    dns.as_ref(),
                )?;
                let launch = Launch::Foreign {
                    kind: *k,
                    bin: b.clone(),
                    cfg,
                    workers,
                };
                (Live::Foreign(i), launch, None, Some(*k))
            }
        };
        let mut live = live;
        tokio::task::block_in_place(|| live.wait_listening(net.nginx))?;
        let reload_signal = match foreign {
            Some(k) => resolvelab_thirdparty::proxy(k).signals().0,
            None => libc::SIGHUP,
        };
        let proc = ProxyProc {
            master: AtomicU32::new(live.pid().unwrap_or(0)),
            now: Mutex::new(Some(live)),
            launch,
            launcher: Launcher::new()?,
            restarts: AtomicU32::new(0),
            reloads: Arc::new(AtomicU32::new(0)),
            what: bin.kind(),
            reload_signal,
            dir: std::path::absolute(&dir.path)?,
            dns,
            sup: sup.clone(),
            listen: net.nginx,
            keeps_state: foreign.filter(|k| resolvelab_thirdparty::proxy(*k).keeps_state(sc)),
        };
        Ok(Running {
            proc: Arc::new(proc),
            tester,
            foreign,
        })
    }

    /// What the timeline and the run's watch hold of it.
    pub(crate) fn control(&self) -> Control {
        Control(self.proc.clone())
    }

    /// What runs `nginx -t` on its configuration; none for another proxy.
    pub(crate) fn tester(&self) -> Option<resolvelab_nginx::instance::Tester> {
        self.tester.clone()
    }

    /// Stop it; a third-party proxy's log then becomes the lab's access log and events.
    pub(crate) fn stop(self, dir: &RunDir) -> Result<()> {
        tokio::task::block_in_place(|| self.proc.stop())?;
        match self.foreign {
            Some(k) => resolvelab_thirdparty::lab::evidence(k, dir),
            None => Ok(()),
        }
    }
}
