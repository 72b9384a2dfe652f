//! `nginx -V`: the version and build flags of an nginx binary.

use std::path::Path;
use std::process::Command;

/// nginx's version as three numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version(pub u32, pub u32, pub u32);

impl Version {
    /// The first open-source version with `server … resolve` (and the generation check).
    pub const RESOLVE: Version = Version(1, 27, 3);

    /// Parse `1.28.3`.
    pub fn parse(s: &str) -> Option<Version> {
        let mut it = s.trim().split('.').map(|p| p.parse::<u32>().ok());
        Some(Version(
            it.next()??,
            it.next()??,
            it.next().flatten().unwrap_or(0),
        ))
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.0, self.1, self.2)
    }
}

/// What `nginx -V` says about a binary.
#[derive(Debug, Clone)]
pub struct VersionInfo {
    /// The version.
    pub version: Version,
    /// The full `nginx -V` text.
    pub raw: String,
    /// The `configure arguments:` line.
    pub configure_args: String,
}

impl VersionInfo {
    /// Parse the text `nginx -V` prints (it prints to stderr).
    pub fn parse(text: &str) -> Option<VersionInfo> {
        let line = text.lines().find(|l| l.contains("nginx version:"))?;
        let v = line.rsplit('/').next()?.split_whitespace().next()?;
        let version = Version::parse(v)?;
        let configure_args = text
            .lines()
            .find_map(|l| l.strip_prefix("configure arguments:"))
            .unwrap_or("")
            .trim()
            .to_string();
        Some(VersionInfo {
            version,
            raw: text.trim().to_string(),
            configure_args,
        })
    }

    /// Run `path -V` and parse it.
    pub fn of(path: &Path) -> anyhow::Result<VersionInfo> {
        let out = Command::new(path).arg("-V").output().map_err(|e| {
            anyhow::anyhow!(
                "cannot run nginx at {}: {e} (fix --nginx / RESOLVELAB_NGINX, or unset it to use the built-in build)",
                path.display()
            )
        })?;
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        VersionInfo::parse(&text).ok_or_else(|| {
            anyhow::anyhow!(
                "{} -V did not print an nginx version (is it nginx?); first line: {:?}",
                path.display(),
                text.lines().next().unwrap_or("")
            )
        })
    }

    /// Does this nginx support `server … resolve` in an upstream?
    pub fn supports_resolve(&self) -> bool {
        self.version >= Version::RESOLVE
    }

    /// Refuse a configuration that uses `resolve` on an nginx that cannot run it.
    pub fn require_resolve(&self) -> anyhow::Result<()> {
        if self.supports_resolve() {
            Ok(())
        } else {
            anyhow::bail!(
                "nginx {} does not support `server … resolve` (needs >= {}); use the built-in nginx \
                 (drop --nginx / RESOLVELAB_NGINX) or install nginx >= {}",
                self.version,
                Version::RESOLVE,
                Version::RESOLVE
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_dash_v() {
        let t = "nginx version: nginx/1.28.3\nbuilt by gcc 12.2.0 (Debian 12.2.0-14)\nconfigure arguments: --with-debug --with-cc-opt=-I/x\n";
        let v = VersionInfo::parse(t).unwrap();
        assert_eq!(v.version, Version(1, 28, 3));
        assert!(v.supports_resolve());
        assert_eq!(v.configure_args, "--with-debug --with-cc-opt=-I/x");
        let old = VersionInfo::parse("nginx version: nginx/1.22.1\n").unwrap();
        assert!(!old.supports_resolve());
        assert!(
            old.require_resolve()
                .unwrap_err()
                .to_string()
                .contains("1.27.3")
        );
        assert!(VersionInfo::parse("hello").is_none());
        assert!(Version(1, 27, 3) > Version(1, 26, 9));
    }
}
