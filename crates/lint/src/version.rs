//! nginx versions: parsing `1.28.3`, reading `nginx -V`, and the version ranges rules apply to.

use std::fmt;
use std::path::Path;
use std::process::Command;

pub use resolvelab_core::version::{BuildFlags, RESOLVE_SINCE, Version};

/// Runs `nginx -V` on `binary` and reads its version. Never builds anything.
pub fn detect(binary: &Path) -> anyhow::Result<Version> {
    Ok(detect_build(binary)?.0)
}

/// Runs `nginx -V` on `binary` and reads its version and configure flags (none when it
/// prints no `configure arguments:`). Never builds anything.
pub fn detect_build(binary: &Path) -> anyhow::Result<(Version, Option<BuildFlags>)> {
    let out = Command::new(binary).arg("-V").output().map_err(|e| {
        anyhow::anyhow!(
            "cannot run `{} -V`: {e}; pass --nginx-version X.Y.Z instead",
            binary.display()
        )
    })?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    let v = Version::from_nginx_v(&text).ok_or_else(|| {
        anyhow::anyhow!(
            "`{} -V` printed no nginx version; pass --nginx-version X.Y.Z instead",
            binary.display()
        )
    })?;
    Ok((v, BuildFlags::from_nginx_v(&text)))
}

/// The nginx versions a rule applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Versions {
    /// Every version.
    All,
    /// This version and later.
    AtLeast(Version),
    /// Versions before this one.
    Below(Version),
    /// Versions before this one, where this one changed a default the rule is about; an
    /// unknown version is assumed to be older (most deployments run the stable branch).
    BeforeDefault(Version),
}

impl Versions {
    /// Whether `v` is in the range; an unknown version is assumed to be current (≥ 1.27.3).
    pub fn contains(&self, v: Option<Version>) -> bool {
        match (self, v) {
            (Versions::All, _) => true,
            (Versions::AtLeast(_), None) => true,
            (Versions::Below(_), None) => false,
            (Versions::AtLeast(min), Some(v)) => v >= *min,
            (Versions::Below(max), Some(v)) => v < *max,
            (Versions::BeforeDefault(_), None) => true,
            (Versions::BeforeDefault(max), Some(v)) => v < *max,
        }
    }
}

impl fmt::Display for Versions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Versions::All => write!(f, "all"),
            Versions::AtLeast(v) => write!(f, ">= {v}"),
            Versions::Below(v) | Versions::BeforeDefault(v) => write!(f, "< {v}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_and_compare() {
        assert!(Versions::AtLeast(RESOLVE_SINCE).contains(None));
        assert!(!Versions::Below(RESOLVE_SINCE).contains(Some(Version(1, 28, 0))));
        assert!(Versions::Below(RESOLVE_SINCE).contains(Some(Version(1, 26, 2))));
        let ka = Versions::BeforeDefault(Version(1, 29, 7));
        assert!(ka.contains(None) && ka.contains(Some(Version(1, 28, 3))));
        assert!(!ka.contains(Some(Version(1, 31, 3))));
        assert_eq!(ka.to_string(), "< 1.29.7");
    }
}
