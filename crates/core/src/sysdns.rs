//! The system resolver of one proxy under test, pointed at the lab's authority.
//!
//! nginx resolves a name that is neither a `resolve` server nor a variable `proxy_pass` once,
//! when it reads its configuration (at start and at each reload), with `getaddrinfo` — the
//! system resolver, which reads `/etc/resolv.conf`; HAProxy does the same for a server's
//! `init-addr libc` (its default). To make those lookups reach the run's own authority, and
//! nothing else, the proxy is started in a private mount namespace where
//! `/etc/resolv.conf` names the authority and `/etc/nsswitch.conf` says `hosts: files dns`
//! (no mDNS, no systemd-resolved, which could ask the host's network); `nscd`'s socket
//! directory, when there is one, is covered by an empty one so that no cache answers instead.
//! The host's files are untouched: the mounts exist only in the proxy's namespace, and end with it.
//!
//! ```no_run
//! # fn main() -> anyhow::Result<()> {
//! use resolvelab_core::sysdns::SystemDns;
//! let dns = SystemDns::prepare(std::path::Path::new("runs/x"), "127.0.9.53".parse()?)?;
//! let mut cmd = std::process::Command::new("nginx");
//! dns.apply(&mut cmd); // nginx's getaddrinfo now asks 127.0.9.53:53
//! # Ok(()) }
//! ```

use anyhow::{Context, Result, bail};
use std::ffi::CString;
use std::net::Ipv4Addr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

/// Files to bind over the host's, inside the proxy's own mount namespace.
#[derive(Debug, Clone)]
pub struct SystemDns {
    /// (source in the run directory, target under /etc or /run).
    binds: Vec<(CString, CString)>,
}

/// Where glibc's name service cache daemon listens; covered when present.
const NSCD_DIRS: [&str; 2] = ["/run/nscd", "/var/run/nscd"];

impl SystemDns {
    /// Write `<run_dir>/etc/resolv.conf` (naming `server`, port 53: resolv.conf has no port)
    /// and `<run_dir>/etc/nsswitch.conf`. Needs root to apply (a mount namespace).
    pub fn prepare(run_dir: &Path, server: Ipv4Addr) -> Result<SystemDns> {
        if !server.is_loopback() {
            bail!("the lab's system resolver must be a loopback address, not {server}");
        }
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            bail!(
                "this scenario has the proxy resolve a name at start (a server line without `resolve`, route = \"direct\", or HAProxy's init-addr libc): the lab points the proxy's /etc/resolv.conf at its authority in a private mount namespace, which needs root"
            );
        }
        let etc = run_dir.join("etc");
        std::fs::create_dir_all(etc.join("nscd"))
            .with_context(|| format!("cannot create {}", etc.display()))?;
        let resolv = etc.join("resolv.conf");
        // One try, one second: a lookup the authority does not answer fails the way a dead
        // nameserver does, without glibc's 5 s × 2 default holding nginx's start.
        std::fs::write(
            &resolv,
            format!("# resolvelab: the run's authority\nnameserver {server}\noptions timeout:1 attempts:1\n"),
        )
        .with_context(|| format!("cannot write {}", resolv.display()))?;
        let nss = etc.join("nsswitch.conf");
        std::fs::write(&nss, "# resolvelab\nhosts: files dns\n")
            .with_context(|| format!("cannot write {}", nss.display()))?;
        let mut binds = vec![
            (path_c(&resolv)?, c("/etc/resolv.conf")?),
            (path_c(&nss)?, c("/etc/nsswitch.conf")?),
        ];
        for d in NSCD_DIRS {
            if Path::new(d).is_dir() {
                binds.push((path_c(&etc.join("nscd"))?, c(d)?));
            }
        }
        Ok(SystemDns { binds })
    }

    /// Start `cmd` in a private mount namespace with the files bound over the host's.
    pub fn apply(&self, cmd: &mut Command) {
        let binds = self.binds.clone();
        // SAFETY: between fork and exec only async-signal-safe calls (unshare, mount) on
        // strings built before the fork.
        unsafe {
            cmd.pre_exec(move || {
                if libc::unshare(libc::CLONE_NEWNS) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // Our mounts must not propagate back to the host's namespace.
                let root = c"/";
                let flags = libc::MS_REC | libc::MS_PRIVATE;
                if libc::mount(
                    std::ptr::null(),
                    root.as_ptr(),
                    std::ptr::null(),
                    flags,
                    std::ptr::null(),
                ) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                for (src, dst) in &binds {
                    if libc::mount(
                        src.as_ptr(),
                        dst.as_ptr(),
                        std::ptr::null(),
                        libc::MS_BIND,
                        std::ptr::null(),
                    ) != 0
                    {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
    }
}

fn c(s: &str) -> Result<CString> {
    CString::new(s).context("a path with a NUL byte")
}

fn path_c(p: &Path) -> Result<CString> {
    let abs = std::path::absolute(p).with_context(|| format!("cannot resolve {}", p.display()))?;
    CString::new(abs.as_os_str().as_bytes()).context("a path with a NUL byte")
}
