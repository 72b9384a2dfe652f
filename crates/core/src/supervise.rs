//! Child processes that never outlive the tool.
//!
//! A [`Supervisor`] forks a tiny *watchdog* first. The watchdog becomes the leader of a new process
//! group, and every child spawned through the supervisor joins that group (nginx's workers inherit
//! it from the master). The watchdog holds the read end of a pipe whose write end only the tool
//! holds (close-on-exec, so no child inherits it). However the tool ends — normal exit, error,
//! Ctrl-C, SIGTERM, a panic or SIGKILL — the kernel closes the write end, the watchdog's `read`
//! returns 0 and it kills the whole group, itself included. Direct children also get
//! `PR_SET_PDEATHSIG(SIGKILL)` as a second line of defence.
//!
//! ```no_run
//! use resolvelab_core::supervise::Supervisor;
//! let sup = Supervisor::new().unwrap();
//! let mut cmd = std::process::Command::new("sleep");
//! cmd.arg("60");
//! let child = sup.spawn(&mut cmd).unwrap();
//! // ... when `sup` is dropped (or the tool dies), `sleep` is killed.
//! # drop(child);
//! ```

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// Set by the binary's Ctrl-C / SIGTERM / SIGHUP handlers (an atomic store: async-signal-safe):
/// long work — a lab run, `watch` — polls it and stops cleanly, leaving complete evidence.
pub static INTERRUPTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Owner of a process group whose members die with the tool.
pub struct Supervisor {
    watchdog: libc::pid_t,
    // Closing this (on drop or on the tool's death) tells the watchdog to kill the group.
    lifeline: Option<OwnedFd>,
}

impl Supervisor {
    /// Fork the watchdog and create the process group.
    pub fn new() -> io::Result<Supervisor> {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: pipe2 writes two fds into the array.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let (rd, wr) = (fds[0], fds[1]);
        // SAFETY: after fork the child only calls async-signal-safe functions (close, setpgid,
        // read, kill, _exit), which is what POSIX allows in a multi-threaded parent.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            let e = io::Error::last_os_error();
            unsafe {
                libc::close(rd);
                libc::close(wr);
            }
            return Err(e);
        }
        if pid == 0 {
            unsafe {
                libc::close(wr);
                // Keep only the lifeline: a copy of a listening socket here would keep it
                // accepting after the lab closes it (a backend's `refuse` fault).
                close_all_but(rd);
                libc::setpgid(0, 0);
                let mut buf = [0u8; 16];
                loop {
                    let n = libc::read(rd, buf.as_mut_ptr().cast(), buf.len());
                    if n == 0 || (n < 0 && *libc::__errno_location() != libc::EINTR) {
                        break;
                    }
                }
                // The group id is our pid: this kills every child of the run, then us.
                libc::kill(-libc::getpid(), libc::SIGKILL);
                libc::_exit(0);
            }
        }
        // Parent: also set the group from this side to avoid racing the child's setpgid.
        unsafe {
            libc::setpgid(pid, pid);
            libc::close(rd);
        }
        Ok(Supervisor {
            watchdog: pid,
            // SAFETY: `wr` is a fresh fd we own.
            lifeline: Some(unsafe { OwnedFd::from_raw_fd(wr) }),
        })
    }

    /// The process group every supervised child belongs to.
    pub fn pgid(&self) -> libc::pid_t {
        self.watchdog
    }

    /// Prepare `cmd` so that the child joins the group and dies with its parent.
    pub fn adopt<'a>(&self, cmd: &'a mut Command) -> &'a mut Command {
        cmd.process_group(self.watchdog);
        // SAFETY: prctl is async-signal-safe.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        cmd
    }

    /// Spawn `cmd` as a supervised child.
    pub fn spawn(&self, cmd: &mut Command) -> io::Result<Child> {
        self.adopt(cmd).spawn()
    }

    /// Is any process of the group (other than the watchdog) still alive? Best effort, via /proc.
    pub fn members(&self) -> Vec<libc::pid_t> {
        group_members(self.watchdog)
            .into_iter()
            .filter(|&p| p != self.watchdog)
            .collect()
    }

    /// Send SIGTERM to every member, wait up to `grace` for them to go, then SIGKILL the group.
    pub fn shutdown(&mut self, grace: Duration) {
        let members = self.members();
        for &p in &members {
            unsafe { libc::kill(p, libc::SIGTERM) };
        }
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline && !self.members().is_empty() {
            std::thread::sleep(Duration::from_millis(10));
        }
        self.kill_all();
    }

    fn kill_all(&mut self) {
        if let Some(fd) = self.lifeline.take() {
            drop(fd);
        }
        unsafe {
            libc::kill(-self.watchdog, libc::SIGKILL);
            let mut status = 0;
            libc::waitpid(self.watchdog, &mut status, 0);
        }
    }
}

/// Close every descriptor of this (forked) process but `keep`, with async-signal-safe calls.
unsafe fn close_all_but(keep: libc::c_int) {
    let keep = keep as libc::c_uint;
    // SAFETY: close_range and close only close descriptors of this process.
    unsafe {
        let below = keep == 0 || libc::syscall(libc::SYS_close_range, 0, keep - 1, 0) == 0;
        let above = libc::syscall(libc::SYS_close_range, keep + 1, libc::c_uint::MAX, 0) == 0;
        if !(below && above) {
            // Kernels before 5.9: close one by one up to the descriptor limit.
            let mut lim = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            let max = if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 {
                lim.rlim_cur.min(1 << 20) as libc::c_int
            } else {
                1024
            };
            for fd in (0..max).filter(|&fd| fd != keep as libc::c_int) {
                libc::close(fd);
            }
        }
    }
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        if self.lifeline.is_some() {
            self.kill_all();
        }
    }
}

impl AsRawFd for Supervisor {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.lifeline.as_ref().map_or(-1, |f| f.as_raw_fd())
    }
}

/// Processes whose process group is `pgid`, read from `/proc/<pid>/stat` (zombies excluded).
pub fn group_members(pgid: libc::pid_t) -> Vec<libc::pid_t> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in rd.flatten() {
        let Some(pid) = e
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<libc::pid_t>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // Fields after the command name (which is in parentheses and may contain spaces).
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        // f[0] = state, f[1] = ppid, f[2] = pgrp
        if f.len() > 2 && f[0] != "Z" && f[2].parse::<libc::pid_t>().ok() == Some(pgid) {
            out.push(pid);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_watchdog_keeps_no_socket_of_the_tool() {
        // A listener open when the watchdog is forked must close when the tool closes it: a
        // copy in the watchdog would keep completing handshakes (a `refuse` fault that hangs).
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let sup = Supervisor::new().unwrap();
        drop(l);
        let fds = || std::fs::read_dir(format!("/proc/{}/fd", sup.pgid())).map(|d| d.count());
        let deadline = Instant::now() + Duration::from_secs(5);
        while fds().unwrap_or(0) != 1 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(fds().unwrap(), 1, "the watchdog holds only its lifeline");
        let e = std::net::TcpStream::connect(addr).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused);
    }

    #[test]
    fn children_die_with_the_supervisor() {
        let sup = Supervisor::new().unwrap();
        let pgid = sup.pgid();
        let mut c = sup
            .spawn(Command::new("sh").args(["-c", "sleep 60 & sleep 60"]))
            .unwrap();
        // Wait (bounded) until both sleeps are in the group.
        let deadline = Instant::now() + Duration::from_secs(5);
        while group_members(pgid).len() < 3 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(
            group_members(pgid).len() >= 3,
            "sh, sleep, sleep + watchdog"
        );
        drop(sup);
        let _ = c.wait();
        let deadline = Instant::now() + Duration::from_secs(5);
        while !group_members(pgid).is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(
            group_members(pgid).is_empty(),
            "group {pgid} still has members"
        );
    }
}

/// Reloads one supervised proxy master — the pid of a child we spawned, and nothing else — by
/// its reload signal (nginx: SIGHUP; HAProxy in master-worker mode: SIGUSR2), and counts the
/// reloads asked for so a watcher can tell a reload's new workers from a respawned crash.
#[derive(Debug, Clone)]
pub struct Reloader {
    pid: Option<u32>,
    signal: libc::c_int,
    what: &'static str,
    reloads: std::sync::Arc<std::sync::atomic::AtomicU32>,
}

impl Reloader {
    /// A reloader of `pid` (our child) by `signal`; `what` names the proxy in errors.
    pub fn new(
        pid: Option<u32>,
        signal: libc::c_int,
        what: &'static str,
        reloads: std::sync::Arc<std::sync::atomic::AtomicU32>,
    ) -> Reloader {
        Reloader {
            pid,
            signal,
            what,
            reloads,
        }
    }

    /// Reloads asked for so far, counted before each signal is sent.
    pub fn count(&self) -> u32 {
        self.reloads.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Send the reload signal.
    pub fn reload(&self) -> anyhow::Result<()> {
        let Some(pid) = self.pid else {
            anyhow::bail!("{} is not running", self.what)
        };
        self.reloads
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        // SAFETY: kill with the pid of a child we spawned.
        if unsafe { libc::kill(pid as libc::pid_t, self.signal) } != 0 {
            anyhow::bail!(
                "cannot reload {} {pid}: {}",
                self.what,
                std::io::Error::last_os_error()
            );
        }
        Ok(())
    }
}

/// How a child that should be listening is doing.
#[derive(Debug)]
pub enum Readiness {
    /// `addr` accepts connections.
    Listening,
    /// The child exited first, with this status.
    Exited(std::process::ExitStatus),
    /// Neither within the timeout.
    TimedOut,
}

/// Wait until `addr` accepts a TCP connection, the child exits, or `timeout` passes.
pub fn wait_accepting(
    child: &mut Child,
    addr: std::net::SocketAddr,
    timeout: Duration,
) -> Readiness {
    let deadline = Instant::now() + timeout;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Readiness::Exited(status);
        }
        if std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(100)).is_ok() {
            return Readiness::Listening;
        }
        if Instant::now() >= deadline {
            return Readiness::TimedOut;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Stop our child `child` gently: `first` (a proxy's graceful-stop signal) and up to `grace`
/// for it to finish, then SIGTERM (2 s), then SIGKILL (5 s). False if it outlived SIGKILL.
pub fn stop_escalating(child: &mut Child, first: libc::c_int, grace: Duration) -> io::Result<bool> {
    let pid = child.id() as libc::pid_t;
    for (sig, wait) in [
        (first, grace),
        (libc::SIGTERM, Duration::from_secs(2)),
        (libc::SIGKILL, Duration::from_secs(5)),
    ] {
        if child.try_wait()?.is_some() {
            return Ok(true);
        }
        // SAFETY: the pid of our own child, which has not been reaped (try_wait said so).
        unsafe { libc::kill(pid, sig) };
        let deadline = Instant::now() + wait;
        while Instant::now() < deadline {
            if child.try_wait()?.is_some() {
                return Ok(true);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    Ok(false)
}

/// A proxy master process we spawned (nginx, HAProxy): its readiness, its reloads by its own
/// signal, and its graceful stop by its own signal — the lifecycle every proxy shares. Dropping
/// it stops the process.
#[derive(Debug)]
pub struct Master {
    child: Option<Child>,
    what: &'static str,
    reload_signal: libc::c_int,
    stop_signal: libc::c_int,
    reloads: std::sync::Arc<std::sync::atomic::AtomicU32>,
}

impl Master {
    /// `child` is `what` (`nginx`), reloaded by `reload_signal` and stopped gracefully by
    /// `stop_signal`.
    pub fn new(
        child: Child,
        what: &'static str,
        reload_signal: libc::c_int,
        stop_signal: libc::c_int,
    ) -> Master {
        Master {
            child: Some(child),
            what,
            reload_signal,
            stop_signal,
            reloads: Default::default(),
        }
    }

    /// The master's pid.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Wait until `addr` accepts connections; on failure one line with `tail()` (the proxy's
    /// last log lines).
    pub fn wait_listening(
        &mut self,
        addr: std::net::SocketAddr,
        timeout: Duration,
        tail: impl Fn() -> String,
    ) -> anyhow::Result<()> {
        let what = self.what;
        let Some(child) = self.child.as_mut() else {
            anyhow::bail!("{what} is not running");
        };
        match wait_accepting(child, addr, timeout) {
            Readiness::Listening => Ok(()),
            Readiness::Exited(status) => {
                anyhow::bail!(
                    "{what} exited ({status}) before listening on {addr}: {}",
                    tail()
                )
            }
            Readiness::TimedOut => anyhow::bail!(
                "{what} did not accept connections on {addr} within {timeout:?}: {}",
                tail()
            ),
        }
    }

    /// A handle that reloads the master from another task and counts the reloads.
    pub fn reloader(&self) -> Reloader {
        Reloader::new(
            self.pid(),
            self.reload_signal,
            self.what,
            self.reloads.clone(),
        )
    }

    /// The stop signal and up to `grace` to finish, then SIGTERM, then SIGKILL.
    pub fn stop(&mut self, grace: Duration) -> anyhow::Result<()> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        if !stop_escalating(&mut child, self.stop_signal, grace)? {
            anyhow::bail!("{} {} did not exit after SIGKILL", self.what, child.id());
        }
        Ok(())
    }
}

impl Drop for Master {
    fn drop(&mut self) {
        let _ = self.stop(Duration::from_secs(2));
    }
}
