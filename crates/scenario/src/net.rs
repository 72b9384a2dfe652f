//! The addresses of one run. Every run gets its own loopback /24 (`127.A.B.0/24`), so several
//! runs (or tests) can run at once without port collisions: the proxy listens on `.1`, the DNS
//! authority on `.53`, backends on `.20`, `.30`, … (or the `host` the scenario gives). The
//! scenario checks its names against a placeholder assignment when it is read; the lab assigns
//! the real one per run.
//!
//! ```
//! use resolvelab_scenario::{library, net::Net};
//! let sc = library::get("swap-only").unwrap();
//! let net = Net::assign(&sc, 10, 1).unwrap();
//! assert_eq!(net.nginx.to_string(), "127.10.1.1:8080");
//! ```

use crate::format::{Route, Scenario, ServerLine};
use anyhow::{Result, bail};
use resolvelab_core::spec::dns::{DnsMode, DnsSetting, HostRef, check_multi};
use resolvelab_core::spec::nginx::{NginxTime, ServerParams};
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// The loopback addresses of one run.
#[derive(Debug, Clone)]
pub struct Net {
    /// The /24 prefix, `[127, A, B]`.
    pub prefix: [u8; 3],
    /// nginx's listen address.
    pub nginx: SocketAddr,
    /// The DNS authority's address.
    pub dns: SocketAddr,
    /// Backend and proxy addresses by name.
    pub hosts: BTreeMap<String, SocketAddr>,
}

/// One `server` line of the upstream as nginx gets it: a backend's address (`@backend`) or the
/// name with the port, and the parameters with the `[nginx]` defaults applied. The renderer
/// writes it into nginx.conf and the model plays it, so both read one value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamServer {
    /// An IP literal (`@backend`) or a DNS name.
    pub host: String,
    /// The port.
    pub port: u16,
    /// `resolve` (a name, in an upstream block), `max_fails`, `fail_timeout`, `backup`.
    pub params: ServerParams,
}

impl Net {
    /// Where instance `k` (from 0) of a `[fleet]` listens: the ports after nginx's, whose own
    /// address the fleet's balancer takes.
    pub fn instance(&self, k: u32) -> SocketAddr {
        SocketAddr::new(self.nginx.ip(), self.nginx.port() + 1 + k as u16)
    }

    /// The resolver address of instance `k` (from 0) of a `[fleet]`: the authority's address
    /// with the ports after its own, one view each, so the authority knows which instance
    /// asks (a GSLB may answer each its own members; the query log names the view).
    pub fn instance_dns(&self, k: u32) -> SocketAddr {
        SocketAddr::new(self.dns.ip(), self.dns.port() + 1 + k as u16)
    }

    /// This network as instance `k` of a fleet sees it: the same hosts, its own listen address
    /// and its own resolver address.
    pub fn for_instance(&self, k: u32) -> Net {
        Net {
            nginx: self.instance(k),
            dns: self.instance_dns(k),
            ..self.clone()
        }
    }

    /// The upstream server a scenario's server line stands for in this run.
    pub fn upstream_server(&self, sc: &Scenario, s: &ServerLine) -> Result<UpstreamServer> {
        let n = &sc.nginx;
        let (host, port, resolve) = match s.host.strip_prefix('@') {
            Some(name) => {
                let Some(addr) = self.hosts.get(name) else {
                    bail!("server host `@{name}` names no backend or proxy");
                };
                (addr.ip().to_string(), addr.port(), false)
            }
            None => (
                s.host.clone(),
                n.port,
                s.resolve && n.route == Route::Upstream,
            ),
        };
        let fail_timeout = s.fail_timeout.as_ref().or(n.fail_timeout.as_ref());
        let fail_timeout_ms = fail_timeout.map(NginxTime::ms);
        Ok(UpstreamServer {
            host,
            port,
            params: ServerParams {
                resolve,
                max_fails: s.max_fails.or(n.max_fails),
                fail_timeout_ms,
                backup: s.backup,
                ..ServerParams::default()
            },
        })
    }

    /// Assign addresses inside `127.a.b.0/24`.
    pub fn assign(sc: &Scenario, a: u8, b: u8) -> Result<Net> {
        let ip = |h: u8| Ipv4Addr::new(127, a, b, h);
        let mut hosts = BTreeMap::new();
        let mut next = 20u8;
        let mut used = std::collections::BTreeSet::from([1u8, 53u8]);
        let mut take = |want: Option<u8>, name: &str| -> Result<u8> {
            let h = match want {
                Some(h) => h,
                None => {
                    while used.contains(&next) {
                        next = next.saturating_add(10);
                    }
                    next
                }
            };
            if h == 0 || h == 255 || !used.insert(h) {
                bail!("`{name}`: host .{h} is reserved or already used in this scenario");
            }
            Ok(h)
        };
        for be in &sc.backends {
            let h = take(be.host, &be.name)?;
            hosts.insert(be.name.clone(), SocketAddr::from((ip(h), sc.nginx.port)));
        }
        for p in &sc.proxies {
            let h = take(p.host, &p.name)?;
            hosts.insert(
                p.name.clone(),
                SocketAddr::from((ip(h), p.port.unwrap_or(sc.nginx.port))),
            );
        }
        Ok(Net {
            prefix: [127, a, b],
            nginx: SocketAddr::from((ip(1), 8080)),
            // The system resolver (getaddrinfo) knows no port: where nginx resolves names at
            // start, the authority answers on 53.
            dns: SocketAddr::from((ip(53), if sc.resolves_at_start() { 53 } else { 5353 })),
            hosts,
        })
    }

    /// A scenario's DNS setting with its `@name` references replaced by this run's addresses
    /// (`alternate:@b1,@b2`, `multi:25@@b2`).
    pub fn resolve(&self, s: &DnsSetting<HostRef>) -> Result<DnsSetting> {
        let out = s.try_map(|h| match h {
            HostRef::Ip(ip) => Ok(*ip),
            HostRef::Named(name) => match self.hosts.get(name).map(SocketAddr::ip) {
                Some(IpAddr::V4(ip)) => Ok(ip),
                Some(IpAddr::V6(ip)) => bail!("`@{name}` is IPv6 ({ip}); A records need IPv4"),
                None => bail!("`@{name}` names no backend or proxy"),
            },
        })?;
        if let DnsMode::Multi { n, base } = out.mode.answered() {
            check_multi(*n, base).map_err(anyhow::Error::msg)?;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use resolvelab_core::spec::dns::{DnsSetting, HostRef};

    /// The library's `backup` scenario with its third backend moved to `.99`.
    fn sc() -> Scenario {
        let mut s = crate::library::get("backup").unwrap();
        s.backends[2].host = Some(99);
        s
    }

    #[test]
    fn addresses_and_references() {
        let s = sc();
        let net = Net::assign(&s, 10, 2).unwrap();
        assert_eq!(net.hosts["b1"].to_string(), "127.10.2.20:8080");
        assert_eq!(net.hosts["b2"].to_string(), "127.10.2.30:8080");
        assert_eq!(net.hosts["b3"].to_string(), "127.10.2.99:8080");
        let resolve = |text: &str| {
            net.resolve(&text.parse::<DnsSetting<HostRef>>().unwrap())
                .map(|s| s.to_string())
        };
        assert_eq!(
            resolve("alternate:@b1,@b2").unwrap(),
            "alternate:127.10.2.20,127.10.2.30"
        );
        assert_eq!(
            resolve("multi:25@127.0.0.100").unwrap(),
            "multi:25@127.0.0.100"
        );
        assert_eq!(
            resolve("delay:1s+multi:25@@b3;aaaa=::1").unwrap(),
            "delay:1s+multi:25@127.10.2.99;aaaa=::1"
        );
        assert!(
            resolve("static:@nope")
                .unwrap_err()
                .to_string()
                .contains("`@nope` names no backend or proxy")
        );
        assert!(
            "static:@9x"
                .parse::<DnsSetting<HostRef>>()
                .unwrap_err()
                .contains("neither an IPv4 address nor `@NAME`")
        );
    }
}
