//! The monitoring parts users run beside `resolvelab watch`, pinned for the tests and benchmarks
//! that prove `watch` and `deploy/prometheus` against them: Prometheus and promtool from
//! Debian 12's `prometheus` package (one static binary each; the web UI's JavaScript packages
//! it depends on are not needed to scrape, query or evaluate rules), and mtail, the log-to-
//! metrics tool users deploy beside nginx today (scripts/bench-watch.sh runs it side by side).

use crate::{Deb, Pinned};

/// Debian 12's Prometheus 2.42.0 (`usr/bin/prometheus`; `promtool` beside it).
pub fn prometheus() -> Pinned {
    Pinned::debian(
        "prometheus-2.42.0",
        vec![Deb {
            package: "prometheus".into(),
            version: "2.42.0+ds-5+deb12u1".into(),
            sha256: "81d59a24fce84f7fbe97a45a4f2914b6a5881b5cd1db2a6a0e129e515e1a5f55".into(),
        }],
        "usr/bin/prometheus",
    )
    .checked_by(&["--version"], "version 2.42.0")
}

/// `promtool` of a provisioned [`prometheus`]: the same (sha256-checked) package's other
/// binary, in the unpacked package beside the cached binary.
pub fn promtool(prometheus: &std::path::Path) -> std::path::PathBuf {
    let dir = prometheus
        .parent()
        .and_then(|b| b.parent())
        .unwrap_or(prometheus);
    dir.join("root/usr/bin/promtool")
}

/// Debian 12's mtail 3.0.0~rc50 (`usr/bin/mtail`).
pub fn mtail() -> Pinned {
    Pinned::debian(
        "mtail-3.0.0-rc50",
        vec![Deb {
            package: "mtail".into(),
            version: "3.0.0~rc50-1+b6".into(),
            sha256: "0338de1b178ffecfec3f00ebd3452f8436f357c016aea6dff66028ad63abbe6c".into(),
        }],
        "usr/bin/mtail",
    )
    .checked_by(&["--version"], "3.0.0")
}
