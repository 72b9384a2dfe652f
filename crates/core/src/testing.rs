//! What the project's tests share about their prerequisites.
//!
//! A test that cannot run its subject — no root for a namespace, no browser, no `dpkg-deb` — must
//! never pass silently: under `CI=true` (the project's CI, which installs every prerequisite
//! itself) a missing prerequisite is a failure; elsewhere the test says "skipped" and why, and
//! returns.
//!
//! ```no_run
//! use resolvelab_core::testing;
//! if !testing::is_root() {
//!     testing::missing_prerequisite("needs root to create a network namespace");
//!     return;
//! }
//! ```

/// Whether this run is the project's CI (`CI=true`), where every prerequisite must be present.
pub fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// Report a prerequisite the calling test lacks: panics under `CI=true`, else prints
/// `skipped: REASON` on stderr. The caller returns right after.
#[allow(clippy::print_stderr)]
pub fn missing_prerequisite(reason: &str) {
    assert!(
        !under_ci(),
        "a prerequisite is missing under CI=true (CI must install it): {reason}"
    );
    eprintln!("skipped: {reason}");
}

/// Whether the process runs as root (namespaces, mounts, `/etc/resolv.conf` bind mounts).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Whether this process may create a network namespace (tried in a child: `unshare -n true`).
pub fn can_unshare_net() -> bool {
    can_unshare("-n")
}

/// Whether this process may create a mount namespace (`unshare -m true`): the lab points
/// nginx's system resolver at the run's authority in one.
pub fn can_unshare_mount() -> bool {
    can_unshare("-m")
}

fn can_unshare(flag: &str) -> bool {
    std::process::Command::new("unshare")
        .args([flag, "true"])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Run a command that must succeed; its stderr is the failure message.
pub fn output_ok(cmd: &mut std::process::Command) -> std::process::Output {
    let out = cmd.output().expect("the command starts");
    assert!(
        out.status.success(),
        "{:?}: {}",
        cmd.get_program(),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A child process killed (by its own handle, nothing else) when the test ends.
pub struct KillOnDrop(pub std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
