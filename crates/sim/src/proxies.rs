//! Deterministic models of the other proxies' **DNS-event policies** — HAProxy 2.6, Envoy 1.40
//! and Caddy 2.11 — as the lab measured them (docs/COMPARISON.md): when each asks the authority,
//! what an answer, an NXDOMAIN or a failed lookup does to its hosts, and what a failed try on a
//! reused connection does to the request. They read the nginx model's [`SimConfig`] (servers,
//! DNS phases, fault windows, load, latency) and leave the same run directory, so the one
//! checker judges them like any run.
//!
//! | event | HAProxy | Envoy (STRICT_DNS) | Caddy (dynamic `a`) |
//! |---|---|---|---|
//! | when it asks | every `period` (1 s) | every `period` (5 s) | inside a request once its answer is older than `period` (1 min); after a failure, every request |
//! | answer | the server's address changes in place (one address per server line) | the hosts are replaced | the upstreams are replaced |
//! | NXDOMAIN | the last address is kept for `hold_nx` (30 s), then maintenance | no hosts | that request fails |
//! | other failure | kept for `hold_other` (30 s), then maintenance | hosts kept | that request fails |
//! | reused connection closed by the backend | the client's connection is closed, nothing logged (unless `retry_reused`: a `retry-on` with `empty-response`) | retried on another host; the retry may meet the same; at most `max_active_retries` (3) at once, more fail at once (`UO`) | retried on a new connection by Go's transport |
//!
//! ```
//! use resolvelab_sim::nginx::{DnsPhase, ServerLine, SimConfig, Us};
//! use resolvelab_sim::proxies::{Policy, Proxy, simulate_counts};
//! let mut cfg = SimConfig::new(vec![ServerLine::resolve("app.test.local", 8080)]);
//! cfg.duration = Us::s(20);
//! cfg.dns = vec![
//!     DnsPhase::lab(Us(0), "app.test.local", "static:127.0.0.20").unwrap(),
//!     DnsPhase::lab(Us::s(5), "app.test.local", "nxdomain").unwrap(),
//!     DnsPhase::lab(Us::s(12), "app.test.local", "static:127.0.0.20").unwrap(),
//! ];
//! // HAProxy rides out a 7 s NXDOMAIN on its 30 s hold; Envoy's refresh at 9 s empties the
//! // cluster until the one at 14 s.
//! let h = simulate_counts(&cfg, &Policy::of(Proxy::Haproxy)).unwrap();
//! assert_eq!(h.status_503, 0);
//! let e = simulate_counts(&cfg, &Policy::of(Proxy::Envoy)).unwrap();
//! assert_eq!(e.status_503, 1500); // 5 s at 300 requests/s
//! ```

use crate::nginx::predict::PerDay;
use crate::nginx::{DnsMode, FaultKind, Logs, Sampler, SimConfig, SimSummary, Us};
use anyhow::{Context, Result, bail};
use rand::{RngExt, SeedableRng};
use serde::Serialize;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;

/// Which proxy: the vocabulary's [`ProxyKind`](resolvelab_core::spec::engine::ProxyKind).
pub use resolvelab_core::spec::engine::ProxyKind as Proxy;

/// A proxy's DNS-event policy and its retry behaviour.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Policy {
    /// Which proxy.
    pub proxy: Proxy,
    /// HAProxy's `timeout resolve`, Envoy's `dns_refresh_rate`, Caddy's `refresh`.
    pub period: Us,
    /// HAProxy's `hold nx` (also for an empty answer).
    pub hold_nx: Us,
    /// HAProxy's `hold other`/`hold timeout`/`hold refused`.
    pub hold_other: Us,
    /// Retries after a failed try.
    pub retries: u32,
    /// A try on a reused connection that the backend closed is tried again (HAProxy only with
    /// a `retry-on` that includes `empty-response`, e.g. `retry-on conn-failure empty-response`).
    pub retry_reused: bool,
    /// Retries in flight at once, more fail at once (Envoy's `max_retries` circuit breaker);
    /// 0: no limit.
    pub max_active_retries: u32,
    /// A retry waits a uniform time up to this after the failure (Envoy's fully jittered
    /// back-off, base 25 ms); it counts as in flight from the failure on.
    pub retry_backoff: Us,
}

impl Policy {
    /// The proxy's defaults, as the lab renders them.
    pub fn of(proxy: Proxy) -> Policy {
        let base = Policy {
            proxy,
            period: Us::s(1),
            hold_nx: Us::s(30),
            hold_other: Us::s(30),
            retries: 1,
            retry_reused: true,
            max_active_retries: 0,
            retry_backoff: Us(0),
        };
        match proxy {
            Proxy::Haproxy => Policy {
                retries: 3,
                retry_reused: false,
                ..base
            },
            Proxy::Envoy => Policy {
                period: Us::s(5),
                max_active_retries: 3,
                retry_backoff: Us::ms(25),
                ..base
            },
            Proxy::Caddy => Policy {
                period: Us::s(60),
                ..base
            },
        }
    }
}

/// One name's state in the proxy.
struct Name {
    name: String,
    /// What the proxy sends to now (HAProxy: the one address of each server line of the name).
    hosts: Vec<IpAddr>,
    /// When the last good answer came (HAProxy's hold counts from it; Caddy's cache too).
    last_good: Option<i64>,
    /// HAProxy: the server is in maintenance.
    down: bool,
    /// The next poll (HAProxy, Envoy).
    next_poll: i64,
    /// `alternate` answers given so far.
    alternations: u64,
}

/// An upstream connection: free from `free_at` (the end of its last response), and, when
/// the backend reclaims it, closed at `close_at`.
struct Conn {
    free_at: i64,
    close_at: Option<i64>,
}

/// The faults acting on one try.
#[derive(Default)]
struct Faults {
    refused: Option<usize>,
    reclaim: Option<(usize, f64, i64, i64)>,
    stale: Option<(usize, f64, i64, i64)>,
    delay: i64,
}

/// What a lookup got.
enum Answer {
    Addrs(Vec<IpAddr>),
    NxDomain,
    Failed(&'static str),
}

struct Model<'a> {
    cfg: &'a SimConfig,
    pol: &'a Policy,
    logs: Option<Logs>,
    names: Vec<Name>,
    rng: rand_chacha::ChaCha8Rng,
    latency: Sampler,
    backend_latency: Vec<(IpAddr, Sampler)>,
    /// Round-robin position.
    next_host: usize,
    /// End times of retries in flight (Envoy's circuit breaker).
    active_retries: Vec<i64>,
    /// Idle and busy upstream connections per address.
    pools: std::collections::HashMap<SocketAddr, Vec<Conn>>,
    dns_id: u16,
    sum: SimSummary,
}

/// Run the model of `pol` and write `access.log`, `dns.jsonl`, `events.jsonl` and `load.jsonl`
/// into `out_dir`, like a lab run of that proxy.
pub fn simulate(cfg: &SimConfig, pol: &Policy, out_dir: &Path) -> Result<SimSummary> {
    check(cfg)?;
    std::fs::create_dir_all(out_dir)
        .with_context(|| format!("cannot create {}", out_dir.display()))?;
    let logs = Logs::create(out_dir, cfg)?;
    let mut m = Model::new(cfg, pol, Some(logs));
    m.run()
        .with_context(|| format!("writing logs into {}", out_dir.display()))?;
    Ok(m.sum)
}

/// The same, counting only.
pub fn simulate_counts(cfg: &SimConfig, pol: &Policy) -> Result<SimSummary> {
    check(cfg)?;
    let mut m = Model::new(cfg, pol, None);
    m.run()?;
    Ok(m.sum)
}

/// What these models do not play: refused rather than answered wrongly.
fn check(cfg: &SimConfig) -> Result<()> {
    cfg.validate()?;
    for f in &cfg.faults {
        match f.fault {
            FaultKind::Reclaim { .. }
            | FaultKind::Stale { .. }
            | FaultKind::Refuse
            | FaultKind::Delay { .. } => {}
            ref other => bail!(
                "the proxy models play reclaim, stale, refuse and added latency, not {other:?}: run it on the real proxy"
            ),
        }
    }
    if let Some(p) = cfg
        .dns
        .iter()
        .find(|p| matches!(p.mode.answered(), DnsMode::Drop))
    {
        bail!(
            "{}: the proxy models do not play an authority that does not answer (what each does while its lookup times out is for the lab)",
            p.name
        );
    }
    if cfg.servers.iter().any(|s| s.per_request)
        || cfg.zone_filler.is_some()
        || cfg.retry_shim.is_some()
    {
        bail!(
            "per-request resolution, a zone filler and the retry shim are nginx's: the proxy models do not play them"
        );
    }
    Ok(())
}

impl<'a> Model<'a> {
    fn new(cfg: &'a SimConfig, pol: &'a Policy, logs: Option<Logs>) -> Model<'a> {
        let mut names: Vec<Name> = Vec::new();
        for s in &cfg.servers {
            if s.host.parse::<IpAddr>().is_err() && !names.iter().any(|n| n.name == s.host) {
                names.push(Name {
                    name: s.host.clone(),
                    hosts: Vec::new(),
                    last_good: None,
                    down: false,
                    next_poll: cfg.epoch_us - cfg.warmup.0,
                    alternations: 0,
                });
            }
        }
        let backend_latency = cfg
            .backend_latency
            .iter()
            .filter_map(|(a, l)| Some((a.parse::<SocketAddr>().ok()?.ip(), Sampler::new(l))))
            .collect();
        Model {
            cfg,
            pol,
            logs,
            names,
            rng: rand_chacha::ChaCha8Rng::seed_from_u64(cfg.seed ^ 0x7072_6f78),
            latency: Sampler::new(&cfg.latency),
            backend_latency,
            next_host: 0,
            active_retries: Vec::new(),
            pools: std::collections::HashMap::new(),
            dns_id: 1,
            sum: SimSummary {
                seed: cfg.seed,
                fault_hits: vec![0; cfg.faults.len()],
                ..SimSummary::default()
            },
        }
    }

    fn run(&mut self) -> Result<()> {
        let cfg = self.cfg;
        let mut load = cfg.arrivals();
        while let Some((k, t)) = load.next_with(&mut self.rng) {
            self.polls_until(t)?;
            self.request(k, t)?;
        }
        self.polls_until(cfg.epoch_us + cfg.duration.0)?;
        self.sum.simulated_us = cfg.duration.0;
        if let Some(l) = &mut self.logs {
            l.flush()?;
        }
        Ok(())
    }

    /// The mode of `name` at `t` (its latest phase at or before `t`; the first one is its mode
    /// from the proxy's start), and whether it is an injection (not the name's first phase),
    /// as the authority flags its answers.
    fn mode_at(&self, name: &str, t: i64) -> Option<(DnsMode, String, bool)> {
        let rel = t - self.cfg.epoch_us;
        let of_name = || {
            self.cfg
                .dns
                .iter()
                .enumerate()
                .filter(|(_, p)| p.name == name)
        };
        let first = of_name().next().map(|(i, _)| i);
        of_name()
            .rfind(|(i, p)| Some(*i) == first || p.at.0.max(-self.cfg.warmup.0) <= rel)
            .map(|(i, p)| (p.mode.answered().clone(), p.spec(), Some(i) != first))
    }

    /// Ask the authority for name `i` at `t`, and log the query.
    fn lookup(&mut self, i: usize, t: i64) -> Result<Answer> {
        let Some((mode, text, injected)) = self.mode_at(&self.names[i].name, t) else {
            return Ok(Answer::NxDomain);
        };
        let answer = match mode {
            DnsMode::Static(v) => Answer::Addrs(v.into_iter().map(IpAddr::V4).collect()),
            DnsMode::Alternate(v) => {
                let c = self.names[i].alternations;
                self.names[i].alternations += 1;
                Answer::Addrs(vec![IpAddr::V4(v[(c as usize) % v.len()])])
            }
            DnsMode::Multi { n, base } => Answer::Addrs(
                (0..n)
                    .map(|k| IpAddr::V4(std::net::Ipv4Addr::from(u32::from(base) + k)))
                    .collect(),
            ),
            DnsMode::NxDomain | DnsMode::NoData => Answer::NxDomain,
            DnsMode::Refused => Answer::Failed("REFUSED"),
            _ => Answer::Failed("SERVFAIL"),
        };
        self.sum.requeries += 1;
        if let Some(l) = &mut self.logs {
            let (rcode, addrs): (&str, &[IpAddr]) = match &answer {
                Answer::Addrs(a) => ("NOERROR", a),
                Answer::NxDomain => ("NXDOMAIN", &[]),
                Answer::Failed(r) => (r, &[]),
            };
            let changed = match &answer {
                Answer::Addrs(a) => {
                    let mut a = a.clone();
                    a.sort();
                    let mut h = self.names[i].hosts.clone();
                    h.sort();
                    a != h
                }
                _ => !self.names[i].hosts.is_empty(),
            };
            self.dns_id = self.dns_id.wrapping_add(1);
            // A resolver with one socket (HAProxy) asks from one port; Envoy's and Caddy's
            // open one per query.
            let port = match self.pol.proxy {
                Proxy::Haproxy => 40_000,
                _ => 40_000 + (self.sum.requeries % 20_000) as u16,
            };
            let name = self.names[i].name.clone();
            l.dns(
                t,
                port,
                &name,
                "A",
                self.dns_id,
                &text,
                rcode,
                addrs,
                1,
                changed,
                injected,
                false,
                false,
            )?;
        }
        Ok(answer)
    }

    fn state(&mut self, t: i64, note: String) -> Result<()> {
        if let Some(l) = &mut self.logs {
            l.proxy_state(t, self.pol.proxy.id(), &note)?;
        }
        Ok(())
    }

    /// The polls of HAProxy and Envoy due by `t`.
    fn polls_until(&mut self, t: i64) -> Result<()> {
        if self.pol.proxy == Proxy::Caddy {
            return Ok(());
        }
        loop {
            let Some(i) = (0..self.names.len()).min_by_key(|&i| self.names[i].next_poll) else {
                return Ok(());
            };
            let at = self.names[i].next_poll;
            if at > t {
                return Ok(());
            }
            self.names[i].next_poll = at + self.pol.period.0;
            let answer = self.lookup(i, at)?;
            match self.pol.proxy {
                Proxy::Haproxy => self.haproxy_answer(i, at, answer)?,
                _ => self.envoy_answer(i, at, answer)?,
            }
        }
    }

    fn haproxy_answer(&mut self, i: usize, t: i64, answer: Answer) -> Result<()> {
        let n = &mut self.names[i];
        match answer {
            Answer::Addrs(a) if !a.is_empty() => {
                // One address per server line: kept while the answer still holds it.
                let keep = n.hosts.first().filter(|h| a.contains(h)).copied();
                let new = keep.unwrap_or(a[0]);
                let old = n.hosts.first().copied();
                n.hosts = vec![new];
                n.last_good = Some(t);
                let name = n.name.clone();
                let was_down = std::mem::replace(&mut n.down, false);
                if let Some(old) = old.filter(|o| *o != new) {
                    self.sum.swaps += 1;
                    self.state(
                        t,
                        format!("be/s1 changed its IP from {old} to {new} by lab/lab."),
                    )?;
                }
                if was_down {
                    self.state(
                        t,
                        format!("Server be/s1 ('{name}') is UP/READY (resolves again)."),
                    )?;
                }
            }
            other => {
                let hold = match other {
                    Answer::Failed(_) => self.pol.hold_other,
                    _ => self.pol.hold_nx,
                };
                let expired = n.last_good.is_none_or(|g| t - g >= hold.0);
                if expired && !n.down && !n.hosts.is_empty() {
                    n.down = true;
                    n.hosts.clear();
                    let why = if matches!(other, Answer::Failed(_)) {
                        "DNS timeout status"
                    } else {
                        "DNS NX status"
                    };
                    self.state(t, format!("Server be/s1 is going DOWN for maintenance ({why}). 0 active and 0 backup servers left."))?;
                }
            }
        }
        Ok(())
    }

    fn envoy_answer(&mut self, i: usize, t: i64, answer: Answer) -> Result<()> {
        let n = &mut self.names[i];
        let name = n.name.clone();
        let new = match answer {
            Answer::Addrs(a) => a,
            Answer::NxDomain => Vec::new(),
            Answer::Failed(_) => {
                return self.state(
                    t,
                    format!(
                        "DNS refresh rate reset for {name}, (failure) refresh rate {} ms",
                        self.pol.period.0 / 1000
                    ),
                );
            }
        };
        let (mut a, mut b) = (new.clone(), n.hosts.clone());
        a.sort();
        b.sort();
        if a != b {
            n.hosts = new;
            if !b.is_empty() && !a.is_empty() {
                self.sum.swaps += 1;
            }
            self.state(t, format!("DNS hosts have changed for {name}"))?;
        }
        Ok(())
    }

    /// Caddy's lookup inside a request: `false` when it failed (the request fails).
    fn caddy_lookup(&mut self, t: i64) -> Result<bool> {
        for i in 0..self.names.len() {
            let fresh = self.names[i]
                .last_good
                .is_some_and(|g| t - g < self.pol.period.0);
            if fresh {
                continue;
            }
            let name = self.names[i].name.clone();
            match self.lookup(i, t)? {
                Answer::Addrs(a) if !a.is_empty() => {
                    let changed = !self.names[i].hosts.is_empty() && {
                        let (mut x, mut y) = (a.clone(), self.names[i].hosts.clone());
                        x.sort();
                        y.sort();
                        x != y
                    };
                    self.sum.swaps += changed as u64;
                    self.names[i].hosts = a;
                    self.names[i].last_good = Some(t);
                    self.state(t, format!("refreshing A upstreams {name}"))?;
                }
                Answer::Addrs(_) | Answer::NxDomain => {
                    self.state(t, format!("failed getting dynamic upstreams; falling back to static upstreams: lookup {name}: no such host"))?;
                    return Ok(false);
                }
                Answer::Failed(r) => {
                    self.state(t, format!("failed getting dynamic upstreams; falling back to static upstreams: lookup {name}: server misbehaving ({r})"))?;
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }

    /// Where a request may go: the resolved hosts and fixed servers, the backups if none.
    fn hosts(&self) -> Vec<SocketAddr> {
        let of = |backup: bool| -> Vec<SocketAddr> {
            let mut v = Vec::new();
            for s in self.cfg.servers.iter().filter(|s| s.backup == backup) {
                match s.host.parse::<IpAddr>() {
                    Ok(ip) => v.push(SocketAddr::new(ip, s.port)),
                    Err(_) => {
                        if let Some(n) = self.names.iter().find(|n| n.name == s.host) {
                            v.extend(n.hosts.iter().map(|ip| SocketAddr::new(*ip, s.port)));
                        }
                    }
                }
            }
            v
        };
        let primary = of(false);
        if primary.is_empty() {
            of(true)
        } else {
            primary
        }
    }

    /// The faults acting on a try to `a` at `t`: refused, reclaim, stale (each its window's
    /// index, probability and delay range), added µs.
    fn faults_at(&self, a: SocketAddr, t: i64) -> Faults {
        let rel = t - self.cfg.epoch_us;
        let mut out = Faults::default();
        for (k, f) in self.cfg.faults.iter().enumerate() {
            if rel < f.start.0 || rel >= f.end.0 {
                continue;
            }
            let hit = match f.target.as_deref() {
                None => true,
                Some(tg) => tg.parse::<SocketAddr>().map_or_else(
                    |_| {
                        tg.trim_matches(['[', ']'])
                            .parse::<IpAddr>()
                            .is_ok_and(|ip| ip == a.ip())
                    },
                    |sa| sa == a,
                ),
            };
            if !hit {
                continue;
            }
            match f.fault {
                FaultKind::Refuse => out.refused = Some(k),
                FaultKind::Reclaim {
                    p,
                    delay_min,
                    delay_max,
                } => {
                    out.reclaim = Some((k, p, delay_min.0, delay_max.0.max(delay_min.0)));
                }
                FaultKind::Stale {
                    p,
                    delay_min,
                    delay_max,
                } => {
                    out.stale = Some((k, p, delay_min.0, delay_max.0.max(delay_min.0)));
                }
                FaultKind::Delay { by } => out.delay += by.0,
                _ => {}
            }
        }
        out
    }

    fn sample_latency(&mut self, a: SocketAddr) -> i64 {
        match self.backend_latency.iter().find(|(ip, _)| *ip == a.ip()) {
            Some((_, s)) => s.sample(&mut self.rng),
            None => self.latency.sample(&mut self.rng),
        }
    }

    /// One try at `a` starting at `t`: `Ok(end)` served, `Err((end, reused_closed))` failed.
    /// Connections are pooled per address and reused most recent first (every proxy here
    /// keeps idle upstream connections by default); a connection the backend reclaims closes
    /// `delay` after its response, and a request that reuses it before then fails when it
    /// closes. A closed connection leaves the pool as the proxy sees it close.
    fn try_at(&mut self, a: SocketAddr, t: i64) -> std::result::Result<i64, (i64, bool)> {
        let Faults {
            refused,
            reclaim,
            stale,
            delay,
        } = self.faults_at(a, t);
        let pool = self.pools.entry(a).or_default();
        pool.retain(|c| c.close_at.is_none_or(|x| x > t));
        if let Some(k) = refused {
            pool.clear();
            self.sum.fault_hits[k] += 1;
            self.sum.try_failures += 1;
            return Err((t + 100, false));
        }
        let idle = pool
            .iter()
            .enumerate()
            .filter(|(_, c)| c.free_at <= t)
            .max_by_key(|(_, c)| c.free_at)
            .map(|(i, _)| i);
        if let Some(i) = idle {
            let c = pool.swap_remove(i);
            if let Some(close) = c.close_at {
                // Reused inside the reclaim's gap: the backend closes it instead of answering.
                if let Some((k, ..)) = reclaim {
                    self.sum.fault_hits[k] += 1;
                }
                self.sum.try_failures += 1;
                return Err((close, true));
            }
            // A cached connection that went stale some other way (a production question's
            // per-try probability).
            if let Some((k, p, lo, hi)) = stale
                && self.rng.random::<f64>() < p
            {
                self.sum.fault_hits[k] += 1;
                self.sum.try_failures += 1;
                return Err((t + self.rng.random_range(lo..=hi), true));
            }
        }
        let end = t + delay + self.sample_latency(a);
        let close_at = match reclaim {
            Some((_, p, lo, hi)) if self.rng.random::<f64>() < p => {
                Some(end + self.rng.random_range(lo..=hi))
            }
            _ => None,
        };
        self.pools.entry(a).or_default().push(Conn {
            free_at: end,
            close_at,
        });
        Ok(end)
    }

    fn request(&mut self, k: u64, t: i64) -> Result<()> {
        self.sum.requests += 1;
        if self.pol.proxy == Proxy::Caddy && !self.caddy_lookup(t)? {
            return self.answer(k, t, t + 500, 503, None);
        }
        let hosts = self.hosts();
        if hosts.is_empty() {
            return self.answer(k, t, t + 200, 503, None);
        }
        let first = match self.pol.proxy {
            Proxy::Caddy => hosts[self.rng.random_range(0..hosts.len())],
            _ => {
                self.next_host = (self.next_host + 1) % hosts.len();
                hosts[self.next_host]
            }
        };
        let (mut at, mut reused_closed) = match self.try_at(first, t) {
            Ok(end) => return self.answer(k, t, end, 200, Some(first)),
            Err(e) => e,
        };
        if self.pol.proxy == Proxy::Caddy && reused_closed {
            // Go's transport sends the request again on a new connection, whatever Caddy's
            // own retries.
            let end = at + self.sample_latency(first);
            return self.answer(k, t, end, 200, Some(first));
        }
        let mut last = first;
        for _ in 0..self.pol.retries {
            if reused_closed && !self.pol.retry_reused {
                break;
            }
            if self.pol.max_active_retries > 0 {
                self.active_retries.retain(|&e| e > at);
                if self.active_retries.len() as u32 >= self.pol.max_active_retries {
                    // The circuit breaker: no retry, the request fails now.
                    return self.answer(k, t, at, 502, Some(last));
                }
            }
            self.sum.retries += 1;
            let failed_at = at;
            if self.pol.retry_backoff.0 > 0 {
                at += self.rng.random_range(0..=self.pol.retry_backoff.0);
            }
            // Envoy goes to another host (`previous_hosts`), Caddy selects again at random,
            // HAProxy stays on the server (no `option redispatch`).
            let next = match self.pol.proxy {
                Proxy::Envoy => hosts.iter().copied().find(|h| *h != last).unwrap_or(last),
                Proxy::Caddy => hosts[self.rng.random_range(0..hosts.len())],
                Proxy::Haproxy => last,
            };
            match self.try_at(next, at) {
                Ok(end) => {
                    if self.pol.max_active_retries > 0 {
                        self.active_retries.push(end.max(failed_at));
                    }
                    return self.answer(k, t, end, 200, Some(next));
                }
                Err((end, closed)) => {
                    if self.pol.max_active_retries > 0 {
                        self.active_retries.push(end.max(failed_at));
                    }
                    (at, reused_closed, last) = (end, closed, next);
                }
            }
        }
        if reused_closed && self.pol.proxy == Proxy::Haproxy && !self.pol.retry_reused {
            // HAProxy closes the client's connection and logs nothing.
            return self.closed(k, t, at);
        }
        self.answer(k, t, at, 502, Some(last))
    }

    fn answer(
        &mut self,
        k: u64,
        t: i64,
        end: i64,
        status: u16,
        upstream: Option<SocketAddr>,
    ) -> Result<()> {
        match status {
            200 => self.sum.ok += 1,
            502 => self.sum.status_502 += 1,
            _ => self.sum.status_503 += 1,
        }
        if let Some(l) = &mut self.logs {
            let up = upstream.map_or_else(|| "be".to_string(), |a| a.to_string());
            l.access_simple(t, end, status, &up, k, upstream.is_some())?;
        }
        Ok(())
    }

    fn closed(&mut self, k: u64, t: i64, end: i64) -> Result<()> {
        self.sum.upstream_failures += 1;
        if let Some(l) = &mut self.logs {
            l.load_closed(t, end, k)?;
        }
        Ok(())
    }
}

/// One variant of a proxy's prediction: client errors per day.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProxyPrediction {
    /// `baseline` or the mitigation's name.
    pub variant: String,
    /// What it changes.
    pub change: String,
    /// Simulated requests.
    pub requests: u64,
    /// Every client error (the three below).
    pub total: PerDay,
    /// 502s (a failed try; Envoy's own 503 after one).
    pub failed_try: PerDay,
    /// 503s with no server (a hold that ran out, an emptied cluster, a failed lookup).
    pub no_server: PerDay,
    /// Client connections closed without an answer (HAProxy, a reused connection that failed).
    pub closed: PerDay,
}

/// `resolvelab sim predict --engine PROXY`: the production churn of `p` (the authority's
/// answer changes every `swap_interval`; a try on a cached connection fails with
/// `first_try_failure`) on the proxy's policy and on its mitigations, per day.
pub fn predict(
    p: &crate::nginx::predict::PredictInput,
    proxy: Proxy,
) -> Result<Vec<ProxyPrediction>> {
    let mut base = crate::nginx::predict::baseline_config(p);
    // The answer changes every swap interval whoever asks (the nginx model's `alternate`
    // changes it at nginx's every query, which is the same thing there).
    let name = base.dns[0].name.clone();
    let every = p.swap_interval.0.max(1_000_000);
    base.dns = (0..=p.sample.0 / every)
        .map(|k| {
            let ip = if k % 2 == 0 {
                "127.0.0.20"
            } else {
                "127.0.0.30"
            };
            let at = if k == 0 { Us(0) } else { Us(k * every) };
            crate::nginx::DnsPhase::lab(at, &name, &format!("static:{ip}"))
        })
        .collect::<Result<_>>()?;
    let pol = Policy::of(proxy);
    let mut variants = vec![(
        "baseline".to_string(),
        "the proxy's defaults".to_string(),
        pol.clone(),
    )];
    match proxy {
        Proxy::Haproxy => variants.push((
            "retry-on".into(),
            "`retry-on conn-failure empty-response` (a request whose reused connection closed before any response byte is sent again)".into(),
            Policy {
                retry_reused: true,
                ..pol.clone()
            },
        )),
        Proxy::Envoy => variants.push((
            "retry-budget".into(),
            "circuit breaker `max_retries: 1000`, `num_retries: 3`".into(),
            Policy {
                max_active_retries: 1000,
                retries: 3,
                ..pol.clone()
            },
        )),
        Proxy::Caddy => {}
    }
    let scale = 86_400e6 / p.sample.0.max(1) as f64;
    variants
        .into_iter()
        .map(|(variant, change, pol)| {
            let s = simulate_counts(&base, &pol)?;
            let closed = s.upstream_failures;
            Ok(ProxyPrediction {
                variant,
                change,
                requests: s.requests,
                total: PerDay::new(s.status_502 + s.status_503 + closed, scale),
                failed_try: PerDay::new(s.status_502, scale),
                no_server: PerDay::new(s.status_503, scale),
                closed: PerDay::new(closed, scale),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nginx::{DnsPhase, FaultWindow, ServerLine};

    fn churn(secs: i64) -> SimConfig {
        let mut cfg = SimConfig::new(vec![ServerLine::resolve("app.test.local", 8080)]);
        cfg.duration = Us::s(secs);
        cfg.rps = 300.0;
        cfg.dns = vec![
            DnsPhase::lab(Us(0), "app.test.local", "alternate:127.0.0.20,127.0.0.30").unwrap(),
        ];
        cfg.faults = vec![FaultWindow {
            start: Us(-1_000_000),
            end: Us::s(secs),
            target: None,
            fault: FaultKind::Reclaim {
                p: 0.3,
                delay_min: Us(0),
                delay_max: Us::ms(50),
            },
        }];
        cfg
    }

    #[test]
    fn haproxy_closes_what_a_reclaim_breaks_unless_told_to_retry() {
        let s = simulate_counts(&churn(30), &Policy::of(Proxy::Haproxy)).unwrap();
        let share = s.upstream_failures as f64 / s.requests as f64;
        // The lab's generation-race on HAProxy: 8,144 of 36,000 (22.6 %) closed.
        assert!((0.19..0.26).contains(&share), "{share}");
        let retry = Policy {
            retry_reused: true,
            ..Policy::of(Proxy::Haproxy)
        };
        let s = simulate_counts(&churn(30), &retry).unwrap();
        assert_eq!(s.upstream_failures, 0);
    }

    #[test]
    fn envoy_retries_but_its_breaker_and_a_second_reclaim_fail_some() {
        let s = simulate_counts(&churn(30), &Policy::of(Proxy::Envoy)).unwrap();
        assert!(s.status_502 > 0 && s.status_502 < s.requests / 10, "{s:?}");
        assert_eq!(s.status_503, 0, "swaps alone leave hosts");
        let s = simulate_counts(&churn(30), &Policy::of(Proxy::Caddy)).unwrap();
        assert_eq!(
            s.ok, s.requests,
            "Go's transport sends again on a new connection"
        );
    }

    #[test]
    fn caddy_fails_only_requests_whose_lookup_meets_the_failure() {
        let mut cfg = SimConfig::new(vec![ServerLine::resolve("app.test.local", 8080)]);
        cfg.duration = Us::s(20);
        cfg.rps = 100.0;
        cfg.dns = vec![
            DnsPhase::lab(Us(0), "app.test.local", "static:127.0.0.20").unwrap(),
            DnsPhase::lab(Us::s(5), "app.test.local", "nxdomain").unwrap(),
            DnsPhase::lab(Us::s(14), "app.test.local", "static:127.0.0.20").unwrap(),
        ];
        // With the default 1 min cache the 9 s NXDOMAIN is never asked about.
        let s = simulate_counts(&cfg, &Policy::of(Proxy::Caddy)).unwrap();
        assert_eq!(s.status_503, 0);
        // With a 1 s cache every request from the first stale lookup to the end fails.
        let short = Policy {
            period: Us::s(1),
            ..Policy::of(Proxy::Caddy)
        };
        let s = simulate_counts(&cfg, &short).unwrap();
        assert!((800..=1000).contains(&s.status_503), "{}", s.status_503);
    }

    #[test]
    fn a_haproxy_hold_ends_in_maintenance() {
        let mut cfg = SimConfig::new(vec![ServerLine::resolve("app.test.local", 8080)]);
        cfg.duration = Us::s(24);
        cfg.rps = 300.0;
        cfg.dns = vec![
            DnsPhase::lab(Us(0), "app.test.local", "static:127.0.0.20").unwrap(),
            DnsPhase::lab(Us::s(5), "app.test.local", "nxdomain").unwrap(),
            DnsPhase::lab(Us::s(14), "app.test.local", "static:127.0.0.20").unwrap(),
        ];
        let pol = Policy {
            hold_nx: Us::s(3),
            ..Policy::of(Proxy::Haproxy)
        };
        let s = simulate_counts(&cfg, &pol).unwrap();
        // Down from 3 s into the NXDOMAIN to the first poll after it: about 6 s at 300 rps.
        assert!((1700..=2400).contains(&s.status_503), "{}", s.status_503);
    }

    #[test]
    fn predictions_compare_each_proxy_with_its_mitigation() {
        let p = crate::nginx::predict::PredictInput {
            rps: 300.0,
            sample: Us::s(120),
            first_try_failure: 0.01,
            ..Default::default()
        };
        let h = predict(&p, Proxy::Haproxy).unwrap();
        assert_eq!(h.len(), 2);
        assert!(h[0].closed.count > 0 && h[1].closed.count == 0, "{h:?}");
        let c = predict(&p, Proxy::Caddy).unwrap();
        assert_eq!(c[0].total.count, 0, "{c:?}");
    }

    #[test]
    fn what_the_models_do_not_play_is_refused() {
        let mut cfg = churn(5);
        cfg.dns
            .push(DnsPhase::lab(Us::s(2), "app.test.local", "drop").unwrap());
        let e = simulate_counts(&cfg, &Policy::of(Proxy::Caddy)).unwrap_err();
        assert!(e.to_string().contains("does not answer"), "{e}");
    }
}
