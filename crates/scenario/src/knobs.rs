//! The third-party proxies' DNS timing as a scenario sets it through their own knobs — HAProxy's
//! `resolvers` lines (`timeout resolve`, `hold nx`, `hold other|timeout|refused`), Envoy's
//! cluster `dns_refresh_rate`, Caddy's upstreams `refresh` — read once when the file is read,
//! with the knob's `file:line` on a mistake. The lab's runner and the model read the values.
//! HAProxy's `init-addr` is a typed value of its own ([`InitAddr`]).
//!
//! ```
//! use resolvelab_core::spec::engine::ProxyKind;
//! use resolvelab_scenario::library;
//! let sc = library::get("nxdomain").unwrap();
//! let t = sc.proxy_timing(ProxyKind::Envoy).unwrap();
//! assert_eq!(t.period, std::time::Duration::from_secs(5), "Envoy's default refresh");
//! ```

use crate::format::Scenario;
use resolvelab_core::spec::engine::ProxyKind;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::net::IpAddr;
use std::time::Duration;

/// HAProxy's `init-addr` (`[haproxy] init_addr = "last,libc"`): how a server's address is
/// found at start, method after method until one gives one. Unset, the lab writes `none` on a
/// server line with `resolvers` (its runtime resolver finds the address) and nothing on a
/// server resolved at start only, where HAProxy's default is `last,libc` (with `resolvers`,
/// `last,libc,none`: `srv_iterate_initaddr`, src/server.c).
///
/// ```
/// use resolvelab_scenario::knobs::{InitAddr, InitMethod};
/// let a: InitAddr = "last,libc".parse().unwrap();
/// assert_eq!(a.0, vec![InitMethod::Last, InitMethod::Libc]);
/// assert!(a.uses_libc());
/// assert!("libc,dns".parse::<InitAddr>().is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct InitAddr(pub Vec<InitMethod>);

/// One method of [`InitAddr`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InitMethod {
    /// The address the server-state file kept (the lab writes none: this finds nothing).
    Last,
    /// The system resolver (`getaddrinfo`), which the lab points at its authority.
    Libc,
    /// Start without an address; the server waits in maintenance for its resolver.
    None,
    /// This address.
    Addr(IpAddr),
}

impl InitAddr {
    /// Whether a start asks the system resolver.
    pub fn uses_libc(&self) -> bool {
        self.0.contains(&InitMethod::Libc)
    }
}

impl std::str::FromStr for InitAddr {
    type Err = String;
    fn from_str(s: &str) -> Result<InitAddr, String> {
        let mut methods = Vec::new();
        for w in s.split(',').map(str::trim) {
            let m = match w {
                "last" => InitMethod::Last,
                "libc" => InitMethod::Libc,
                "none" => InitMethod::None,
                _ => InitMethod::Addr(w.parse().map_err(|_| {
                    format!(
                        "init_addr `{s}`: `{w}` is not a method; give last, libc, none or an IP address, comma-separated"
                    )
                })?),
            };
            if methods.contains(&m) {
                return Err(format!("init_addr `{s}`: `{w}` twice"));
            }
            methods.push(m);
        }
        Ok(InitAddr(methods))
    }
}

impl TryFrom<String> for InitAddr {
    type Error = String;
    fn try_from(s: String) -> Result<InitAddr, String> {
        s.parse()
    }
}

impl From<InitAddr> for String {
    fn from(a: InitAddr) -> String {
        a.to_string()
    }
}

impl fmt::Display for InitAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, m) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            match m {
                InitMethod::Last => f.write_str("last")?,
                InitMethod::Libc => f.write_str("libc")?,
                InitMethod::None => f.write_str("none")?,
                InitMethod::Addr(a) => write!(f, "{a}")?,
            }
        }
        Ok(())
    }
}

/// How often a proxy asks again and how long it keeps a failed answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProxyTiming {
    /// HAProxy's `timeout resolve` (1 s), Envoy's `dns_refresh_rate` (5 s), Caddy's `refresh`
    /// (1 min).
    pub period: Duration,
    /// HAProxy's `hold nx`, when the scenario sets it.
    pub hold_nx: Option<Duration>,
    /// HAProxy's `hold other`/`hold timeout`/`hold refused`, when the scenario sets it.
    pub hold_other: Option<Duration>,
}

impl Scenario {
    /// `kind`'s DNS timing as this scenario configures it, its own defaults elsewhere.
    pub fn proxy_timing(&self, kind: ProxyKind) -> anyhow::Result<ProxyTiming> {
        let read = |path: &[&str], v: &str| {
            resolvelab_core::dur::parse(v).map_err(|e| anyhow::anyhow!("{}: {e}", self.at(path)))
        };
        let knob =
            |t: &toml::Table, key: &str| t.get(key).and_then(|v| v.as_str()).map(String::from);
        let mut t = ProxyTiming {
            period: Duration::ZERO,
            hold_nx: None,
            hold_other: None,
        };
        match kind {
            ProxyKind::Haproxy => {
                t.period = Duration::from_secs(1);
                // Each line in order: the last one of a kind wins, as in HAProxy.
                for (i, l) in self.haproxy.resolvers.iter().enumerate() {
                    let i = i.to_string();
                    let at = ["haproxy", "resolvers", i.as_str()];
                    let w: Vec<&str> = l.split_whitespace().collect();
                    match w.as_slice() {
                        ["timeout", "resolve", v] => t.period = read(&at, v)?,
                        ["hold", "nx", v] => t.hold_nx = Some(read(&at, v)?),
                        ["hold", "other" | "timeout" | "refused", v] => {
                            t.hold_other = Some(read(&at, v)?)
                        }
                        _ => {}
                    }
                }
            }
            ProxyKind::Envoy => {
                let v = knob(&self.envoy.cluster, "dns_refresh_rate");
                let at = ["envoy", "cluster", "dns_refresh_rate"];
                t.period = read(&at, v.as_deref().unwrap_or("5s"))?;
            }
            ProxyKind::Caddy => {
                let v = knob(&self.caddy.upstreams, "refresh");
                t.period = read(
                    &["caddy", "upstreams", "refresh"],
                    v.as_deref().unwrap_or("1m"),
                )?;
            }
        }
        Ok(t)
    }
}

#[cfg(test)]
mod tests {
    use crate::format::Scenario;
    use resolvelab_core::spec::engine::ProxyKind;
    use std::time::Duration;

    #[test]
    fn knobs_are_read_at_load_and_a_mistake_names_its_line() {
        let base = crate::library::get("nxdomain").unwrap();
        let text = toml::to_string(&base).unwrap();
        let with = |extra: &str| format!("{text}\n{extra}\n");
        let sc = Scenario::from_toml(
            &with("[haproxy]\nresolvers = [\"timeout resolve 2s\", \"hold nx 500ms\"]"),
            "t.toml",
        )
        .unwrap();
        let t = sc.proxy_timing(ProxyKind::Haproxy).unwrap();
        assert_eq!(t.period, Duration::from_secs(2));
        assert_eq!(t.hold_nx, Some(Duration::from_millis(500)));
        assert_eq!(t.hold_other, None);
        let bad = with("[caddy]\nupstreams = { refresh = \"2 min\" }");
        let e = Scenario::from_toml(&bad, "t.toml").unwrap_err().to_string();
        let line = bad.lines().position(|l| l.contains("2 min")).unwrap() + 1;
        assert!(e.starts_with(&format!("t.toml:{line}:")), "{e}");
    }

    #[test]
    fn init_addr_is_read_once_and_a_mistake_names_its_line() {
        let base = crate::library::get("nxdomain").unwrap();
        let text = toml::to_string(&base).unwrap();
        let with = |extra: &str| format!("{text}\n{extra}\n");
        let sc = Scenario::from_toml(&with("[haproxy]\ninit_addr = \"last,libc,none\""), "t.toml")
            .unwrap();
        let a = sc.haproxy.init_addr.as_ref().unwrap();
        assert_eq!(a.to_string(), "last,libc,none");
        assert!(a.uses_libc());
        assert!(
            sc.resolves_at_start(),
            "libc at start needs the lab's system resolver"
        );
        let bad = with("[haproxy]\ninit_addr = \"last,dns\"");
        let e = Scenario::from_toml(&bad, "t.toml").unwrap_err().to_string();
        let line = bad.lines().position(|l| l.contains("last,dns")).unwrap() + 1;
        assert!(e.starts_with(&format!("t.toml:{line}:")), "{e}");
        assert!(e.contains("`dns` is not a method"), "{e}");
        assert!("libc,libc".parse::<super::InitAddr>().is_err());
        assert_eq!(
            "127.0.0.9,none"
                .parse::<super::InitAddr>()
                .unwrap()
                .to_string(),
            "127.0.0.9,none"
        );
    }
}
