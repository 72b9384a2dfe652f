//! Several named proxies from one TOML file.
//!
//! ```toml
//! control = "127.0.0.1:8474"          # optional HTTP control API
//! log = "proxy.jsonl"                 # optional connection log
//!
//! [[proxy]]
//! name = "db"
//! listen = "127.0.0.40:5432"
//! upstream = "127.0.0.41:5432"
//! faults = ["latency:delay=200ms,direction=downstream"]
//! ```

use crate::toxics::ToxicSpec;
use serde::Deserialize;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// The whole file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProxyFile {
    /// Address of the HTTP control API.
    pub control: Option<SocketAddr>,
    /// Connection log path (relative to the file's directory).
    pub log: Option<PathBuf>,
    /// The proxies.
    #[serde(default)]
    pub proxy: Vec<ProxyEntry>,
}

/// One `[[proxy]]` table.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProxyEntry {
    /// Unique name.
    pub name: String,
    /// Listen address.
    pub listen: SocketAddr,
    /// Upstream address.
    pub upstream: SocketAddr,
    /// Fault specs active from the start.
    #[serde(default)]
    pub faults: Vec<String>,
}

impl ProxyEntry {
    /// Parse the fault specs, naming the file and proxy in the error.
    pub fn specs(&self, path: &Path) -> anyhow::Result<Vec<ToxicSpec>> {
        self.faults
            .iter()
            .map(|f| {
                f.parse().map_err(|e: String| {
                    anyhow::anyhow!("{}: proxy `{}`: {e}", path.display(), self.name)
                })
            })
            .collect()
    }
}

/// Read and check a proxy file: TOML errors name the line; duplicate names are refused.
pub fn load(path: &Path) -> anyhow::Result<ProxyFile> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("cannot read proxy file {}: {e}", path.display()))?;
    let mut file: ProxyFile = toml::from_str(&text).map_err(|e| {
        let msg = e.message().to_string();
        let line = e
            .span()
            .map(|s| text[..s.start.min(text.len())].lines().count().max(1))
            .unwrap_or(0);
        anyhow::anyhow!("{}:{line}: {msg}", path.display())
    })?;
    if file.proxy.is_empty() {
        anyhow::bail!(
            "{}: no [[proxy]] table; add one with name, listen and upstream",
            path.display()
        );
    }
    let mut names = std::collections::HashSet::new();
    for p in &file.proxy {
        if !names.insert(p.name.clone()) {
            anyhow::bail!("{}: proxy name `{}` is used twice", path.display(), p.name);
        }
        p.specs(path)?;
    }
    if let (Some(log), Some(dir)) = (&file.log, path.parent())
        && log.is_relative()
    {
        file.log = Some(dir.join(log));
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loads_and_reports_lines() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("p.toml");
        std::fs::write(
            &p,
            "control = \"127.0.0.1:0\"\n[[proxy]]\nname = \"db\"\nlisten = \"127.0.0.40:0\"\nupstream = \"127.0.0.41:1\"\nfaults = [\"latency:delay=5ms\"]\n",
        )
        .unwrap();
        let f = load(&p).unwrap();
        assert_eq!(f.proxy.len(), 1);
        assert_eq!(f.proxy[0].specs(&p).unwrap().len(), 1);
        std::fs::write(
            &p,
            "[[proxy]]\nname = \"db\"\nlisten = \"nope\"\nupstream = \"127.0.0.41:1\"\n",
        )
        .unwrap();
        let e = load(&p).unwrap_err().to_string();
        assert!(e.contains("p.toml:3"), "{e}");
        std::fs::write(&p, "[[proxy]]\nname = \"db\"\nlisten = \"127.0.0.1:0\"\nupstream = \"127.0.0.41:1\"\nfaults = [\"latency\"]\n").unwrap();
        assert!(load(&p).unwrap_err().to_string().contains("delay="));
    }
}
