//! A private network namespace for a run (`[host] netns = true`).
//!
//! Some failures depend on kernel settings the lab must not change on the host: port exhaustion
//! needs `net.ipv4.tcp_tw_reuse = 0` (the default `2` lets loopback reuse TIME_WAIT ports) and a
//! narrow `ip_local_port_range`. Both are per network namespace, so the run moves into a fresh
//! one — its own loopback, nothing else reachable — sets them there, and comes back when done.
//! The host's settings are never written.
//!
//! Namespaces belong to threads: [`enter`] must run on the thread that then builds the run's
//! runtime and spawns nginx (they inherit it), and the returned guard restores the thread's
//! original namespace when dropped.

use anyhow::{Context, Result, bail};
use resolvelab_scenario::format::check_sysctl_key;
use std::collections::BTreeMap;
use std::fs::File;
use std::os::fd::AsRawFd;

/// Back to the original namespace on drop.
pub struct NetnsGuard {
    original: File,
}

impl Drop for NetnsGuard {
    fn drop(&mut self) {
        // SAFETY: setns on a namespace fd we opened; failure leaves the thread where it is.
        let rc = unsafe { libc::setns(self.original.as_raw_fd(), libc::CLONE_NEWNET) };
        if rc != 0 {
            resolvelab_core::progress::line(format!(
                "warning: could not return to the original network namespace: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
}

/// Move this thread into a fresh network namespace, bring its loopback up and apply `sysctl`.
pub fn enter(sysctl: &BTreeMap<String, String>) -> Result<NetnsGuard> {
    for k in sysctl.keys() {
        check_sysctl_key(k).map_err(anyhow::Error::msg)?;
    }
    let original = File::open("/proc/thread-self/ns/net")
        .context("cannot open /proc/thread-self/ns/net (is /proc mounted?)")?;
    // SAFETY: plain syscall; affects only the calling thread.
    if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
        let e = std::io::Error::last_os_error();
        bail!(
            "this scenario runs in its own network namespace ([host] netns = true), which needs root (CAP_SYS_ADMIN): unshare(CLONE_NEWNET): {e}"
        );
    }
    let guard = NetnsGuard { original };
    loopback_up().context("bringing up `lo` in the run's network namespace")?;
    for (k, v) in sysctl {
        let path = format!("/proc/sys/{}", k.replace('.', "/"));
        std::fs::write(&path, format!("{v}\n"))
            .with_context(|| format!("sysctl {k} = {v} (writing {path})"))?;
    }
    Ok(guard)
}

/// The current value of a sysctl as the kernel prints it (whitespace-normalised).
pub fn read_sysctl(key: &str) -> Result<String> {
    let path = format!("/proc/sys/{}", key.replace('.', "/"));
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    Ok(text.split_whitespace().collect::<Vec<_>>().join(" "))
}

fn loopback_up() -> Result<()> {
    // SAFETY: a datagram socket only to carry the interface ioctls; closed below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    // SAFETY: ifreq is plain data; the name is NUL-terminated within IFNAMSIZ.
    let r = unsafe {
        let mut ifr: libc::ifreq = std::mem::zeroed();
        for (d, s) in ifr.ifr_name.iter_mut().zip(b"lo\0") {
            *d = *s as libc::c_char;
        }
        let mut rc = libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut ifr);
        if rc == 0 {
            ifr.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
            rc = libc::ioctl(fd, libc::SIOCSIFFLAGS, &ifr);
        }
        if rc == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    };
    // SAFETY: fd is ours.
    unsafe { libc::close(fd) };
    Ok(r?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_namespaced_network_settings() {
        assert!(check_sysctl_key("net.ipv4.tcp_tw_reuse").is_ok());
        assert!(check_sysctl_key("net.ipv4.ip_local_port_range").is_ok());
        assert!(check_sysctl_key("kernel.pid_max").is_err());
        assert!(check_sysctl_key("net.ipv4.../../kernel/x").is_err());
        assert!(check_sysctl_key("vm.swappiness").is_err());
    }

    /// Inside a private namespace the setting changes there and not on the host. Without root
    /// the test is skipped (a failure under `CI=true`); as root every error of `enter` fails it.
    #[test]
    fn settings_stay_inside_the_namespace() {
        if !resolvelab_core::testing::is_root() {
            resolvelab_core::testing::missing_prerequisite(
                "netns: creating a network namespace needs root",
            );
            return;
        }
        let key = "net.ipv4.ip_local_port_range";
        let host = read_sysctl(key).unwrap();
        // A thread of its own: the namespace follows the thread.
        let (v, connected, after) = std::thread::spawn(move || {
            let sys = BTreeMap::from([(key.to_string(), "40000 40099".to_string())]);
            let g = enter(&sys).expect("enter() as root");
            let v = read_sysctl(key).unwrap();
            // Loopback is up: something can listen and be reached.
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let c = std::net::TcpStream::connect(l.local_addr().unwrap());
            drop(g);
            (v, c.is_ok(), read_sysctl(key).unwrap())
        })
        .join()
        .unwrap();
        assert_eq!(v, "40000 40099");
        assert!(connected, "loopback is up inside the namespace");
        assert_eq!(after, host, "back in the host namespace");
        assert_eq!(read_sysctl(key).unwrap(), host, "host untouched");
    }
}
