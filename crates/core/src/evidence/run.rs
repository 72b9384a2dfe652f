//! `run.json` ([`super::schema::RUN`]): the record a run leaves, written by both engines (at
//! start, after setup, at the end) and read by the lab's judge, `compare`, the replay and the
//! checker.
//!
//! ```
//! use resolvelab_core::evidence::run::{Network, Run, RunStatus};
//! let net = Network::loopback(9, 8).in_namespace([("net.ipv4.tcp_tw_reuse", "0")]);
//! assert_eq!(net.to_string(), "127.9.8.0/24 in a private network namespace, net.ipv4.tcp_tw_reuse = 0");
//! assert_eq!(net.octets(), Some((9, 8)));
//! // Records written before the network was structured carry its text.
//! let old: Network = serde_json::from_str(&format!("{:?}", net.to_string())).unwrap();
//! assert_eq!(old, net);
//! let r = Run { status: RunStatus::Completed, ..Run::default() };
//! assert!(serde_json::to_string(&r).unwrap().contains(r#""status":"completed""#));
//! ```

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// What a run left (`run.json`). A field an older record lacks reads as its default (a record
/// without a status: `running`, a run that never said it ended).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Run {
    /// Always [`super::schema::RUN`].
    pub schema: String,
    /// The scenario id.
    pub scenario: String,
    /// The engine that played it (`nginx`, `nginx-1.31`, `sim`; empty in older records).
    #[serde(default)]
    pub engine: String,
    /// The variant, if any.
    pub variant: Option<String>,
    /// Where the run is.
    pub status: RunStatus,
    /// Why the run did not complete.
    pub reason: Option<String>,
    /// The run directory.
    pub dir: PathBuf,
    /// Epoch µs when the run started.
    pub started_us: i64,
    /// When the load started (µs), 0 if it never did.
    pub load_start_us: i64,
    /// When the run ended (µs).
    pub ended_us: i64,
    /// The run's network.
    pub net: Network,
    /// The proxy's listen address.
    pub nginx_addr: String,
    /// The seed.
    pub seed: u64,
    /// Requests sent.
    pub requests: u64,
    /// Injection hit counters by injection (`dns:NAME`, `fault:TARGET:SPEC`).
    pub hits: BTreeMap<String, u64>,
}

impl Run {
    /// Read `run.json` of a run directory (its `dir` set to where it was found).
    pub fn read(dir: &Path) -> anyhow::Result<Run> {
        let p = dir.join(super::file::RUN);
        let text = std::fs::read_to_string(&p)
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", p.display()))?;
        let mut r: Run = serde_json::from_str(&text)
            .map_err(|e| anyhow::anyhow!("{}: not a resolvelab run record: {e}", p.display()))?;
        r.dir = dir.to_path_buf();
        Ok(r)
    }
}

/// Where a run is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    /// Started, not ended (or killed before it could say).
    #[default]
    Running,
    /// Played to its end.
    Completed,
    /// Interrupted (Ctrl-C, SIGTERM, SIGHUP): the directory is valid, the run partial.
    Aborted,
    /// Could not be played; `reason` says why.
    Failed,
}

impl RunStatus {
    /// The id `run.json` and the reports use.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Completed => "completed",
            RunStatus::Aborted => "aborted",
            RunStatus::Failed => "failed",
        }
    }
}

impl fmt::Display for RunStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the judge concluded of a run (`verdict.json`'s `status`): whether its evidence can be
/// read as the scenario meant, before any expectation is looked at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum VerdictStatus {
    /// Played to its end, the injections landed as meant: the expectations decide.
    Completed,
    /// Interrupted, or never ended: partial evidence.
    Aborted,
    /// Could not be played.
    Failed,
    /// Evidence is missing (no access log).
    Incomplete,
    /// An injection missed (or hit when meant to miss): the run did not test what it meant to.
    NotInterpretable,
}

impl VerdictStatus {
    /// The id `verdict.json` and the reports use.
    pub fn as_str(self) -> &'static str {
        match self {
            VerdictStatus::Completed => "completed",
            VerdictStatus::Aborted => "aborted",
            VerdictStatus::Failed => "failed",
            VerdictStatus::Incomplete => "incomplete",
            VerdictStatus::NotInterpretable => "not-interpretable",
        }
    }
}

impl fmt::Display for VerdictStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A run's network: its loopback /24 and, for a run that needs kernel settings, the private
/// network namespace it ran in with those settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Network {
    /// `127.A.B.0/24`.
    pub subnet: String,
    /// Ran in a private network namespace.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub netns: bool,
    /// The namespace's kernel settings.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub sysctl: BTreeMap<String, String>,
}

impl Network {
    /// The loopback /24 `127.a.b.0/24`, on the host's network.
    pub fn loopback(a: u8, b: u8) -> Network {
        Network {
            subnet: format!("127.{a}.{b}.0/24"),
            ..Network::default()
        }
    }

    /// The same /24 in a private network namespace with `sysctl` set.
    pub fn in_namespace<K: ToString, V: ToString>(
        mut self,
        sysctl: impl IntoIterator<Item = (K, V)>,
    ) -> Network {
        self.netns = true;
        self.sysctl = (sysctl.into_iter())
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        self
    }

    /// `(A, B)` of `127.A.B.0/24`.
    pub fn octets(&self) -> Option<(u8, u8)> {
        let cidr = self.subnet.strip_prefix("127.")?.strip_suffix(".0/24")?;
        let (a, b) = cidr.split_once('.')?;
        Some((a.parse().ok()?, b.parse().ok()?))
    }

    /// Read the text older records carry (`127.A.B.0/24 in a private network namespace, k = v`).
    fn from_text(text: &str) -> Network {
        let (subnet, rest) = text.split_once(' ').unwrap_or((text, ""));
        let mut n = Network {
            subnet: subnet.to_string(),
            ..Network::default()
        };
        if let Some(settings) = rest.strip_prefix("in a private network namespace") {
            n.netns = true;
            for kv in settings.split(", ").filter(|s| !s.is_empty()) {
                if let Some((k, v)) = kv.trim_start_matches(", ").split_once(" = ") {
                    n.sysctl.insert(k.to_string(), v.to_string());
                }
            }
        }
        n
    }
}

impl fmt::Display for Network {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.subnet)?;
        if self.netns {
            f.write_str(" in a private network namespace")?;
            for (k, v) in &self.sysctl {
                write!(f, ", {k} = {v}")?;
            }
        }
        Ok(())
    }
}

impl<'de> Deserialize<'de> for Network {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Network, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Either {
            Text(String),
            Fields {
                subnet: String,
                #[serde(default)]
                netns: bool,
                #[serde(default)]
                sysctl: BTreeMap<String, String>,
            },
        }
        Ok(match Either::deserialize(d)? {
            Either::Text(t) => Network::from_text(&t),
            Either::Fields {
                subnet,
                netns,
                sysctl,
            } => Network {
                subnet,
                netns,
                sysctl,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_network_reads_from_old_text_and_new_fields() {
        let text = |t: &str| serde_json::from_str::<Network>(&format!("{t:?}")).unwrap();
        assert_eq!(text("127.10.77.0/24"), Network::loopback(10, 77));
        let ns = text("127.3.4.0/24 in a private network namespace, a = 1, b.c = x y");
        assert_eq!(ns.octets(), Some((3, 4)));
        assert!(ns.netns);
        assert_eq!(ns.sysctl["a"], "1");
        assert_eq!(ns.sysctl["b.c"], "x y");
        assert_eq!(text("10.0.0.0/24").octets(), None);
        assert_eq!(text("127.300.1.0/24").octets(), None);
        let json = serde_json::to_string(&ns).unwrap();
        assert_eq!(serde_json::from_str::<Network>(&json).unwrap(), ns);
        assert_eq!(
            serde_json::to_string(&Network::loopback(1, 2)).unwrap(),
            r#"{"subnet":"127.1.2.0/24"}"#
        );
    }
}
