//! Get, configure and supervise a **real HAProxy** for the resolvelab lab: HAProxy 2.6.12 from
//! Debian's `haproxy` package (with the two shared libraries a minimal Debian lacks), fetched on
//! first use with `apt-get download` and cached ([`pin`]), or any binary given with
//! `--engine-bin haproxy=PATH`. [`Instance`] runs it in master-worker mode in the foreground
//! under a supervisor, logging to its stderr (the run's `haproxy.log`), reloads it with SIGUSR2
//! and stops it softly.
//!
//! ```no_run
//! use resolvelab_core::supervise::Supervisor;
//! use resolvelab_haproxy::{Haproxy, Instance};
//! let h = Haproxy::obtain(None)?; // fetched on first use
//! let run = std::path::Path::new("/tmp/run1");
//! std::fs::create_dir_all(run)?;
//! let cfg = "defaults\n  mode http\n  timeout connect 1s\n  timeout client 1s\n  timeout server 1s\n\
//!            frontend fe\n  bind 127.0.0.1:18081\n  http-request return status 200\n";
//! let sup = Supervisor::new()?;
//! let mut hx = Instance::start(&h, run, cfg, &sup)?;
//! hx.wait_listening("127.0.0.1:18081".parse()?, std::time::Duration::from_secs(5))?;
//! hx.stop(std::time::Duration::from_secs(5))?;
//! # Ok::<(), anyhow::Error>(())
//! ```

use anyhow::{Context, Result, bail};
use resolvelab_core::supervise::{Master, Reloader, Supervisor};
use resolvelab_provision::{Deb, Pinned};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The run directory's HAProxy configuration.
pub const CONFIG: &str = "haproxy.cfg";
/// HAProxy's own log (its stderr: access lines and server/DNS state changes), byte for byte.
pub const LOG: &str = "haproxy.log";

/// HAProxy 2.6.12 as Debian 12 ships it, with `liblua5.3-0` and the OpenTracing wrapper it links
/// against (absent from a minimal system; unpacked beside it).
pub fn pin() -> Pinned {
    let deb = |package: &str, version: &str, sha256: &str| Deb {
        package: package.into(),
        version: version.into(),
        sha256: sha256.into(),
    };
    Pinned::debian(
        "haproxy-2.6.12",
        vec![
            deb(
                "haproxy",
                "2.6.12-1+deb12u3",
                "c8fa07420a78bfc47544b2a46e97151a8a12c3b4db62de610b2e37e78506f465",
            ),
            deb(
                "liblua5.3-0",
                "5.3.6-2",
                "576ad8ef2e9f6ad21f29f0c90dac17448deefee8f3912877c2a0911b77e5d3ca",
            ),
            deb(
                "libopentracing-c-wrapper0",
                "1.1.3-3+b1",
                "68013bf6296a776923622c871bed26bc7b6bfe5f84b0fa2707a06382d1db2692",
            ),
            deb(
                "libopentracing1",
                "1.6.0-4",
                "af62b62a99979253a79e3443f7dabe13f1f33bc2fc024f99039e3868a67f26f4",
            ),
        ],
        "usr/sbin/haproxy",
    )
    .checked_by(&["-v"], "HAProxy version 2.6.12")
}

/// An HAProxy binary the lab can run.
#[derive(Debug, Clone)]
pub struct Haproxy {
    /// The binary.
    pub path: PathBuf,
    /// The environment it runs with (`LD_LIBRARY_PATH` of its unpacked libraries).
    pub env: Vec<(String, String)>,
    /// What `haproxy -v` printed.
    pub version_text: String,
}

impl Haproxy {
    /// The explicit binary if one is given, else the pinned package, fetched now if needed.
    pub fn obtain(explicit: Option<&Path>) -> Result<Haproxy> {
        if let Some(p) = explicit {
            return Haproxy::at(p);
        }
        let got = resolvelab_provision::ensure(&pin(), &|line| eprintln!("{line}"))?;
        Ok(Haproxy {
            env: got.env(),
            path: got.path,
            version_text: got.version_text,
        })
    }

    /// Use the binary at `path`, checking that it runs and is HAProxy.
    pub fn at(path: &Path) -> Result<Haproxy> {
        if !path.exists() {
            bail!(
                "haproxy binary {} does not exist: fix --engine-bin haproxy=PATH, or leave it out to use the pinned Debian package",
                path.display()
            );
        }
        let out = Command::new(path)
            .arg("-v")
            .stdin(Stdio::null())
            .output()
            .with_context(|| format!("cannot run {} -v", path.display()))?;
        let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if !text.starts_with("HAProxy version") {
            bail!(
                "{} -v did not print an HAProxy version (it printed {:?})",
                path.display(),
                text.lines().next().unwrap_or("")
            );
        }
        Ok(Haproxy {
            path: path.to_path_buf(),
            env: Vec::new(),
            version_text: text,
        })
    }

    /// `2.6.12-1+deb12u3` from `HAProxy version 2.6.12-1+deb12u3 2025/10/03 - …`.
    pub fn version(&self) -> &str {
        self.version_text
            .split_whitespace()
            .nth(2)
            .unwrap_or("unknown")
    }

    /// sha256 of the binary, for `fingerprint.json`.
    pub fn sha256(&self) -> String {
        resolvelab_core::rundir::sha256_file(&self.path).unwrap_or_default()
    }

    fn command(&self) -> Command {
        let mut c = Command::new(&self.path);
        c.envs(self.env.iter().map(|(k, v)| (k, v)));
        c
    }
}

/// A running HAProxy master (`-W -db`: master-worker, foreground), its worker in the same
/// supervised process group.
pub struct Instance {
    master: Master,
    run_dir: PathBuf,
}

impl Instance {
    /// Write `<run_dir>/haproxy.cfg`, check it (`haproxy -c`: on failure the error carries
    /// HAProxy's own message), and start HAProxy with its stderr in `<run_dir>/haproxy.log`.
    pub fn start(
        h: &Haproxy,
        run_dir: &Path,
        cfg_text: &str,
        sup: &Supervisor,
    ) -> Result<Instance> {
        let run_dir = std::path::absolute(run_dir)
            .with_context(|| format!("cannot make {} absolute", run_dir.display()))?;
        let cfg = run_dir.join(CONFIG);
        std::fs::write(&cfg, cfg_text)
            .with_context(|| format!("cannot write {}", cfg.display()))?;
        let out = h
            .command()
            .arg("-c")
            .arg("-f")
            .arg(&cfg)
            .stdin(Stdio::null())
            .output()
            .with_context(|| format!("cannot run {}", h.path.display()))?;
        if !out.status.success() {
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            let lines: Vec<&str> = text
                .lines()
                .filter(|l| l.contains("ALERT") || l.contains("parsing"))
                .collect();
            bail!(
                "haproxy -c rejected {}: {}",
                cfg.display(),
                lines.join(" | ")
            );
        }
        let log = std::fs::File::create(run_dir.join(LOG))
            .with_context(|| format!("cannot create {}", run_dir.join(LOG).display()))?;
        let mut cmd = h.command();
        cmd.args(["-W", "-db", "-f"])
            .arg(&cfg)
            .current_dir(&run_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        let child = sup
            .spawn(&mut cmd)
            .with_context(|| format!("cannot start {}", h.path.display()))?;
        Ok(Instance {
            master: Master::new(child, "haproxy", libc::SIGUSR2, libc::SIGUSR1),
            run_dir,
        })
    }

    /// The master's pid.
    pub fn pid(&self) -> Option<u32> {
        self.master.pid()
    }

    /// Readiness: wait until `addr` accepts a TCP connection (or HAProxy exits, or the timeout).
    pub fn wait_listening(&mut self, addr: SocketAddr, timeout: Duration) -> Result<()> {
        let log = self.run_dir.join(LOG);
        self.master
            .wait_listening(addr, timeout, || last_lines(&log, 5))
    }

    /// Reloads by SIGUSR2 to the master: it reads its configuration again and starts a new
    /// worker; the old one finishes its connections.
    pub fn reloader(&self) -> Reloader {
        self.master.reloader()
    }

    /// Soft stop: SIGUSR1 (stop listening, finish connections), then SIGTERM, then SIGKILL if it
    /// takes longer than `grace`.
    pub fn stop(mut self, grace: Duration) -> Result<()> {
        self.master.stop(grace)
    }
}

/// The last `n` lines of HAProxy's log, for a start that failed.
fn last_lines(log: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(n)..].join(" | ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pin_names_every_package_and_the_version_it_checks() {
        let p = pin();
        assert_eq!(p.expect, "HAProxy version 2.6.12");
        assert_eq!(p.version_args, ["-v"]);
        match p.source {
            resolvelab_provision::Source::Debian { packages, member } => {
                assert_eq!(member, "usr/sbin/haproxy");
                assert_eq!(packages.len(), 4);
                assert!(packages.iter().all(|d| d.sha256.len() == 64));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_broken_path_is_one_clear_line() {
        let err = Haproxy::at(Path::new("/nonexistent/haproxy"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("does not exist") && err.contains("--engine-bin haproxy=PATH"));
        assert!(!err.contains('\n'));
        let err = Haproxy::at(Path::new("/bin/true")).unwrap_err().to_string();
        assert!(err.contains("did not print an HAProxy version"), "{err}");
    }
}
