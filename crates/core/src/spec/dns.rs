//! DNS answer modes: what the lab's authority says for one name, switchable at runtime — the
//! one grammar the authority (`resolvelab dns`), the scenarios and the model all read.
//!
//! A mode is written `KIND[:ARGS]`; the wrappers `delay:DUR` and `truncate` may be chained in
//! front of another mode with `+` (`delay:200ms+alternate:127.0.0.20,127.0.0.30`). Set alone, a
//! wrapper applies to the mode the name is in at that moment (see [`DnsMode::wrap_onto`]).

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;
use std::time::Duration;

use crate::{dur, policy};

/// Default first address of `multi:N` when no `@BASE` is given.
pub const MULTI_DEFAULT_BASE: Ipv4Addr = Ipv4Addr::new(127, 0, 1, 1);

/// Largest `multi:N`: 4096 A records still fit a TCP answer (64 KiB).
pub const MULTI_MAX: u32 = 4096;

/// The help text listing every mode, shared by `--help` and error messages.
pub const MODES_HELP: &str =
    "  static:IP[,IP…]         every record, every time (two IPs = the \"two records\" window)
  alternate:IP1,IP2[,…]   one A record per answer, rotating on every query (GSLB)
  weighted:IP=W[,IP=W…]   one A record per answer, picked by weight from the seeded RNG
  multi:N[@BASE]          N consecutive addresses from BASE (default 127.0.1.1)
  nxdomain                NXDOMAIN (rcode 3): nginx logs `could not be resolved (3: Host not found)`
  servfail                SERVFAIL (rcode 2)
  refused                 REFUSED (rcode 5)
  nodata                  NOERROR with no records
  drop                    never answer (the resolver times out)
  delay:DUR[+MODE]        answer MODE (default: the current mode) after DUR
  truncate[+MODE]         TC bit and no records over UDP, the full answer over TCP
  default                 (control only) back to the name's configured mode";

const MODE_NAMES: &str = "static:IP,… alternate:IP1,IP2 weighted:IP=W,… multi:N[@BASE] nxdomain \
     servfail refused nodata drop delay:DUR[+MODE] truncate[+MODE]";

/// An A record's address as a mode carries it: an [`Ipv4Addr`] once the addresses are known,
/// or a [`HostRef`] as a scenario writes it (`@b1`), resolved per run by `Net::resolve`.
pub trait RecordAddr: Sized + Clone + PartialEq + fmt::Display {
    /// Read one address of a `kind:` mode's arguments.
    fn parse_record(kind: &str, s: &str) -> Result<Self, String>;
    /// An address given as such.
    fn from_ip(ip: Ipv4Addr) -> Self;
    /// The address, when it is one already (a reference is not).
    fn ip(&self) -> Option<Ipv4Addr>;
}

impl RecordAddr for Ipv4Addr {
    fn parse_record(kind: &str, s: &str) -> Result<Self, String> {
        parse_v4(kind, s)
    }
    fn from_ip(ip: Ipv4Addr) -> Self {
        ip
    }
    fn ip(&self) -> Option<Ipv4Addr> {
        Some(*self)
    }
}

/// An answer address in a scenario: a literal IPv4 address, or `@NAME`, the address the run
/// gives that backend or proxy (every run has a /24 of its own, so it is known only then).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostRef {
    /// A literal address.
    Ip(Ipv4Addr),
    /// `@NAME`: a backend's or proxy's address in the run.
    Named(String),
}

impl RecordAddr for HostRef {
    fn parse_record(kind: &str, s: &str) -> Result<Self, String> {
        let Some(name) = s.strip_prefix('@') else {
            return parse_v4(kind, s).map(HostRef::Ip);
        };
        let ok = name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if ok {
            Ok(HostRef::Named(name.to_string()))
        } else {
            Err(format!(
                "`{kind}`: `{s}` is neither an IPv4 address nor `@NAME` of a backend or proxy"
            ))
        }
    }
    fn from_ip(ip: Ipv4Addr) -> Self {
        HostRef::Ip(ip)
    }
    fn ip(&self) -> Option<Ipv4Addr> {
        match self {
            HostRef::Ip(ip) => Some(*ip),
            HostRef::Named(_) => None,
        }
    }
}

impl fmt::Display for HostRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostRef::Ip(ip) => write!(f, "{ip}"),
            HostRef::Named(n) => write!(f, "@{n}"),
        }
    }
}

/// One name's answer behaviour, its addresses of type `A`: [`Ipv4Addr`] (the default: what an
/// authority answers) or [`HostRef`] (a scenario's mode before its run's addresses are known).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DnsMode<A = Ipv4Addr> {
    /// All these A records in every answer.
    Static(Vec<A>),
    /// Exactly one A record per answer, rotating through the list on every A query.
    Alternate(Vec<A>),
    /// Exactly one A record per answer, chosen by weight from the name's seeded RNG.
    Weighted(Vec<(A, u32)>),
    /// `n` consecutive A records starting at `base`.
    Multi {
        /// How many records.
        n: u32,
        /// The first address.
        base: A,
    },
    /// NXDOMAIN.
    NxDomain,
    /// SERVFAIL.
    ServFail,
    /// REFUSED.
    Refused,
    /// NOERROR with an empty answer section.
    NoData,
    /// No answer at all.
    Drop,
    /// Answer `inner` after `by`. `inner = None` means "the mode in force when this is set".
    Delay {
        /// The added latency.
        by: Duration,
        /// The mode whose answer is delayed.
        inner: Option<Box<DnsMode<A>>>,
    },
    /// TC bit over UDP, `inner`'s full answer over TCP. `inner = None` as for [`DnsMode::Delay`].
    Truncate {
        /// The mode answered over TCP.
        inner: Option<Box<DnsMode<A>>>,
    },
}

impl<A: RecordAddr> DnsMode<A> {
    /// The same mode with every address mapped by `f` (a scenario's `@NAME` to the run's
    /// address); the first error stops it.
    pub fn try_map<B, E, F>(&self, f: &mut F) -> Result<DnsMode<B>, E>
    where
        F: FnMut(&A) -> Result<B, E>,
    {
        let list = |v: &[A], f: &mut F| v.iter().map(f).collect::<Result<Vec<B>, E>>();
        let wrapped = |i: &Option<Box<DnsMode<A>>>, f: &mut F| match i {
            Some(m) => m.try_map(f).map(|m| Some(Box::new(m))),
            None => Ok(None),
        };
        Ok(match self {
            DnsMode::Static(v) => DnsMode::Static(list(v, f)?),
            DnsMode::Alternate(v) => DnsMode::Alternate(list(v, f)?),
            DnsMode::Weighted(v) => DnsMode::Weighted(
                v.iter()
                    .map(|(a, w)| Ok((f(a)?, *w)))
                    .collect::<Result<_, E>>()?,
            ),
            DnsMode::Multi { n, base } => DnsMode::Multi {
                n: *n,
                base: f(base)?,
            },
            DnsMode::NxDomain => DnsMode::NxDomain,
            DnsMode::ServFail => DnsMode::ServFail,
            DnsMode::Refused => DnsMode::Refused,
            DnsMode::NoData => DnsMode::NoData,
            DnsMode::Drop => DnsMode::Drop,
            DnsMode::Delay { by, inner } => DnsMode::Delay {
                by: *by,
                inner: wrapped(inner, f)?,
            },
            DnsMode::Truncate { inner } => DnsMode::Truncate {
                inner: wrapped(inner, f)?,
            },
        })
    }

    /// A wrapper set alone (`delay:200ms`, `truncate`) is completed with the mode in force;
    /// a wrapper of the same kind already on `current` is replaced rather than stacked.
    pub fn wrap_onto(self, current: &DnsMode<A>) -> DnsMode<A> {
        let base = || -> Box<DnsMode<A>> {
            let mut m = current;
            // Peel the same kind of wrapper so `delay:1s` then `delay:2s` is 2 s, not 3 s.
            while let (DnsMode::Delay { inner: Some(i), .. }, DnsMode::Delay { .. })
            | (DnsMode::Truncate { inner: Some(i) }, DnsMode::Truncate { .. }) = (m, &self)
            {
                m = i;
            }
            Box::new(m.clone())
        };
        match self {
            DnsMode::Delay { by, inner: None } => DnsMode::Delay {
                by,
                inner: Some(base()),
            },
            DnsMode::Truncate { inner: None } => DnsMode::Truncate {
                inner: Some(base()),
            },
            other => other,
        }
    }

    /// The mode whose records are answered: `delay`/`truncate` wrappers peeled (a partial
    /// wrapper is its own answer).
    pub fn answered(&self) -> &DnsMode<A> {
        match self {
            DnsMode::Delay { inner: Some(i), .. } | DnsMode::Truncate { inner: Some(i) } => {
                i.answered()
            }
            other => other,
        }
    }

    /// Does this mode (or its inner mode) still need completing with [`DnsMode::wrap_onto`]?
    pub fn is_partial(&self) -> bool {
        match self {
            DnsMode::Delay { inner, .. } | DnsMode::Truncate { inner } => {
                inner.as_ref().is_none_or(|i| i.is_partial())
            }
            _ => false,
        }
    }
}

impl DnsMode {
    /// The addresses this mode may hand out (for the loopback check).
    pub fn addresses(&self) -> Vec<Ipv4Addr> {
        match self {
            DnsMode::Static(v) | DnsMode::Alternate(v) => v.clone(),
            DnsMode::Weighted(v) => v.iter().map(|(ip, _)| *ip).collect(),
            DnsMode::Multi { n, base } => {
                let b = u32::from(*base);
                (0..*n).map(|i| Ipv4Addr::from(b + i)).collect()
            }
            DnsMode::Delay { inner, .. } | DnsMode::Truncate { inner } => {
                inner.as_ref().map(|i| i.addresses()).unwrap_or_default()
            }
            _ => Vec::new(),
        }
    }

    /// Refuse to hand out non-loopback addresses (nginx would connect to them) unless allowed.
    pub fn check_loopback(&self, allow_remote: bool) -> Result<(), String> {
        if allow_remote {
            return Ok(());
        }
        match self {
            DnsMode::Multi { n, base } => {
                let last = Ipv4Addr::from(u32::from(*base) + n.saturating_sub(1));
                for ip in [*base, last] {
                    if !policy::is_loopback(IpAddr::V4(ip)) {
                        return Err(non_loopback(ip.into()));
                    }
                }
                Ok(())
            }
            _ => match self
                .addresses()
                .into_iter()
                .find(|ip| !policy::is_loopback(IpAddr::V4(*ip)))
            {
                Some(ip) => Err(non_loopback(ip.into())),
                None => Ok(()),
            },
        }
    }
}

/// The refusal of a non-loopback answer address, shared by every check of the policy.
pub fn non_loopback(ip: IpAddr) -> String {
    format!(
        "answer address {ip} is not loopback: nginx would send traffic to it; use 127.0.0.0/8 or \
         ::1 (or pass --allow-remote)"
    )
}

fn parse_list<A: RecordAddr>(kind: &str, args: &str) -> Result<Vec<A>, String> {
    let ips: Result<Vec<A>, String> = args
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| A::parse_record(kind, s))
        .collect();
    let ips = ips?;
    if ips.is_empty() {
        return Err(format!(
            "`{kind}` needs at least one IPv4 address, e.g. `{kind}:127.0.0.20,127.0.0.30`"
        ));
    }
    Ok(ips)
}

fn parse_v4(kind: &str, s: &str) -> Result<Ipv4Addr, String> {
    match s.parse::<IpAddr>() {
        Ok(IpAddr::V4(v4)) => Ok(v4),
        Ok(IpAddr::V6(_)) => Err(format!(
            "`{kind}`: `{s}` is IPv6; modes carry A records, give AAAA records with `aaaa=IP,…`"
        )),
        Err(_) => Err(format!("`{kind}`: `{s}` is not an IPv4 address")),
    }
}

impl<A: RecordAddr> FromStr for DnsMode<A> {
    type Err = String;

    fn from_str(s: &str) -> Result<DnsMode<A>, String> {
        let s = s.trim();
        let (head, tail) = match s.split_once('+') {
            Some((h, t)) => (h.trim(), Some(t.trim())),
            None => (s, None),
        };
        let (kind, args) = match head.split_once(':') {
            Some((k, a)) => (k.trim().to_ascii_lowercase(), Some(a.trim())),
            None => (head.to_ascii_lowercase(), None),
        };
        let inner = match tail {
            Some(t) if !t.is_empty() => Some(Box::new(t.parse::<DnsMode<A>>()?)),
            Some(_) => return Err(format!("mode `{s}`: nothing after `+`")),
            None => None,
        };
        if inner.is_some() && kind != "delay" && kind != "truncate" {
            return Err(format!(
                "mode `{s}`: only `delay:DUR` and `truncate` can be chained with `+`"
            ));
        }
        let no_args = |m: DnsMode<A>| match args {
            Some(a) if !a.is_empty() => {
                Err(format!("mode `{kind}` takes no arguments (got `{a}`)"))
            }
            _ => Ok(m),
        };
        let need = |example: &str| {
            args.filter(|a| !a.is_empty())
                .ok_or_else(|| format!("mode `{kind}` needs arguments, e.g. `{example}`"))
        };
        match kind.as_str() {
            "static" => Ok(DnsMode::Static(parse_list(
                "static",
                need("static:127.0.0.20")?,
            )?)),
            "alternate" => Ok(DnsMode::Alternate(parse_list(
                "alternate",
                need("alternate:127.0.0.20,127.0.0.30")?,
            )?)),
            "weighted" => {
                let a = need("weighted:127.0.0.20=3,127.0.0.30=1")?;
                let mut out = Vec::new();
                for part in a.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                    let (ip, w) = part.split_once('=').ok_or_else(|| {
                        format!("`weighted`: `{part}` should be IP=WEIGHT, e.g. `127.0.0.20=3`")
                    })?;
                    let ip = A::parse_record("weighted", ip.trim())?;
                    let w: u32 = w.trim().parse().map_err(|_| {
                        format!("`weighted`: weight `{w}` of {ip} is not a whole number")
                    })?;
                    out.push((ip, w));
                }
                if out.iter().map(|(_, w)| u64::from(*w)).sum::<u64>() == 0 {
                    return Err("`weighted`: the weights add up to 0".into());
                }
                Ok(DnsMode::Weighted(out))
            }
            "multi" => {
                let a = need("multi:25@127.0.1.1")?;
                let (n, base) = match a.split_once('@') {
                    Some((n, b)) => (n.trim(), A::parse_record("multi", b.trim())?),
                    None => (a, A::from_ip(MULTI_DEFAULT_BASE)),
                };
                let n: u32 = n
                    .parse()
                    .map_err(|_| format!("`multi`: count `{n}` is not a whole number"))?;
                if n == 0 || n > MULTI_MAX {
                    return Err(format!("`multi`: count must be 1..={MULTI_MAX}, got {n}"));
                }
                check_multi(n, &base)?;
                Ok(DnsMode::Multi { n, base })
            }
            "nxdomain" => no_args(DnsMode::NxDomain),
            "servfail" => no_args(DnsMode::ServFail),
            "refused" => no_args(DnsMode::Refused),
            "nodata" => no_args(DnsMode::NoData),
            "drop" => no_args(DnsMode::Drop),
            "delay" => {
                let by = dur::parse(need("delay:200ms")?).map_err(|e| format!("`delay`: {e}"))?;
                Ok(DnsMode::Delay { by, inner })
            }
            "truncate" => {
                no_args(DnsMode::NoData)?;
                Ok(DnsMode::Truncate { inner })
            }
            "" => Err(format!("empty mode: use one of {MODE_NAMES}")),
            other => Err(format!(
                "unknown mode `{other}`: use one of {MODE_NAMES} (see `resolvelab dns --help`)"
            )),
        }
    }
}

/// `multi:N@BASE` stays inside the address space (checked again once a reference is resolved).
pub fn check_multi<A: RecordAddr>(n: u32, base: &A) -> Result<(), String> {
    match base.ip() {
        Some(b) if u32::from(b).checked_add(n.saturating_sub(1)).is_none() => {
            Err(format!("`multi:{n}@{b}` runs past 255.255.255.255"))
        }
        _ => Ok(()),
    }
}

fn join<T: fmt::Display>(
    f: &mut fmt::Formatter<'_>,
    items: impl Iterator<Item = T>,
) -> fmt::Result {
    for (i, item) in items.enumerate() {
        if i > 0 {
            f.write_str(",")?;
        }
        write!(f, "{item}")?;
    }
    Ok(())
}

impl<A: RecordAddr> fmt::Display for DnsMode<A> {
    /// The canonical spelling, which [`DnsMode::from_str`] parses back to the same mode.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DnsMode::Static(v) => {
                f.write_str("static:")?;
                join(f, v.iter())
            }
            DnsMode::Alternate(v) => {
                f.write_str("alternate:")?;
                join(f, v.iter())
            }
            DnsMode::Weighted(v) => {
                f.write_str("weighted:")?;
                join(f, v.iter().map(|(ip, w)| format!("{ip}={w}")))
            }
            DnsMode::Multi { n, base } if base.ip() == Some(MULTI_DEFAULT_BASE) => {
                write!(f, "multi:{n}")
            }
            DnsMode::Multi { n, base } => write!(f, "multi:{n}@{base}"),
            DnsMode::NxDomain => f.write_str("nxdomain"),
            DnsMode::ServFail => f.write_str("servfail"),
            DnsMode::Refused => f.write_str("refused"),
            DnsMode::NoData => f.write_str("nodata"),
            DnsMode::Drop => f.write_str("drop"),
            DnsMode::Delay { by, inner } => {
                write!(f, "delay:{}", dur::format(*by))?;
                match inner {
                    Some(i) => write!(f, "+{i}"),
                    None => Ok(()),
                }
            }
            DnsMode::Truncate { inner } => {
                f.write_str("truncate")?;
                match inner {
                    Some(i) => write!(f, "+{i}"),
                    None => Ok(()),
                }
            }
        }
    }
}

/// A name's answer setting: `MODE[;ttl=DUR][;aaaa=IP,…]` — the value of `resolvelab dns --name
/// NAME=…`, of a scenario's `[dns.names]` and of a timeline event's `mode`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnsSetting<A = Ipv4Addr> {
    /// The mode (may be partial, like `delay:200ms`, where a change is meant).
    pub mode: DnsMode<A>,
    /// TTL of the records (seconds); `None` = the server's default TTL.
    pub ttl: Option<u32>,
    /// AAAA records (AAAA queries get NODATA when empty).
    pub aaaa: Vec<Ipv6Addr>,
}

/// Parse a TTL: `1s`, `30s`, `2m` or a bare number of seconds.
pub fn parse_ttl(s: &str) -> Result<u32, String> {
    let s = s.trim();
    if let Ok(n) = s.parse::<u32>() {
        return Ok(n);
    }
    let d = dur::parse(s).map_err(|e| format!("TTL: {e}"))?;
    if d.subsec_nanos() != 0 {
        return Err(format!(
            "TTL `{s}` must be whole seconds (DNS TTLs are in seconds)"
        ));
    }
    u32::try_from(d.as_secs()).map_err(|_| format!("TTL `{s}` is too large"))
}

/// Parse `IPv6[,IPv6…]`, the value of `aaaa=`.
pub fn parse_aaaa_list(s: &str) -> Result<Vec<Ipv6Addr>, String> {
    s.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| match p.parse::<IpAddr>() {
            Ok(IpAddr::V6(v6)) => Ok(v6),
            Ok(IpAddr::V4(_)) => Err(format!("aaaa: `{p}` is IPv4; AAAA records need IPv6")),
            Err(_) => Err(format!("aaaa: `{p}` is not an IPv6 address")),
        })
        .collect()
}

impl<A: RecordAddr> DnsSetting<A> {
    /// The same setting with every answer address mapped by `f` (see [`DnsMode::try_map`]).
    pub fn try_map<B, E>(&self, mut f: impl FnMut(&A) -> Result<B, E>) -> Result<DnsSetting<B>, E> {
        Ok(DnsSetting {
            mode: self.mode.try_map(&mut f)?,
            ttl: self.ttl,
            aaaa: self.aaaa.clone(),
        })
    }
}

impl<A: RecordAddr> fmt::Display for DnsSetting<A> {
    /// `MODE[;ttl=Ns][;aaaa=IP,…]`, which [`DnsSetting::from_str`] parses back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.mode)?;
        if let Some(t) = self.ttl {
            write!(f, ";ttl={t}s")?;
        }
        if !self.aaaa.is_empty() {
            f.write_str(";aaaa=")?;
            join(f, self.aaaa.iter())?;
        }
        Ok(())
    }
}

impl<A: RecordAddr> FromStr for DnsSetting<A> {
    type Err = String;
    fn from_str(s: &str) -> Result<DnsSetting<A>, String> {
        let mut parts = s.split(';');
        let mode: DnsMode<A> = parts.next().unwrap_or_default().parse()?;
        let mut out = DnsSetting {
            mode,
            ttl: None,
            aaaa: Vec::new(),
        };
        for opt in parts.map(str::trim).filter(|p| !p.is_empty()) {
            match opt.split_once('=') {
                Some(("ttl", v)) => out.ttl = Some(parse_ttl(v)?),
                Some(("aaaa", v)) => out.aaaa = parse_aaaa_list(v)?,
                _ => {
                    return Err(format!(
                        "unknown option `{opt}`; options are `;ttl=DUR` and `;aaaa=IP,…`"
                    ));
                }
            }
        }
        Ok(out)
    }
}

/// When a DNS change takes effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Align {
    /// As soon as it is set.
    #[default]
    Now,
    /// Exactly at the next query for the name: with nginx as the authority's only client, its
    /// next re-query. Written `next-requery`; `next-query` is the same.
    NextQuery,
    /// In the middle of a gap between two re-queries, so that the change should miss nginx.
    /// Written `between-requeries` (alias `between-queries`). Only a scenario's timeline can
    /// place it (the runner knows the re-query times); the authority alone cannot.
    BetweenQueries,
}

impl FromStr for Align {
    type Err = String;
    fn from_str(s: &str) -> Result<Align, String> {
        match s.trim() {
            "now" | "" => Ok(Align::Now),
            "next-requery" | "next-query" => Ok(Align::NextQuery),
            "between-requeries" | "between-queries" => Ok(Align::BetweenQueries),
            other => Err(format!(
                "align `{other}`: use `next-requery` (the name's next query: nginx's next \
                 re-query), `between-requeries` or `now`"
            )),
        }
    }
}

impl fmt::Display for Align {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Align::Now => "now",
            Align::NextQuery => "next-requery",
            Align::BetweenQueries => "between-requeries",
        })
    }
}

impl serde::Serialize for Align {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Align {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Align, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl serde::Serialize for DnsMode {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for DnsMode {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<DnsMode, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alignment_has_one_spelling_and_an_alias() {
        for (text, a) in [
            ("next-requery", Align::NextQuery),
            ("next-query", Align::NextQuery),
            ("between-requeries", Align::BetweenQueries),
            ("now", Align::Now),
        ] {
            assert_eq!(text.parse::<Align>().unwrap(), a);
            assert_eq!(a.to_string().parse::<Align>().unwrap(), a);
        }
        assert_eq!(Align::NextQuery.to_string(), "next-requery");
        assert!(
            "next"
                .parse::<Align>()
                .unwrap_err()
                .contains("next-requery")
        );
    }

    #[test]
    fn round_trips() {
        for s in [
            "static:127.0.0.20",
            "static:127.0.0.20,127.0.0.30",
            "alternate:127.0.0.20,127.0.0.30",
            "weighted:127.0.0.20=3,127.0.0.30=1",
            "multi:25",
            "multi:25@127.0.2.1",
            "nxdomain",
            "servfail",
            "refused",
            "nodata",
            "drop",
            "delay:200ms",
            "delay:1.5s+alternate:127.0.0.20,127.0.0.30",
            "truncate",
            "truncate+static:127.0.0.20",
            "delay:10ms+truncate+multi:3",
        ] {
            let m: DnsMode = s.parse().unwrap_or_else(|e| panic!("{s}: {e}"));
            assert_eq!(m.to_string(), s);
            assert_eq!(m.to_string().parse::<DnsMode>().unwrap(), m);
        }
        assert_eq!(
            "ALTERNATE: 127.0.0.20 , 127.0.0.30"
                .parse::<DnsMode>()
                .unwrap(),
            DnsMode::Alternate(vec![
                Ipv4Addr::new(127, 0, 0, 20),
                Ipv4Addr::new(127, 0, 0, 30)
            ])
        );
    }

    #[test]
    fn a_scenario_names_backends_and_resolves_them_later() {
        let s: DnsSetting<HostRef> = "delay:1s+multi:25@@b2;aaaa=::1".parse().unwrap();
        assert_eq!(s.to_string(), "delay:1s+multi:25@@b2;aaaa=::1");
        let DnsMode::Delay { inner: Some(m), .. } = &s.mode else {
            panic!("{s:?}")
        };
        assert_eq!(
            **m,
            DnsMode::Multi {
                n: 25,
                base: HostRef::Named("b2".into())
            }
        );
        let ip = |h: &HostRef| match h {
            HostRef::Ip(ip) => Ok(*ip),
            HostRef::Named(n) if n == "b2" => Ok(Ipv4Addr::new(127, 9, 9, 30)),
            HostRef::Named(n) => Err(format!("no @{n}")),
        };
        let r: DnsSetting = s.try_map(ip).unwrap();
        assert_eq!(r.to_string(), "delay:1s+multi:25@127.9.9.30;aaaa=::1");
        assert_eq!(r.to_string().parse::<DnsSetting>().unwrap(), r);
        let w: DnsSetting<HostRef> = "weighted:@b2=3,127.0.0.40=1;ttl=5s".parse().unwrap();
        assert_eq!(
            w.try_map(ip).unwrap().to_string(),
            "weighted:127.9.9.30=3,127.0.0.40=1;ttl=5s"
        );
        let e = "alternate:@b1,@b2".parse::<DnsMode<HostRef>>().unwrap();
        assert_eq!(e.try_map(&mut |h| ip(h)).unwrap_err(), "no @b1");
        // A reference is a scenario's word, not an authority's.
        assert!("static:@b1".parse::<DnsMode>().is_err());
        assert!(
            "static:@1x"
                .parse::<DnsMode<HostRef>>()
                .unwrap_err()
                .contains("@NAME")
        );
    }

    #[test]
    fn errors_are_explained() {
        let e = |s: &str| s.parse::<DnsMode>().unwrap_err();
        assert!(e("bogus").contains("unknown mode `bogus`"));
        assert!(e("bogus").contains("alternate:IP1,IP2"));
        assert!(!e("bogus").contains('\n'));
        assert!(e("static").contains("needs arguments"));
        assert!(e("static:::1").contains("aaaa="));
        assert!(e("static:1.2.3").contains("not an IPv4"));
        assert!(e("weighted:127.0.0.1").contains("IP=WEIGHT"));
        assert!(e("weighted:127.0.0.1=0").contains("add up to 0"));
        assert!(e("multi:0").contains("1..="));
        assert!(e("multi:5000").contains("1..="));
        assert!(e("multi:10@255.255.255.250").contains("runs past"));
        assert!(e("nxdomain:1").contains("takes no arguments"));
        assert!(e("delay:5").contains("no unit"));
        assert!(e("static:127.0.0.1+nodata").contains("only `delay"));
        assert!(e("delay:1s+").contains("nothing after"));
    }

    #[test]
    fn wrappers_complete_with_the_current_mode() {
        let alt: DnsMode = "alternate:127.0.0.20,127.0.0.30".parse().unwrap();
        let d: DnsMode = "delay:100ms".parse().unwrap();
        assert!(d.is_partial());
        let d = d.wrap_onto(&alt);
        assert!(!d.is_partial());
        assert_eq!(d.to_string(), "delay:100ms+alternate:127.0.0.20,127.0.0.30");
        // Same-kind wrapper replaces instead of stacking.
        let d2 = "delay:2s".parse::<DnsMode>().unwrap().wrap_onto(&d);
        assert_eq!(d2.to_string(), "delay:2s+alternate:127.0.0.20,127.0.0.30");
        let t = "truncate".parse::<DnsMode>().unwrap().wrap_onto(&d2);
        assert_eq!(
            t.to_string(),
            "truncate+delay:2s+alternate:127.0.0.20,127.0.0.30"
        );
        // A complete mode is kept as is.
        assert_eq!(DnsMode::NxDomain.wrap_onto(&alt), DnsMode::NxDomain);
    }

    #[test]
    fn loopback_policy() {
        let ok: DnsMode = "multi:25@127.0.1.1".parse().unwrap();
        assert!(ok.check_loopback(false).is_ok());
        let bad: DnsMode = "alternate:127.0.0.20,10.0.0.1".parse().unwrap();
        assert!(bad.check_loopback(false).unwrap_err().contains("10.0.0.1"));
        assert!(bad.check_loopback(true).is_ok());
        let edge: DnsMode = "multi:3@127.255.255.254".parse().unwrap();
        assert!(
            edge.check_loopback(false)
                .unwrap_err()
                .contains("128.0.0.0")
        );
        assert_eq!(ok.addresses().len(), 25);
    }
}
