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
    std::process::Command::new("unshare")
        .args(["-n", "true"])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}
