//! `nginx -V`: the version and build flags of an nginx binary.

use std::path::Path;
use std::process::Command;

pub use resolvelab_core::version::{RESOLVE_SINCE, Version};

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
        let version = Version::from_nginx_v(line)?;
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

    /// Was it built with the SSL module (`proxy_pass https://` needs it)?
    pub fn has_ssl(&self) -> bool {
        self.configure_args
            .split_whitespace()
            .any(|a| a == "--with-http_ssl_module")
    }

    /// Does this nginx support `server … resolve` in an upstream?
    pub fn supports_resolve(&self) -> bool {
        self.version.has_resolve()
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
                RESOLVE_SINCE,
                RESOLVE_SINCE
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
