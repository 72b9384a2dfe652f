//! nginx versions: parsing `1.28.3`, reading `nginx -V`, and the version ranges rules apply to.

use std::fmt;
use std::path::Path;
use std::process::Command;

/// An nginx version `major.minor.patch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version(pub u32, pub u32, pub u32);

/// The first open-source nginx with `server … resolve` in `upstream` (and its generation check).
pub const RESOLVE_SINCE: Version = Version(1, 27, 3);

impl Version {
    /// Parses `1.28.3` (a missing patch is 0; a fourth component, as in OpenResty's
    /// `1.25.3.1`, is ignored).
    pub fn parse(s: &str) -> Option<Version> {
        let mut it = s.trim().split('.');
        let major = it.next()?.parse().ok()?;
        let minor = it.next()?.parse().ok()?;
        let patch = match it.next() {
            Some(p) => p.parse().ok()?,
            None => 0,
        };
        Some(Version(major, minor, patch))
    }

    /// Finds the nginx core version in `nginx -V` / `nginx -v` output
    /// (`nginx version: nginx/1.28.3`, `openresty/1.25.3.1`, `Angie/1.8.0 (based on nginx/1.27.4)`).
    pub fn from_nginx_v(output: &str) -> Option<Version> {
        for key in ["nginx/", "openresty/"] {
            if let Some(i) = output.find(key) {
                let rest = &output[i + key.len()..];
                let end = rest
                    .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                    .unwrap_or(rest.len());
                if let Some(v) = Version::parse(rest[..end].trim_end_matches('.')) {
                    return Some(v);
                }
            }
        }
        None
    }

    /// Runs `nginx -V` on `binary` and reads its version. Never builds anything.
    pub fn detect(binary: &Path) -> anyhow::Result<Version> {
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
        Version::from_nginx_v(&text).ok_or_else(|| {
            anyhow::anyhow!(
                "`{} -V` printed no nginx version; pass --nginx-version X.Y.Z instead",
                binary.display()
            )
        })
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.0, self.1, self.2)
    }
}

impl std::str::FromStr for Version {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Version::parse(s).ok_or_else(|| format!("\"{s}\" is not an nginx version like 1.28.3"))
    }
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
        }
    }
}

impl fmt::Display for Versions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Versions::All => write!(f, "all"),
            Versions::AtLeast(v) => write!(f, ">= {v}"),
            Versions::Below(v) => write!(f, "< {v}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_and_compare() {
        assert_eq!(Version::parse("1.28.3"), Some(Version(1, 28, 3)));
        assert_eq!(Version::parse("1.27"), Some(Version(1, 27, 0)));
        assert_eq!(Version::parse("x"), None);
        assert!(Version(1, 27, 3) > Version(1, 26, 9));
        assert_eq!(
            Version::from_nginx_v("nginx version: nginx/1.28.3\nbuilt by gcc"),
            Some(Version(1, 28, 3))
        );
        assert_eq!(
            Version::from_nginx_v("nginx version: openresty/1.25.3.1"),
            Some(Version(1, 25, 3))
        );
        assert!(Versions::AtLeast(RESOLVE_SINCE).contains(None));
        assert!(!Versions::Below(RESOLVE_SINCE).contains(Some(Version(1, 28, 0))));
        assert!(Versions::Below(RESOLVE_SINCE).contains(Some(Version(1, 26, 2))));
    }
}
