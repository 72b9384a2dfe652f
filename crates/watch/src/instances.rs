//! Several nginx instances in one watch: file sets named by a path pattern with `{instance}`
//! (a central log host's `/var/log/remote/{instance}/nginx/access.log`), found again at every
//! tick so that a host added later is followed from its first line.
//!
//! ```
//! use resolvelab_watch::instances::Pattern;
//! let dir = tempfile::tempdir().unwrap();
//! for host in ["web-1", "web-2"] {
//!     std::fs::create_dir(dir.path().join(host)).unwrap();
//!     std::fs::write(dir.path().join(host).join("access.log"), "").unwrap();
//! }
//! let p = Pattern::parse(&dir.path().join("{instance}/access.log")).unwrap().unwrap();
//! let found: Vec<String> = p.find().into_iter().map(|(name, _)| name).collect();
//! assert_eq!(found, ["web-1", "web-2"]);
//! ```

use std::path::{Component, Path, PathBuf};

/// What stands for the instance's name in a path.
pub const PLACEHOLDER: &str = "{instance}";

/// A path whose one component holds [`PLACEHOLDER`]: the instances are the names that fill it
/// and make an existing file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    /// The directory listed.
    dir: PathBuf,
    /// The listed entry's name around the instance's name.
    before: String,
    after: String,
    /// The rest of the path below the entry (empty: the entry is the file).
    rest: PathBuf,
}

impl Pattern {
    /// The pattern of a path, None when it has no placeholder; an error when it has more than
    /// one, or one outside a single component.
    pub fn parse(path: &Path) -> anyhow::Result<Option<Pattern>> {
        let text = path.to_string_lossy();
        match text.matches(PLACEHOLDER).count() {
            0 => return Ok(None),
            1 => {}
            _ => anyhow::bail!(
                "{}: {PLACEHOLDER} stands once in a path (the instance's name)",
                path.display()
            ),
        }
        let mut dir = PathBuf::new();
        let mut comps = path.components();
        for c in comps.by_ref() {
            let s = c.as_os_str().to_string_lossy();
            if let Some((before, after)) = s.split_once(PLACEHOLDER)
                && matches!(c, Component::Normal(_))
            {
                if dir.as_os_str().is_empty() {
                    dir.push(".");
                }
                return Ok(Some(Pattern {
                    dir,
                    before: before.to_string(),
                    after: after.to_string(),
                    rest: comps.as_path().to_path_buf(),
                }));
            }
            dir.push(c);
        }
        anyhow::bail!(
            "{}: {PLACEHOLDER} must be in a file or directory name",
            path.display()
        )
    }

    /// The instances found now and their files, by name: entries of the directory that fit the
    /// pattern and whose file exists.
    pub fn find(&self) -> Vec<(String, PathBuf)> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut out: Vec<(String, PathBuf)> = entries
            .filter_map(|e| {
                let e = e.ok()?;
                let name = e.file_name().into_string().ok()?;
                let inner = name.strip_prefix(&self.before)?.strip_suffix(&self.after)?;
                if inner.is_empty() || inner.starts_with('.') {
                    return None;
                }
                let path = if self.rest.as_os_str().is_empty() {
                    e.path()
                } else {
                    e.path().join(&self.rest)
                };
                path.is_file().then(|| (inner.to_string(), path))
            })
            .collect();
        out.sort();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_instance_fills_one_name_in_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("web-1.access.log"), "").unwrap();
        std::fs::write(d.join("web-2.access.log"), "").unwrap();
        std::fs::write(d.join("web-2.error.log"), "").unwrap();
        std::fs::write(d.join(".access.log"), "").unwrap();
        let p = Pattern::parse(&d.join("{instance}.access.log"))
            .unwrap()
            .unwrap();
        let found: Vec<String> = p.find().into_iter().map(|(n, _)| n).collect();
        assert_eq!(found, ["web-1", "web-2"]);
        // A directory per host, a file not there yet: not an instance yet.
        std::fs::create_dir_all(d.join("hosts/a")).unwrap();
        std::fs::create_dir_all(d.join("hosts/b")).unwrap();
        std::fs::write(d.join("hosts/a/access.log"), "").unwrap();
        let p = Pattern::parse(&d.join("hosts/{instance}/access.log"))
            .unwrap()
            .unwrap();
        assert_eq!(p.find(), [("a".to_string(), d.join("hosts/a/access.log"))]);
        assert!(Pattern::parse(Path::new("a.log")).unwrap().is_none());
        assert!(Pattern::parse(Path::new("{instance}/{instance}.log")).is_err());
    }
}
