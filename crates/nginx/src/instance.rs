//! A running nginx: config test, start in the foreground under a supervisor, readiness, reload,
//! graceful stop.

use crate::Nginx;
use anyhow::{Context, Result};
use resolvelab_core::supervise::{Master, Supervisor};
use resolvelab_core::sysdns::SystemDns;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// A running nginx master process (its workers are in the same supervised process group).
pub struct Instance {
    master: Master,
    /// The run directory (nginx's prefix).
    pub run_dir: PathBuf,
    /// The configuration file.
    pub conf: PathBuf,
}

/// Write `conf_text` to `<run_dir>/nginx.conf` and create the temp directories it uses.
pub fn write_conf(run_dir: &Path, conf_text: &str) -> Result<PathBuf> {
    for t in ["client_body", "proxy", "fastcgi", "uwsgi", "scgi"] {
        let d = run_dir.join("temp").join(t);
        std::fs::create_dir_all(&d).with_context(|| format!("cannot create {}", d.display()))?;
    }
    let conf = run_dir.join(resolvelab_core::evidence::file::NGINX_CONF);
    std::fs::write(&conf, conf_text).with_context(|| format!("cannot write {}", conf.display()))?;
    Ok(conf)
}

fn base_command(nginx: &Nginx, run_dir: &Path, conf: &Path, dns: Option<&SystemDns>) -> Command {
    base_command_logging(
        nginx,
        run_dir,
        conf,
        dns,
        &run_dir.join(resolvelab_core::evidence::file::ERROR_LOG),
    )
}

fn base_command_logging(
    nginx: &Nginx,
    run_dir: &Path,
    conf: &Path,
    dns: Option<&SystemDns>,
    startup_log: &Path,
) -> Command {
    let mut c = Command::new(&nginx.path);
    if let Some(d) = dns {
        d.apply(&mut c);
    }
    // -e: the startup error log before the config is read, so nothing is written outside the
    // run directory (the compiled-in default is <prefix>/logs/error.log).
    c.arg("-p")
        .arg(run_dir)
        .arg("-e")
        .arg(startup_log)
        .arg("-c")
        .arg(conf);
    c
}

/// Run `nginx -t` on a configuration; on failure the error carries nginx's own message verbatim.
pub fn test_conf(nginx: &Nginx, run_dir: &Path, conf: &Path) -> Result<()> {
    test_conf_with(nginx, run_dir, conf, None)
}

/// [`test_conf`] with the system resolver nginx will start with (names resolved at start are
/// resolved by the test too).
pub fn test_conf_with(
    nginx: &Nginx,
    run_dir: &Path,
    conf: &Path,
    dns: Option<&SystemDns>,
) -> Result<()> {
    run_test(nginx, base_command(nginx, run_dir, conf, dns))
        .map_err(|why| anyhow::anyhow!("nginx -t rejected {}: {why}", conf.display()))
}

/// Run `cmd` with `-t`: on refusal, nginx's own words (the `test failed` line left out).
fn run_test(nginx: &Nginx, mut cmd: Command) -> std::result::Result<(), String> {
    let out = cmd
        .arg("-t")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", nginx.path.display()))?;
    if out.status.success() {
        return Ok(());
    }
    let msg = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = msg
        .lines()
        .filter(|l| !l.contains("test failed") && !l.trim().is_empty())
        .collect();
    Err(lines.join(" | "))
}

/// `nginx -t` of a running instance's configuration, runnable from another task: would a start
/// succeed now? Its startup log is its own file (`nginx-test.log`), so that a refused test is
/// never read as the running nginx's error line.
#[derive(Debug, Clone)]
pub struct Tester {
    nginx: Nginx,
    run_dir: PathBuf,
    conf: PathBuf,
    dns: Option<SystemDns>,
}

impl Tester {
    /// Run `nginx -t`; on refusal, nginx's own words (the `test failed` line left out).
    pub fn test(&self) -> std::result::Result<(), String> {
        let log = self.run_dir.join("nginx-test.log");
        let cmd = base_command_logging(
            &self.nginx,
            &self.run_dir,
            &self.conf,
            self.dns.as_ref(),
            &log,
        );
        run_test(&self.nginx, cmd)
    }
}

impl Instance {
    /// What tests this instance's configuration as a fresh start would read it (`nginx` the
    /// binary it runs, `dns` the system resolver it started with).
    pub fn tester(&self, nginx: &Nginx, dns: Option<SystemDns>) -> Tester {
        Tester {
            nginx: nginx.clone(),
            run_dir: self.run_dir.clone(),
            conf: self.conf.clone(),
            dns,
        }
    }

    /// Write the configuration, test it, and start nginx in the foreground as a supervised child.
    pub fn start(
        nginx: &Nginx,
        run_dir: &Path,
        conf_text: &str,
        sup: &Supervisor,
    ) -> Result<Instance> {
        Instance::start_with(nginx, run_dir, conf_text, sup, None)
    }

    /// [`Instance::start`] with nginx's system resolver pointed at the lab (see [`SystemDns`]).
    pub fn start_with(
        nginx: &Nginx,
        run_dir: &Path,
        conf_text: &str,
        sup: &Supervisor,
        dns: Option<&SystemDns>,
    ) -> Result<Instance> {
        if crate::conf::resolve_line(conf_text).is_some() {
            nginx.info.require_resolve()?;
        }
        // nginx resolves relative -e/-c paths against -p: a relative prefix would double them.
        let run_dir = &std::path::absolute(run_dir)
            .with_context(|| format!("cannot make {} absolute", run_dir.display()))?;
        let conf = write_conf(run_dir, conf_text)?;
        test_conf_with(nginx, run_dir, &conf, dns)?;
        Instance::launch(nginx, run_dir, &conf, sup, dns)
    }

    /// Start nginx on a configuration already written, without testing it first: a restart,
    /// where nginx's own start is the test and its `[emerg]` line lands in the run's error log,
    /// as it does in production. Readiness is [`Instance::wait_listening`]'s (a start that
    /// fails exits there, with its last lines).
    pub fn launch(
        nginx: &Nginx,
        run_dir: &Path,
        conf: &Path,
        sup: &Supervisor,
        dns: Option<&SystemDns>,
    ) -> Result<Instance> {
        let stderr_path = run_dir.join("nginx.stderr");
        // Appended: a restart keeps what an earlier start said.
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&stderr_path)
            .with_context(|| format!("cannot create {}", stderr_path.display()))?;
        let mut cmd = base_command(nginx, run_dir, conf, dns);
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr);
        let child = sup
            .spawn(&mut cmd)
            .with_context(|| format!("cannot start {}", nginx.path.display()))?;
        Ok(Instance {
            master: Master::new(child, "nginx", libc::SIGHUP, libc::SIGQUIT),
            run_dir: run_dir.to_path_buf(),
            conf: conf.to_path_buf(),
        })
    }

    /// The master's pid.
    pub fn pid(&self) -> Option<u32> {
        self.master.pid()
    }

    /// Readiness: wait until `addr` accepts a TCP connection (or nginx exits, or the timeout).
    pub fn wait_listening(&mut self, addr: SocketAddr, timeout: Duration) -> Result<()> {
        let (dir, master) = (&self.run_dir, &mut self.master);
        master.wait_listening(addr, timeout, || last_error_lines(dir, 5))
    }

    /// Reload the configuration (SIGHUP to the master).
    pub fn reload(&self) -> Result<()> {
        self.reloader().reload()
    }

    /// A handle that reloads this nginx from another task (the run's timeline) and tells a
    /// watcher how many reloads were asked for (a reload replaces the workers).
    pub fn reloader(&self) -> Reloader {
        self.master.reloader()
    }

    /// Graceful stop: SIGQUIT (finish requests), then SIGTERM, then SIGKILL if it takes longer than
    /// `grace`.
    pub fn stop(mut self, grace: Duration) -> Result<()> {
        self.master.stop(grace)
    }
}

/// The last `[emerg]` line of the run's error log, from its level on (`[emerg] 12#0: host not
/// found in upstream …`): what a start that failed said.
pub fn last_emerg(run_dir: &Path) -> Option<String> {
    let text =
        std::fs::read_to_string(run_dir.join(resolvelab_core::evidence::file::ERROR_LOG)).ok()?;
    let line = text.lines().rev().find(|l| l.contains("[emerg]"))?;
    Some(line[line.find("[emerg]")?..].trim_end().to_string())
}

/// The last `n` lines nginx wrote to its stderr and error log, for a start that failed.
fn last_error_lines(run_dir: &Path, n: usize) -> String {
    let mut text = std::fs::read_to_string(run_dir.join("nginx.stderr")).unwrap_or_default();
    text.push_str(
        &std::fs::read_to_string(run_dir.join(resolvelab_core::evidence::file::ERROR_LOG))
            .unwrap_or_default(),
    );
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(n)..].join(" | ")
}

/// Reloads one nginx master (SIGHUP: it reads its configuration again, resolves its names
/// again, starts new workers and lets the old ones finish their requests).
pub use resolvelab_core::supervise::Reloader;
