//! The discrete-event core: one nginx upstream with a zone, its resolver timers, the
//! round-robin balancer with max_fails, keep-alive cache, retries and the error_page shim.
//!
//! Every time is an absolute epoch microsecond. Events are processed strictly in time order
//! (ties in scheduling order); arrivals are merged in from the load schedule, so the heap only
//! holds work that is already in flight.

use super::config::{DnsMode, FaultKind, Latency, SimConfig};
use super::logs::{AccessLine, Logs};
use super::{NluClass, SimSummary};
use rand::{Rng, RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Marker address index for the group-name hop (`be`) of a refused selection.
pub(crate) const BE: u32 = u32::MAX;

/// One distinct backend address and its idle keep-alive connections.
pub(crate) struct Addr {
    pub text: String,
    pub ip: IpAddr,
    pub port: u16,
    pub idle: u32,
    /// When a connection to this address last went back to the cache (LRU eviction).
    pub returned_us: i64,
}

struct Peer {
    addr: u32,
    max_fails: u32,
    fail_timeout_s: i64,
    weight: i64,
    cw: i64,
    fails: u32,
    checked_s: i64,
    accessed_s: i64,
}

/// Why a selection found no peer.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Busy {
    Generation,
    MaxFails,
    Tried,
    Empty,
}

/// How a try failed: the error line and whether the request was already sent.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum TryError {
    Refused,
    Reset,
    Closed,
    Timeout,
}

impl TryError {
    pub(crate) fn line(self) -> &'static str {
        match self {
            TryError::Refused => {
                "connect() failed (111: Connection refused) while connecting to upstream"
            }
            TryError::Reset => {
                "recv() failed (104: Connection reset by peer) while reading response header from upstream"
            }
            TryError::Closed => {
                "upstream prematurely closed connection while reading response header from upstream"
            }
            TryError::Timeout => {
                "upstream timed out (110: Connection timed out) while reading response header from upstream"
            }
        }
    }
    pub(crate) fn phase(self) -> &'static str {
        match self {
            TryError::Refused => "connecting to upstream",
            _ => "reading response header from upstream",
        }
    }
    fn request_sent(self) -> bool {
        self != TryError::Refused
    }
}

/// One hop of `$upstream_addr`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Hop {
    pub addr: u32,
    pub status: u16,
    pub start_us: i64,
    pub end_us: i64,
    /// Connected (so `$upstream_connect_time` has a value).
    pub connected: bool,
    /// First hop of an `error_page` pass (printed after ` : `).
    pub pass_start: bool,
}

/// A request in flight.
pub(crate) struct Req {
    pub seq: u64,
    pub arrival_us: i64,
    pub method: u8,
    pub conn: u64,
    pub conn_requests: u32,
    gen0: u64,
    tried: u128,
    tried_backup: u128,
    tries: u32,
    pass: u8,
    pub hops: Vec<Hop>,
    // The try in progress.
    peer: u32,
    cached: bool,
    err: TryError,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Ev {
    FaultOn(u16),
    FaultOff(u16),
    DnsPhase(u16),
    Host(u16),
    Complete(u32),
    Fail(u32),
}

impl Ev {
    fn pack(self) -> u64 {
        let (kind, idx) = match self {
            Ev::FaultOn(i) => (0u64, i as u64),
            Ev::FaultOff(i) => (1, i as u64),
            Ev::DnsPhase(i) => (2, i as u64),
            Ev::Host(i) => (3, i as u64),
            Ev::Complete(i) => (4, i as u64),
            Ev::Fail(i) => (5, i as u64),
        };
        (kind << 32) | idx
    }
    fn unpack(v: u64) -> Ev {
        let idx = (v & 0xFFFF_FFFF) as u32;
        match v >> 32 {
            0 => Ev::FaultOn(idx as u16),
            1 => Ev::FaultOff(idx as u16),
            2 => Ev::DnsPhase(idx as u16),
            3 => Ev::Host(idx as u16),
            4 => Ev::Complete(idx),
            _ => Ev::Fail(idx),
        }
    }
}

/// What a host's pending DNS event is.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum HostStep {
    /// Send a query (first or periodic).
    Query,
    /// The authority stayed silent: a resend (every 5 s).
    Resend { started: i64, id: u16 },
    /// `resolver_timeout` after the first send: give up (keep the peers).
    GiveUp,
}

struct Host {
    name: String,
    port: u16,
    max_fails: u32,
    fail_timeout_s: i64,
    weight: i64,
    phases: Vec<(i64, DnsMode, String, Vec<Ipv6Addr>)>,
    first_mode: String,
    next_at: i64,
    step: HostStep,
    /// Last answer given (for the `changed` flag).
    last_answer: Option<Vec<IpAddr>>,
    client_port: u16,
    /// The host is empty because of NXDOMAIN / memory exhaustion.
    empty_nx: bool,
    short_mem: bool,
}

struct Fault {
    start: i64,
    end: i64,
    target: Option<(IpAddr, Option<u16>)>,
    kind: FaultKind,
    spec: String,
    target_text: String,
    hits: u64,
    active: bool,
}

pub(crate) struct Engine<'a> {
    cfg: &'a SimConfig,
    rng: ChaCha8Rng,
    dns_rng: ChaCha8Rng,
    pub addrs: Vec<Addr>,
    peers: Vec<Peer>,
    primary: Vec<u32>,
    backup: Vec<u32>,
    /// `peer -> host` for resolved peers (`u16::MAX` for static lines).
    peer_host: Vec<u16>,
    hosts: Vec<Host>,
    faults: Vec<Fault>,
    has_zone_resolve: bool,
    generation: u64,
    zone_used: u64,
    zone_cap: u64,
    idle_total: u32,
    /// Events packed into one `u128` (time, sequence, event) so the heap compares one integer.
    heap: BinaryHeap<Reverse<u128>>,
    time_base: i64,
    ev_seq: u64,
    pub reqs: Vec<Req>,
    free: Vec<u32>,
    pub methods: Vec<String>,
    method_cdf: Vec<f64>,
    client_slots: Vec<(u64, u32)>,
    next_conn: u64,
    logs: Option<Logs>,
    alt: Vec<(String, u64)>,
    latency: Sampler,
    pub sum: SimSummary,
}

impl<'a> Engine<'a> {
    pub(crate) fn new(cfg: &'a SimConfig, logs: Option<Logs>) -> Engine<'a> {
        let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
        let mut dns_rng = ChaCha8Rng::seed_from_u64(cfg.seed ^ 0x9E37_79B9_7F4A_7C15);
        let start = cfg.epoch_us - cfg.warmup.0;
        let mut e = Engine {
            cfg,
            addrs: Vec::new(),
            peers: Vec::new(),
            primary: Vec::new(),
            backup: Vec::new(),
            peer_host: Vec::new(),
            hosts: Vec::new(),
            faults: Vec::new(),
            has_zone_resolve: cfg.servers.iter().any(|s| s.resolve),
            generation: 0,
            zone_used: 0,
            zone_cap: cfg.zone_peer_capacity(),
            idle_total: 0,
            heap: BinaryHeap::new(),
            time_base: cfg.epoch_us - cfg.warmup.0 - 1_000_000,
            ev_seq: 0,
            reqs: Vec::new(),
            free: Vec::new(),
            methods: cfg
                .mix
                .iter()
                .map(|(m, _)| m.to_ascii_uppercase())
                .collect(),
            method_cdf: Vec::new(),
            client_slots: Vec::new(),
            next_conn: 1,
            logs,
            alt: Vec::new(),
            latency: Sampler::new(&cfg.latency),
            sum: SimSummary::new(cfg.seed),
            rng: ChaCha8Rng::seed_from_u64(0),
            dns_rng: ChaCha8Rng::seed_from_u64(0),
        };
        let total: f64 = cfg.mix.iter().map(|(_, w)| *w).sum();
        let mut acc = 0.0;
        for (_, w) in &cfg.mix {
            acc += w / total;
            e.method_cdf.push(acc);
        }
        // Static server lines become peers now; resolved ones on their first answer.
        for s in &cfg.servers {
            if s.resolve {
                let mut phases: Vec<(i64, DnsMode, String, Vec<Ipv6Addr>)> = cfg
                    .dns
                    .iter()
                    .filter(|p| p.name == s.host)
                    .map(|p| {
                        (
                            cfg.epoch_us + p.at.0,
                            p.mode.clone(),
                            p.spec(),
                            p.aaaa.clone(),
                        )
                    })
                    .collect();
                phases.sort_by_key(|p| p.0);
                let first_mode = phases.first().map(|p| p.2.clone()).unwrap_or_default();
                let h = e.hosts.len();
                e.hosts.push(Host {
                    name: s.host.clone(),
                    port: s.port,
                    max_fails: s.max_fails,
                    fail_timeout_s: s.fail_timeout.0 / 1_000_000,
                    weight: s.weight as i64,
                    phases,
                    first_mode,
                    // Hosts resolve right after start, a few µs apart.
                    next_at: start + 100 * h as i64 + dns_rng.random_range(0..1000),
                    step: HostStep::Query,
                    last_answer: None,
                    client_port: 32768 + dns_rng.random_range(0..28000u16),
                    empty_nx: false,
                    short_mem: false,
                });
            } else {
                let ip: IpAddr = s.host.parse().expect("validated");
                let a = e.addr_of(ip, s.port);
                let pid = e.peers.len() as u32;
                e.peers.push(Peer {
                    addr: a,
                    max_fails: s.max_fails,
                    fail_timeout_s: s.fail_timeout.0 / 1_000_000,
                    weight: s.weight as i64,
                    cw: 0,
                    fails: 0,
                    checked_s: 0,
                    accessed_s: 0,
                });
                e.peer_host.push(u16::MAX);
                if s.backup {
                    e.backup.push(pid);
                } else {
                    e.primary.push(pid);
                }
            }
        }
        for h in 0..e.hosts.len() {
            let at = e.hosts[h].next_at;
            e.push(at, Ev::Host(h as u16));
        }
        for (i, p) in cfg.dns.iter().enumerate() {
            e.push(
                cfg.epoch_us + p.at.0.max(-cfg.warmup.0),
                Ev::DnsPhase(i as u16),
            );
        }
        for (i, f) in cfg.faults.iter().enumerate() {
            let target = f.target.as_deref().map(|t| match t.parse::<SocketAddr>() {
                Ok(sa) => (sa.ip(), Some(sa.port())),
                Err(_) => (
                    t.trim_matches(['[', ']'])
                        .parse()
                        .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED)),
                    None,
                ),
            });
            e.faults.push(Fault {
                start: cfg.epoch_us + f.start.0,
                end: cfg.epoch_us + f.end.0,
                target,
                kind: f.fault.clone(),
                spec: fault_spec(&f.fault),
                target_text: f.target.clone().unwrap_or_else(|| "*".into()),
                hits: 0,
                active: false,
            });
            e.push(cfg.epoch_us + f.start.0, Ev::FaultOn(i as u16));
            e.push(cfg.epoch_us + f.end.0, Ev::FaultOff(i as u16));
        }
        e.client_slots = (0..cfg.client_connections).map(|_| (0, u32::MAX)).collect();
        e.rng = std::mem::replace(&mut rng, ChaCha8Rng::seed_from_u64(0));
        e.dns_rng = std::mem::replace(&mut dns_rng, ChaCha8Rng::seed_from_u64(0));
        e
    }

    fn addr_of(&mut self, ip: IpAddr, port: u16) -> u32 {
        let text = SocketAddr::new(ip, port).to_string();
        if let Some(i) = self.addrs.iter().position(|a| a.text == text) {
            return i as u32;
        }
        self.addrs.push(Addr {
            text,
            ip,
            port,
            idle: 0,
            returned_us: 0,
        });
        (self.addrs.len() - 1) as u32
    }

    fn push(&mut self, t: i64, ev: Ev) {
        self.ev_seq += 1;
        // 42 bits of µs (≈ 50 days, checked by SimConfig::validate), 46 bits of sequence
        // (ties in scheduling order), 35 bits of event.
        let rel = (t - self.time_base).clamp(0, (1i64 << 42) - 1) as u128;
        let key = (rel << 81) | ((self.ev_seq as u128 & ((1 << 46) - 1)) << 35) | ev.pack() as u128;
        self.heap.push(Reverse(key));
    }

    fn unpack(&self, key: u128) -> (i64, Ev) {
        let t = (key >> 81) as i64 + self.time_base;
        (t, Ev::unpack((key & ((1u128 << 35) - 1)) as u64))
    }

    /// Run the whole load; returns the summary.
    pub(crate) fn run(mut self) -> std::io::Result<(SimSummary, Option<Logs>)> {
        let cfg = self.cfg;
        let n_req = (cfg.duration.0 as f64 * cfg.rps / 1e6).floor() as u64;
        let interval = 1e6 / cfg.rps;
        let mut t_exact = cfg.epoch_us as f64;
        let end_of_load = cfg.epoch_us + cfg.duration.0;
        for k in 0..n_req {
            if cfg.poisson {
                let u: f64 = self.rng.random::<f64>();
                t_exact += -(1.0 - u).ln() * interval;
                if t_exact >= end_of_load as f64 {
                    break;
                }
            } else {
                t_exact = cfg.epoch_us as f64 + k as f64 * interval;
            }
            let t = t_exact as i64;
            let limit = (((t - self.time_base).max(0) as u128) + 1) << 81;
            while let Some(&Reverse(key)) = self.heap.peek() {
                if key >= limit {
                    break;
                }
                self.heap.pop();
                let (te, ev) = self.unpack(key);
                self.event(te, ev)?;
            }
            self.arrive(k, t, t_exact)?;
        }
        // Drain in-flight work and timeline events up to the end of the load (later DNS timers
        // would run forever).
        while let Some(Reverse(key)) = self.heap.pop() {
            let (te, ev) = self.unpack(key);
            let in_flight = matches!(ev, Ev::Complete(_) | Ev::Fail(_));
            if te > end_of_load && !in_flight {
                continue;
            }
            self.event(te, ev)?;
        }
        self.sum.generation = self.generation;
        self.sum.simulated_us = cfg.duration.0;
        self.sum.fault_hits = self.faults.iter().map(|f| f.hits).collect();
        if let Some(l) = &mut self.logs {
            for f in &self.faults {
                if f.end > end_of_load && f.start <= end_of_load {
                    // Still on at the end: report its hits at the end of the load.
                    l.event(
                        end_of_load,
                        "fault-off",
                        &f.target_text,
                        &f.spec,
                        Some(f.hits),
                    )?;
                }
            }
            l.flush()?;
        }
        Ok((self.sum, self.logs))
    }

    fn event(&mut self, t: i64, ev: Ev) -> std::io::Result<()> {
        match ev {
            Ev::Complete(r) => self.complete(r, t),
            Ev::Fail(r) => self.fail(r, t),
            Ev::Host(h) => self.host_event(h as usize, t),
            Ev::DnsPhase(i) => {
                let p = &self.cfg.dns[i as usize];
                if let Some(l) = &mut self.logs {
                    l.event(t, "dns-mode", &p.name, &p.spec(), None)?;
                }
                Ok(())
            }
            Ev::FaultOn(i) => {
                let f = &mut self.faults[i as usize];
                f.active = true;
                if matches!(f.kind, FaultKind::Refuse) {
                    // The backend is gone: its idle keep-alive connections die with it.
                    let target = f.target;
                    for a in &mut self.addrs {
                        if matches_target(target, a) {
                            self.idle_total -= a.idle;
                            a.idle = 0;
                        }
                    }
                }
                let f = &self.faults[i as usize];
                if let Some(l) = &mut self.logs {
                    l.event(t, "fault-on", &f.target_text, &f.spec, Some(0))?;
                }
                Ok(())
            }
            Ev::FaultOff(i) => {
                let f = &mut self.faults[i as usize];
                f.active = false;
                if let Some(l) = &mut self.logs
                    && t <= self.cfg.epoch_us + self.cfg.duration.0
                {
                    l.event(t, "fault-off", &f.target_text, &f.spec, Some(f.hits))?;
                }
                Ok(())
            }
        }
    }

    // ---------------------------------------------------------------- DNS

    fn mode_at(&self, h: usize, t: i64) -> Option<(DnsMode, String, Vec<Ipv6Addr>)> {
        self.hosts[h]
            .phases
            .iter()
            .rev()
            .find(|p| p.0 <= t)
            .or(self.hosts[h].phases.first())
            .map(|p| (p.1.clone(), p.2.clone(), p.3.clone()))
    }

    /// The answer the authority gives now; `alternate` rotates per query of the name.
    /// With `ipv6=on` (nginx's default) the AAAA records join the A records as peers.
    fn answer(&mut self, h: usize, t: i64, advance: bool) -> (String, Result<Vec<IpAddr>, u8>) {
        let Some((mode, text, aaaa)) = self.mode_at(h, t) else {
            return (String::new(), Err(3));
        };
        let r: Result<Vec<Ipv4Addr>, u8> = match mode {
            DnsMode::Static(v) => Ok(v),
            DnsMode::Alternate(v) => {
                let name = self.hosts[h].name.clone();
                let c = match self.alt.iter_mut().find(|(n, _)| *n == name) {
                    Some((_, c)) => {
                        let v = *c;
                        if advance {
                            *c += 1;
                        }
                        v
                    }
                    None => {
                        if advance {
                            self.alt.push((name, 1));
                        }
                        0
                    }
                };
                Ok(vec![v[(c as usize) % v.len()]])
            }
            DnsMode::Multi(n, base) => Ok((0..n)
                .map(|i| Ipv4Addr::from(u32::from(base) + i))
                .collect()),
            DnsMode::NxDomain | DnsMode::NoData => Err(3),
            DnsMode::ServFail => Err(2),
            DnsMode::Refused => Err(5),
            DnsMode::Drop => Err(110),
        };
        let ipv6 = self.cfg.ipv6;
        let r = r.map(|v4| {
            let mut all: Vec<IpAddr> = v4.into_iter().map(IpAddr::V4).collect();
            if ipv6 {
                all.extend(aaaa.iter().copied().map(IpAddr::V6));
            }
            all
        });
        (text, r)
    }

    /// Would this host's pending DNS event change the peer list?
    fn pending_changes(&mut self, h: usize) -> bool {
        let t = self.hosts[h].next_at;
        let (_, r) = self.answer(h, t, false);
        let current: Vec<IpAddr> = self.host_ips(h);
        match r {
            Ok(v) => {
                let mut v = v;
                v.sort();
                v.dedup();
                v != current
            }
            Err(3) => !current.is_empty(),
            Err(_) => false,
        }
    }

    fn host_ips(&self, h: usize) -> Vec<IpAddr> {
        let mut v: Vec<IpAddr> = self
            .primary
            .iter()
            .filter(|&&p| self.peer_host[p as usize] == h as u16)
            .map(|&p| self.addrs[self.peers[p as usize].addr as usize].ip)
            .collect();
        v.sort();
        v
    }

    fn host_event(&mut self, h: usize, t: i64) -> std::io::Result<()> {
        let cfg = self.cfg;
        let step = self.hosts[h].step;
        if step == HostStep::GiveUp {
            self.resolve_error(h, t, 110)?;
            let jitter = self.dns_rng.random_range(0..1000i64);
            self.hosts[h].step = HostStep::Query;
            self.hosts[h].next_at = t + cfg.resolver_timeout.0.max(1_000_000) + jitter;
            let at = self.hosts[h].next_at;
            self.push(at, Ev::Host(h as u16));
            return Ok(());
        }
        let (mode_text, result) = self.answer(h, t, true);
        let id = match step {
            HostStep::Resend { id, .. } => id,
            _ => self.dns_rng.random::<u16>(),
        };
        let jitter = self.dns_rng.random_range(0..1000i64);
        let injected = mode_text != self.hosts[h].first_mode;
        let valid = cfg.valid_us();
        match result {
            Err(110) => {
                self.dns_log(h, t, id, &mode_text, "DROPPED", &[], injected, false)?;
                let started = match step {
                    HostStep::Resend { started, .. } => started,
                    _ => t,
                };
                if t - started + 5_000_000 < cfg.resolver_timeout.0 {
                    self.hosts[h].step = HostStep::Resend { started, id };
                    self.hosts[h].next_at = t + 5_000_000;
                } else {
                    // No answer within resolver_timeout: nginx logs it then and keeps the peers.
                    self.hosts[h].step = HostStep::GiveUp;
                    self.hosts[h].next_at = started + cfg.resolver_timeout.0;
                }
            }
            Err(code) => {
                let rcode = match code {
                    3 => "NXDOMAIN",
                    2 => "SERVFAIL",
                    _ => "REFUSED",
                };
                self.dns_log(h, t, id, &mode_text, rcode, &[], injected, false)?;
                self.sum.requeries += 1;
                self.resolve_error(h, t, code)?;
                self.hosts[h].step = HostStep::Query;
                self.hosts[h].next_at = if code == 3 {
                    // NXDOMAIN is cached for `valid` like an answer, and empties the host.
                    self.remove_host_peers(h, None);
                    self.hosts[h].empty_nx = true;
                    t + valid + 1_000_000 + jitter
                } else {
                    t + cfg.resolver_timeout.0.max(1_000_000) + jitter
                };
                self.hosts[h].last_answer = Some(Vec::new());
            }
            Ok(mut ips) => {
                ips.dedup();
                let had_answer = self.hosts[h].last_answer.is_some();
                let changed = self.hosts[h]
                    .last_answer
                    .as_ref()
                    .is_some_and(|prev| prev != &ips);
                self.dns_log(h, t, id, &mode_text, "NOERROR", &ips, injected, changed)?;
                self.sum.requeries += 1;
                self.hosts[h].last_answer = Some(ips.clone());
                self.hosts[h].empty_nx = false;
                let before = self.generation;
                self.remove_host_peers(h, Some(&ips));
                let current = self.host_ips(h);
                self.hosts[h].short_mem = false;
                for ip in ips {
                    if current.contains(&ip) {
                        continue;
                    }
                    if self.zone_used >= self.zone_cap {
                        self.sum.memory_exhausted += 1;
                        self.hosts[h].short_mem = true;
                        let g = cfg.upstream.clone();
                        if let Some(l) = &mut self.logs {
                            l.error_plain(
                                t,
                                "error",
                                &format!(
                                    "cannot add new server to upstream \"{g}\", memory exhausted"
                                ),
                            )?;
                        }
                        break;
                    }
                    let a = self.addr_of(ip, self.hosts[h].port);
                    let host = &self.hosts[h];
                    let pid = self.peers.len() as u32;
                    self.peers.push(Peer {
                        addr: a,
                        max_fails: host.max_fails,
                        fail_timeout_s: host.fail_timeout_s,
                        weight: host.weight,
                        cw: 0,
                        fails: 0,
                        checked_s: 0,
                        accessed_s: 0,
                    });
                    self.peer_host.push(h as u16);
                    self.primary.push(pid);
                    self.zone_used += 1;
                    self.generation += 1;
                }
                // The first answer populates the host; a swap is a later change.
                if self.generation != before && had_answer {
                    self.sum.swaps += 1;
                    self.sum.swap_times_us.push(t);
                }
                self.hosts[h].step = HostStep::Query;
                self.hosts[h].next_at = t + valid + 1_000_000 + jitter;
            }
        }
        let at = self.hosts[h].next_at;
        self.push(at, Ev::Host(h as u16));
        Ok(())
    }

    /// Remove this host's peers (all, or those not in `keep`).
    fn remove_host_peers(&mut self, h: usize, keep: Option<&[IpAddr]>) {
        let mut removed = 0;
        let peers = &self.peers;
        let addrs = &self.addrs;
        let peer_host = &self.peer_host;
        self.primary.retain(|&p| {
            let mine = peer_host[p as usize] == h as u16;
            let kept = keep.is_some_and(|k| k.contains(&addrs[peers[p as usize].addr as usize].ip));
            if mine && !kept {
                removed += 1;
                false
            } else {
                true
            }
        });
        self.zone_used -= removed;
        self.generation += removed;
    }

    fn resolve_error(&mut self, h: usize, t: i64, code: u8) -> std::io::Result<()> {
        self.sum.dns_errors += 1;
        let text = match code {
            3 => "3: Host not found",
            2 => "2: Server failure",
            5 => "5: Operation refused",
            _ => "110: Operation timed out",
        };
        let name = self.hosts[h].name.clone();
        if let Some(l) = &mut self.logs {
            l.error_plain(
                t,
                "error",
                &format!("{name} could not be resolved ({text})"),
            )?;
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn dns_log(
        &mut self,
        h: usize,
        t: i64,
        id: u16,
        mode: &str,
        rcode: &str,
        ips: &[IpAddr],
        injected: bool,
        changed: bool,
    ) -> std::io::Result<()> {
        if let Some(l) = &mut self.logs {
            let host = &self.hosts[h];
            let ttl = self.cfg.dns_ttl.0 / 1_000_000;
            let v4: Vec<IpAddr> = ips.iter().copied().filter(IpAddr::is_ipv4).collect();
            l.dns(
                t,
                host.client_port,
                &host.name,
                "A",
                id,
                mode,
                rcode,
                &v4,
                ttl,
                changed,
                injected,
            )?;
            if self.cfg.ipv6 {
                // nginx asks A and AAAA together when ipv6=on.
                let v6: Vec<IpAddr> = ips.iter().copied().filter(IpAddr::is_ipv6).collect();
                l.dns(
                    t,
                    host.client_port,
                    &host.name,
                    "AAAA",
                    id.wrapping_add(1),
                    mode,
                    rcode,
                    &v6,
                    ttl,
                    false,
                    injected,
                )?;
            }
        }
        Ok(())
    }

    // ---------------------------------------------------------------- requests

    fn arrive(&mut self, k: u64, t: i64, t_exact: f64) -> std::io::Result<()> {
        let cfg = self.cfg;
        let method = if self.method_cdf.len() == 1 {
            0
        } else {
            let u: f64 = self.rng.random::<f64>();
            self.method_cdf.iter().position(|&c| u < c).unwrap_or(0) as u8
        };
        let slot = (k % self.client_slots.len() as u64) as usize;
        let (mut conn, mut n) = self.client_slots[slot];
        if n >= cfg.keepalive_requests {
            conn = self.next_conn;
            self.next_conn += 1;
            n = 0;
        }
        n += 1;
        self.client_slots[slot] = (conn, n);
        let r = match self.free.pop() {
            Some(r) => r,
            None => {
                self.reqs.push(Req {
                    seq: 0,
                    arrival_us: 0,
                    method: 0,
                    conn: 0,
                    conn_requests: 0,
                    gen0: 0,
                    tried: 0,
                    tried_backup: 0,
                    tries: 0,
                    pass: 0,
                    hops: Vec::with_capacity(4),
                    peer: 0,
                    cached: false,
                    err: TryError::Closed,
                });
                (self.reqs.len() - 1) as u32
            }
        };
        {
            let q = &mut self.reqs[r as usize];
            q.seq = k;
            q.arrival_us = t;
            q.method = method;
            q.conn = conn;
            q.conn_requests = n;
            q.hops.clear();
        }
        self.sum.requests += 1;
        self.start_pass(r, t, 1);
        // The first pick happens a few µs after the snapshot: a swap in between refuses it.
        let window = cfg.first_pick_window_us;
        let mut race = false;
        if window > 0.0 && self.has_zone_resolve {
            for h in 0..self.hosts.len() {
                let dt = self.hosts[h].next_at as f64 - t_exact;
                if dt > 0.0 && dt <= window && self.pending_changes(h) {
                    race = true;
                }
            }
        }
        if race {
            return self.nlu(r, t, Busy::Generation);
        }
        self.attempt(r, t)
    }

    fn start_pass(&mut self, r: u32, _t: i64, pass: u8) {
        let tries = (self.primary.len() + self.backup.len()) as u32;
        let limit = self.cfg.next_upstream.tries;
        let q = &mut self.reqs[r as usize];
        q.gen0 = self.generation;
        q.tried = 0;
        q.tried_backup = 0;
        q.tries = if limit > 0 { tries.min(limit) } else { tries };
        q.pass = pass;
    }

    fn single(&self) -> bool {
        if self.has_zone_resolve {
            self.primary.len() == 1 && self.backup.is_empty()
        } else {
            self.primary.len() == 1
        }
    }

    /// Round-robin selection (smooth weighted), primary then backup.
    fn select(&mut self, r: u32, now_s: i64) -> Result<(u32, bool), Busy> {
        let q = &self.reqs[r as usize];
        if self.has_zone_resolve && q.gen0 != self.generation {
            return Err(Busy::Generation);
        }
        if self.single() {
            return Ok((self.primary[0], false));
        }
        let mut saw_fails = false;
        let mut saw_tried = false;
        for (list_is_backup, list) in [(false, &self.primary), (true, &self.backup)] {
            let tried = if list_is_backup {
                q.tried_backup
            } else {
                q.tried
            };
            let mut best: Option<usize> = None;
            let mut total = 0;
            for (pos, &p) in list.iter().enumerate() {
                if pos < 128 && tried & (1u128 << pos) != 0 {
                    saw_tried = true;
                    continue;
                }
                let peer = &self.peers[p as usize];
                if peer.max_fails > 0
                    && peer.fails >= peer.max_fails
                    && now_s - peer.checked_s <= peer.fail_timeout_s
                {
                    saw_fails = true;
                    continue;
                }
                total += peer.weight;
                let cw = peer.cw + peer.weight;
                self.peers[p as usize].cw = cw;
                if best.is_none_or(|b| cw > self.peers[list[b] as usize].cw) {
                    best = Some(pos);
                }
            }
            if let Some(pos) = best {
                let p = list[pos];
                let peer = &mut self.peers[p as usize];
                peer.cw -= total;
                if now_s - peer.checked_s > peer.fail_timeout_s {
                    peer.checked_s = now_s;
                }
                let q = &mut self.reqs[r as usize];
                if pos < 128 {
                    if list_is_backup {
                        q.tried_backup |= 1u128 << pos;
                    } else {
                        q.tried |= 1u128 << pos;
                    }
                }
                return Ok((p, list_is_backup));
            }
        }
        Err(if saw_fails {
            Busy::MaxFails
        } else if saw_tried {
            Busy::Tried
        } else {
            Busy::Empty
        })
    }

    fn attempt(&mut self, r: u32, t: i64) -> std::io::Result<()> {
        let now_s = t.div_euclid(1_000_000);
        let (p, _is_backup) = match self.select(r, now_s) {
            Ok(x) => x,
            Err(b) => return self.nlu(r, t, b),
        };
        let a = self.peers[p as usize].addr;
        let cached = if self.cfg.keepalive > 0 && self.addrs[a as usize].idle > 0 {
            self.addrs[a as usize].idle -= 1;
            self.idle_total -= 1;
            true
        } else {
            false
        };
        // Faults decide the try's fate, in timeline order.
        let mut extra = 0i64;
        let mut failure_free_latency = 0i64;
        let mut failure: Option<(TryError, i64, Option<u16>)> = None;
        for fi in 0..self.faults.len() {
            let f = &self.faults[fi];
            if !(f.start <= t && t < f.end && matches_target(f.target, &self.addrs[a as usize])) {
                continue;
            }
            match f.kind {
                FaultKind::Refuse => {
                    let err = if cached {
                        TryError::Reset
                    } else {
                        TryError::Refused
                    };
                    failure = Some((err, 100, Some(fi as u16)));
                }
                FaultKind::Rst { p } => {
                    if p >= 1.0 || self.rng.random::<f64>() < p {
                        failure = Some((TryError::Reset, 200, Some(fi as u16)));
                    }
                }
                FaultKind::Reclaim {
                    p,
                    delay_min,
                    delay_max,
                } => {
                    if cached && self.rng.random::<f64>() < p {
                        let d = if delay_max.0 > delay_min.0 {
                            self.rng.random_range(delay_min.0..=delay_max.0)
                        } else {
                            delay_min.0
                        };
                        failure = Some((TryError::Closed, d.max(1), Some(fi as u16)));
                    }
                }
                FaultKind::Fail { p } => {
                    if self.rng.random::<f64>() < p {
                        let d = self.latency.sample(&mut self.rng);
                        failure = Some((TryError::Closed, d.max(1), Some(fi as u16)));
                    }
                }
                FaultKind::Delay { by } => {
                    extra += by.0;
                    self.faults[fi].hits += 1;
                }
            }
            if failure.is_some() {
                break;
            }
        }
        // proxy_read_timeout: a try slower than it fails with 504 instead of completing.
        if failure.is_none() {
            let l = self.latency.sample(&mut self.rng) + extra;
            if l > self.cfg.read_timeout.0 {
                failure = Some((TryError::Timeout, self.cfg.read_timeout.0 - extra, None));
            } else {
                failure_free_latency = l;
            }
        }
        let q = &mut self.reqs[r as usize];
        q.peer = p;
        q.cached = cached;
        let pass_start = q.hops.last().is_some_and(|h| h.end_us < 0);
        if pass_start {
            q.hops.pop();
        }
        match failure {
            Some((err, d, fi)) => {
                if let Some(fi) = fi {
                    self.faults[fi as usize].hits += 1;
                }
                let q = &mut self.reqs[r as usize];
                q.err = err;
                q.hops.push(Hop {
                    addr: a,
                    status: if err == TryError::Timeout { 504 } else { 502 },
                    start_us: t,
                    end_us: t + d + extra,
                    connected: err != TryError::Refused,
                    pass_start,
                });
                self.push(t + d + extra, Ev::Fail(r));
            }
            None => {
                let l = failure_free_latency;
                let q = &mut self.reqs[r as usize];
                q.hops.push(Hop {
                    addr: a,
                    status: 200,
                    start_us: t,
                    end_us: t + l,
                    connected: true,
                    pass_start,
                });
                self.push(t + l, Ev::Complete(r));
            }
        }
        Ok(())
    }

    fn is_idempotent(&self, method: u8) -> bool {
        !matches!(
            self.methods[method as usize].as_str(),
            "POST" | "LOCK" | "PATCH"
        )
    }

    fn fail(&mut self, r: u32, t: i64) -> std::io::Result<()> {
        let now_s = t.div_euclid(1_000_000);
        let (p, err, cached, method) = {
            let q = &self.reqs[r as usize];
            (q.peer, q.err, q.cached, q.method)
        };
        self.sum.try_failures += 1;
        let a = self.peers[p as usize].addr;
        if let Some(l) = &mut self.logs {
            let q = &self.reqs[r as usize];
            l.error_req(
                t,
                "error",
                q,
                &self.methods,
                err.line(),
                &self.addrs[a as usize].text,
            )?;
        }
        // Free the peer as failed (ngx_http_upstream_free_round_robin_peer): `single` is read
        // from the peer list as it is now, even if the failed peer was swapped out meanwhile.
        let single = self.single();
        if single {
            self.peers[p as usize].fails = 0;
            self.reqs[r as usize].tries = 0;
        } else {
            let peer = &mut self.peers[p as usize];
            peer.fails += 1;
            peer.accessed_s = now_s;
            peer.checked_s = now_s;
            if peer.max_fails > 0 && peer.fails >= peer.max_fails {
                self.sum.disabled_warnings += 1;
                if let Some(l) = &mut self.logs {
                    let q = &self.reqs[r as usize];
                    let msg = format!("upstream server temporarily disabled while {}", err.phase());
                    l.error_req(
                        t,
                        "warn",
                        q,
                        &self.methods,
                        &msg,
                        &self.addrs[a as usize].text,
                    )?;
                }
            }
            let q = &mut self.reqs[r as usize];
            q.tries = q.tries.saturating_sub(1);
        }
        // An error (not a timeout) on a cached keep-alive connection does not count as a try.
        let timeout = err == TryError::Timeout;
        if cached && !timeout {
            self.reqs[r as usize].tries += 1;
        }
        let nu = &self.cfg.next_upstream;
        let blocked_post = err.request_sent() && !self.is_idempotent(method) && !nu.non_idempotent;
        let allowed = if timeout { nu.timeout } else { nu.error };
        if self.reqs[r as usize].tries == 0 || !allowed || blocked_post {
            return self.finalize(r, t, if timeout { 504 } else { 502 }, None);
        }
        self.sum.retries += 1;
        self.attempt(r, t)
    }

    fn nlu(&mut self, r: u32, t: i64, busy: Busy) -> std::io::Result<()> {
        let class = match busy {
            Busy::Generation => {
                // First pick of this pass (no real try yet) vs a retry after a failed try.
                let q = &self.reqs[r as usize];
                if q.hops.last().is_none_or(|h| h.end_us < 0) {
                    NluClass::GenerationRaceFirstPick
                } else {
                    NluClass::GenerationRaceRetry
                }
            }
            Busy::MaxFails => NluClass::MaxfailsWipeout,
            Busy::Tried => NluClass::TriesExhausted,
            Busy::Empty => {
                if self.hosts.iter().any(|h| h.short_mem) && !self.hosts.iter().any(|h| h.empty_nx)
                {
                    NluClass::ZoneMemoryExhausted
                } else {
                    NluClass::DnsNxdomain
                }
            }
        };
        let q = &mut self.reqs[r as usize];
        let pass_start = q.hops.last().is_some_and(|h| h.end_us < 0);
        if pass_start {
            q.hops.pop();
        }
        q.hops.push(Hop {
            addr: BE,
            status: 502,
            start_us: t,
            end_us: t,
            connected: false,
            pass_start,
        });
        if let Some(l) = &mut self.logs {
            let q = &self.reqs[r as usize];
            let be = self.cfg.upstream.clone();
            l.error_req(
                t,
                "error",
                q,
                &self.methods,
                "no live upstreams while connecting to upstream",
                &be,
            )?;
        }
        self.finalize(r, t, 502, Some(class))
    }

    fn complete(&mut self, r: u32, t: i64) -> std::io::Result<()> {
        let p = self.reqs[r as usize].peer;
        let peer = &mut self.peers[p as usize];
        if peer.accessed_s < peer.checked_s {
            peer.fails = 0;
        }
        let a = peer.addr as usize;
        if self.cfg.keepalive > 0 {
            // nginx's keepalive cache always keeps the connection just freed: when it is full,
            // the least recently used one is closed. Connections of one address are
            // interchangeable, so evict from the address that was returned to longest ago.
            if self.idle_total >= self.cfg.keepalive {
                let victim = self
                    .addrs
                    .iter()
                    .enumerate()
                    .filter(|(_, x)| x.idle > 0)
                    .min_by_key(|(_, x)| x.returned_us)
                    .map(|(i, _)| i);
                if let Some(v) = victim {
                    self.addrs[v].idle -= 1;
                    self.idle_total -= 1;
                }
            }
            self.addrs[a].idle += 1;
            self.addrs[a].returned_us = t;
            self.idle_total += 1;
        }
        self.finalize(r, t, 200, None)
    }

    fn finalize(
        &mut self,
        r: u32,
        t: i64,
        status: u16,
        class: Option<NluClass>,
    ) -> std::io::Result<()> {
        let (pass, method) = {
            let q = &self.reqs[r as usize];
            (q.pass, q.method)
        };
        if status == 502
            && pass == 1
            && let Some(shim) = &self.cfg.retry_shim
            && shim
                .methods
                .iter()
                .any(|m| m.eq_ignore_ascii_case(&self.methods[method as usize]))
        {
            // error_page 502 = @retry_once: a new pass with a new peer-list snapshot.
            self.sum.shim_passes += 1;
            match class {
                Some(c) => self.sum.shim_first_pass_nlu.add(c),
                None => self.sum.shim_first_pass_failures += 1,
            }
            self.start_pass(r, t, 2);
            // Placeholder hop marking the pass boundary; replaced by the next real hop.
            self.reqs[r as usize].hops.push(Hop {
                addr: BE,
                status: 0,
                start_us: t,
                end_us: -1,
                connected: false,
                pass_start: true,
            });
            return self.attempt(r, t);
        }
        match status {
            200 => self.sum.ok += 1,
            504 => {
                self.sum.status_504 += 1;
                self.sum.upstream_failures += 1;
            }
            _ => {
                self.sum.status_502 += 1;
                match class {
                    Some(c) => self.sum.nlu.add(c),
                    None => self.sum.upstream_failures += 1,
                }
            }
        }
        if self.reqs[r as usize].hops.len() > 1 {
            self.sum.retried_requests += 1;
        }
        if let Some(l) = &mut self.logs {
            let q = &self.reqs[r as usize];
            // nginx's built-in error pages.
            let bytes = match status {
                200 => self.cfg.response_bytes,
                504 => 167,
                _ => 157,
            };
            l.access(AccessLine {
                end_us: t,
                status,
                req: q,
                addrs: &self.addrs,
                group: &self.cfg.upstream,
                method: &self.methods[q.method as usize],
                uri: &self.cfg.uri,
                bytes,
            })?;
        }
        self.free.push(r);
        Ok(())
    }
}

fn matches_target(target: Option<(IpAddr, Option<u16>)>, a: &Addr) -> bool {
    match target {
        None => true,
        Some((ip, port)) => a.ip == ip && port.is_none_or(|p| p == a.port),
    }
}

fn fault_spec(k: &FaultKind) -> String {
    let d =
        |u: i64| resolvelab_core::dur::format(std::time::Duration::from_micros(u.max(0) as u64));
    match k {
        FaultKind::Refuse => "refuse".into(),
        FaultKind::Rst { p } => format!("rst:p={p}"),
        FaultKind::Reclaim {
            p,
            delay_min,
            delay_max,
        } => format!("reclaim:p={p},delay={}..{}", d(delay_min.0), d(delay_max.0)),
        FaultKind::Fail { p } => format!("fail:p={p}"),
        FaultKind::Delay { by } => format!("delay:{}", d(by.0)),
    }
}

/// A latency distribution prepared for fast draws (the benchmark's hot path).
pub(crate) enum Sampler {
    Fixed(i64),
    Uniform(i64, i64),
    Exp(f64),
    /// Piecewise-linear quantile function (4,097 points): one 64-bit draw per sample instead of
    /// Box–Muller's logarithm, square root, cosine and exponential. Tails beyond the
    /// 1/8,194 quantiles are cut (±3.7 σ).
    Table(Box<[f64]>),
}

const TABLE_BITS: u32 = 12;

impl Sampler {
    pub(crate) fn new(l: &Latency) -> Sampler {
        match l {
            Latency::Fixed { value } => Sampler::Fixed(value.0),
            Latency::Uniform { min, max } => Sampler::Uniform(min.0, max.0.max(min.0)),
            Latency::Exp { mean } => Sampler::Exp(mean.0 as f64),
            Latency::Lognormal { median, sigma } => {
                let n = 1usize << TABLE_BITS;
                let t: Vec<f64> = (0..=n)
                    .map(|i| {
                        let p = (i as f64 + 0.5) / (n as f64 + 1.0);
                        median.0 as f64 * (sigma * inverse_normal_cdf(p)).exp()
                    })
                    .collect();
                Sampler::Table(t.into_boxed_slice())
            }
        }
    }

    /// Draw one latency (µs, ≥ 1).
    #[inline]
    pub(crate) fn sample<R: Rng>(&self, rng: &mut R) -> i64 {
        let v = match self {
            Sampler::Fixed(v) => *v,
            Sampler::Uniform(a, b) => {
                if b > a {
                    rng.random_range(*a..=*b)
                } else {
                    *a
                }
            }
            Sampler::Exp(mean) => {
                let u: f64 = rng.random::<f64>();
                (-(1.0 - u).ln() * mean) as i64
            }
            Sampler::Table(t) => {
                let u = rng.next_u64();
                let idx = (u >> (64 - TABLE_BITS)) as usize;
                let frac = ((u >> 20) & 0xFFFF_FFFF) as f64 / 4_294_967_296.0;
                (t[idx] + frac * (t[idx + 1] - t[idx])) as i64
            }
        };
        v.max(1)
    }
}

/// Acklam's rational approximation of the standard normal quantile (relative error < 1.2e-9).
pub(crate) fn inverse_normal_cdf(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    let lo = 0.02425;
    if p < lo {
        let q = (-2.0 * p.ln()).sqrt();
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    } else if p <= 1.0 - lo {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    } else {
        -inverse_normal_cdf(1.0 - p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inverse_normal_matches_known_quantiles() {
        assert!(inverse_normal_cdf(0.5).abs() < 1e-9);
        assert!((inverse_normal_cdf(0.975) - 1.959_964).abs() < 1e-5);
        assert!((inverse_normal_cdf(0.001) + 3.090_232).abs() < 1e-5);
    }

    #[test]
    fn lognormal_table_has_the_right_median_and_spread() {
        let s = Sampler::new(&Latency::Lognormal {
            median: crate::nginx::Us::ms(5),
            sigma: 0.5,
        });
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let mut v: Vec<i64> = (0..20_000).map(|_| s.sample(&mut rng)).collect();
        v.sort();
        let median = v[10_000] as f64;
        assert!((median / 5000.0 - 1.0).abs() < 0.03, "median {median}");
        // 84th percentile ≈ median × e^σ.
        let p84 = v[16_827] as f64;
        assert!(
            (p84 / (5000.0 * 0.5f64.exp()) - 1.0).abs() < 0.05,
            "p84 {p84}"
        );
    }
}
