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
use resolvelab_core::evidence::event_kind;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Marker address index for the group-name hop (`be`) of a refused selection.
pub(crate) const BE: u32 = u32::MAX;

/// One distinct backend address.
pub(crate) struct Addr {
    pub text: String,
    pub ip: IpAddr,
    pub port: u16,
    /// Index into `pools` (`u16::MAX`: no pool).
    pool: u16,
    /// Index into `samplers` (0: the config's `latency`).
    lat: u16,
}

/// A pool backend's connections to its dependency: when each becomes free (FIFO service).
pub(crate) struct PoolState {
    /// Per pool connection, when it is free again (`i64::MIN`: never opened).
    free_at: Vec<i64>,
    /// Every acquisition's wait (µs), for `backends.json`.
    pub waits: Vec<i64>,
    pub timeouts: u64,
    pub opened: u64,
}

impl PoolState {
    /// Take the connection that frees first, for `service` µs from when it is free; `None`
    /// when that would mean waiting longer than `timeout` (the waiter gives up, nothing taken;
    /// the caller counts a pool timeout when it was the pool's own).
    fn acquire(&mut self, t: i64, service: i64, timeout: i64) -> Option<i64> {
        let (i, free) = self
            .free_at
            .iter()
            .copied()
            .enumerate()
            .min_by_key(|&(_, f)| f)?;
        let start = free.max(t);
        if start - t > timeout {
            return None;
        }
        if free == i64::MIN {
            self.opened += 1;
        }
        self.free_at[i] = start + service;
        self.waits.push(start - t);
        Some(start - t)
    }
}

/// An idle upstream connection in a worker's keep-alive cache.
#[derive(Clone, Copy, Debug)]
struct Idle {
    addr: u32,
    /// When the backend closes it (a `reclaim` decided at its last response); `i64::MAX` if
    /// never. nginx's close handler drops a connection from the cache when that close arrives.
    doom_us: i64,
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
    /// Tries in flight on this peer (nginx's `peer->refs`).
    refs: u32,
    /// Removed from the zone while tries still referenced it: its slab memory stays taken
    /// until the last of them ends (ngx_http_upstream_rr_peer_free_locked).
    zombie: bool,
}

impl Peer {
    /// A fresh peer: no failures, no weight spent, nothing in flight.
    fn new(addr: u32, max_fails: u32, fail_timeout_s: i64, weight: i64) -> Peer {
        Peer {
            addr,
            max_fails,
            fail_timeout_s,
            weight,
            cw: 0,
            fails: 0,
            checked_s: 0,
            accessed_s: 0,
            refs: 0,
            zombie: false,
        }
    }
}

/// One backend address's ephemeral ports (only with `ephemeral_ports`).
#[derive(Default)]
struct PortState {
    /// Connections open now.
    open: u32,
    /// When each port in TIME_WAIT is free again, in order.
    time_wait: VecDeque<i64>,
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
    /// No free ephemeral port toward the backend (connect() fails at once, EADDRNOTAVAIL).
    NoPort,
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
            TryError::NoPort => {
                "failed (99: Cannot assign requested address) while connecting to upstream"
            }
        }
    }
    pub(crate) fn phase(self) -> &'static str {
        match self {
            TryError::Refused | TryError::NoPort => "connecting to upstream",
            _ => "reading response header from upstream",
        }
    }
    fn request_sent(self) -> bool {
        !matches!(self, TryError::Refused | TryError::NoPort)
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
    /// Status of the upstream response in progress (200, or 503 from a pool backend).
    resp: u16,
    /// The nginx worker that accepted the client connection (its keep-alive cache is used).
    pub worker: u16,
    // The try in progress.
    peer: u32,
    cached: bool,
    /// The try holds one of the host's ephemeral ports.
    port: bool,
    err: TryError,
    /// Its own (per-request) resolution failed: a 502 without any upstream try.
    dns_failed: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Ev {
    FaultOn(u16),
    FaultOff(u16),
    DnsPhase(u16),
    Host(u16),
    Complete(u32),
    Fail(u32),
    Probe(u16),
    /// `nginx -s reload` (index into `SimConfig::reloads`).
    Reload(u16),
    /// A request's own resolution got no answer within `resolver_timeout`.
    ResolveTimeout(u32),
    /// `nginx -t` (index into `SimConfig::tests`).
    Test(u16),
    /// A restart (index into `SimConfig::restarts`).
    Restart(u16),
    /// A start (index into `SimConfig::starts`).
    Start(u16),
}

/// Bits of a packed [`Ev`] in the event queue's key: a 32-bit index and a 4-bit kind.
const EV_BITS: u32 = 36;

impl Ev {
    fn pack(self) -> u64 {
        let (kind, idx) = match self {
            Ev::FaultOn(i) => (0u64, i as u64),
            Ev::FaultOff(i) => (1, i as u64),
            Ev::DnsPhase(i) => (2, i as u64),
            Ev::Host(i) => (3, i as u64),
            Ev::Complete(i) => (4, i as u64),
            Ev::Fail(i) => (5, i as u64),
            Ev::Probe(i) => (6, i as u64),
            Ev::Reload(i) => (7, i as u64),
            Ev::ResolveTimeout(i) => (8, i as u64),
            Ev::Test(i) => (9, i as u64),
            Ev::Restart(i) => (10, i as u64),
            Ev::Start(i) => (11, i as u64),
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
            5 => Ev::Fail(idx),
            6 => Ev::Probe(idx as u16),
            7 => Ev::Reload(idx as u16),
            8 => Ev::ResolveTimeout(idx),
            9 => Ev::Test(idx as u16),
            10 => Ev::Restart(idx as u16),
            _ => Ev::Start(idx as u16),
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
    /// The UDP answer was truncated: the same query again over TCP (from its own port).
    Tcp { id: u16, port: u16 },
}

/// When nginx resolves a host's name.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum HostKind {
    /// `server … resolve`: re-queried every `valid` + 1 s, the peers swapped.
    Running,
    /// A name without `resolve`: at start and at each reload only (a pin in between).
    AtStart,
    /// A variable `proxy_pass`: on a request that finds the resolver's cache expired.
    PerRequest,
}

struct Host {
    name: String,
    kind: HostKind,
    /// PerRequest: the cached answer serves requests up to this second (epoch s).
    valid_until_s: i64,
    /// PerRequest: the cached answer is an NXDOMAIN.
    cached_nx: bool,
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
    /// A `zone_filler` group's host: its peers only take zone memory (no traffic).
    filler: bool,
    /// Its group's name (the `memory exhausted` lines).
    group: String,
    /// The filler's peers (filler hosts only).
    filler_ips: Vec<IpAddr>,
}

impl Host {
    /// A resolved server line (or the zone filler's name): its DNS phases from the timeline,
    /// `limits` = (max_fails, fail_timeout s, weight), `first` = (first query, client port).
    fn resolved(
        cfg: &SimConfig,
        name: &str,
        port: u16,
        (max_fails, fail_timeout_s, weight): (u32, i64, i64),
        (next_at, client_port): (i64, u16),
        filler: bool,
    ) -> Host {
        let mut phases: Vec<(i64, DnsMode, String, Vec<Ipv6Addr>)> = cfg
            .dns
            .iter()
            .filter(|p| p.name == name)
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
        Host {
            name: name.to_string(),
            kind: HostKind::Running,
            valid_until_s: i64::MIN,
            cached_nx: false,
            port,
            max_fails,
            fail_timeout_s,
            weight,
            phases,
            first_mode,
            next_at,
            step: HostStep::Query,
            last_answer: None,
            client_port,
            empty_nx: false,
            short_mem: false,
            filler,
            group: cfg.upstream.clone(),
            filler_ips: Vec::new(),
        }
    }
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

/// The worker that runs the resolver: nginx 1.28 resolves a `server … resolve` name in the
/// worker whose `ngx_worker` equals the host's `worker` field
/// (`ngx_http_upstream_zone_init_worker`), and nothing ever sets that field after the zeroed
/// allocation, so worker 0 resolves every name.
const RESOLVING_WORKER: u16 = 0;

/// What a finished run leaves.
pub(crate) struct Finished {
    pub summary: SimSummary,
    /// Observed DNS queries (empty unless [`Engine::observe_queries`]).
    pub queries: Vec<(i64, String)>,
}

pub(crate) struct Engine<'a> {
    cfg: &'a SimConfig,
    rng: ChaCha8Rng,
    dns_rng: ChaCha8Rng,
    /// Which worker accepts the next client connection: the order of the workers' entries on
    /// the listening socket's wait queue (EPOLLEXCLUSIVE wakes the first), and each worker's
    /// accept count (`ngx_reorder_accept_events` moves a worker to the back after its 1st,
    /// 17th, 33rd … accept).
    accept_queue: std::collections::VecDeque<u16>,
    accepts: Vec<u64>,
    /// First-pick races: their own stream, so that adding the race leaves every other draw of
    /// a run as it was.
    race_rng: ChaCha8Rng,
    /// A first-pick race was drawn at a peer-list change: the next request accepted by a
    /// worker other than the resolving one (until this time, µs) is refused at its first pick.
    race_pending_until: Option<i64>,
    /// Requests arriving at workers other than the resolving one, per whole second:
    /// (second, count in it, count in the second before) — the rate a race is drawn from.
    other_arrivals: (i64, u64, u64),
    pub addrs: Vec<Addr>,
    pub pools: Vec<PoolState>,
    peers: Vec<Peer>,
    primary: Vec<u32>,
    backup: Vec<u32>,
    /// `peer -> host` for resolved peers (`u16::MAX` for static lines).
    peer_host: Vec<u16>,
    hosts: Vec<Host>,
    /// The host a variable `proxy_pass` resolves per request.
    per_request: Option<usize>,
    faults: Vec<Fault>,
    has_zone_resolve: bool,
    generation: u64,
    zone_used: u64,
    zone_cap: u64,
    /// Per address (index of `addrs`), with `ephemeral_ports` only.
    ports: Vec<PortState>,
    /// Where the kernel timer wheel's buckets fall (µs within one granularity).
    tw_phase: i64,
    /// One keep-alive cache per worker, least recently used first (nginx takes the most
    /// recently returned connection of the address and evicts the least recently used).
    caches: Vec<VecDeque<Idle>>,
    /// Per worker: how many cached connections carry a reclaim close (none: nothing to purge).
    doomed: Vec<u32>,
    /// A restart's start failed: nothing listens, every connection is refused.
    down: bool,
    /// Events packed into one `u128` (time, sequence, event) so the heap compares one integer.
    heap: BinaryHeap<Reverse<u128>>,
    time_base: i64,
    ev_seq: u64,
    pub reqs: Vec<Req>,
    free: Vec<u32>,
    pub methods: Vec<String>,
    method_cdf: Vec<f64>,
    /// The load generator's idle client connections, most recently returned last (it reuses
    /// them LIFO, like the lab's generator): `(connection, requests served, nginx worker)`.
    client_idle: Vec<(u64, u32, u16)>,
    next_conn: u64,
    logs: Option<Logs>,
    /// When observed ([`Engine::observe_queries`]): every DNS query nginx sent, (epoch µs,
    /// host index), in the order they were sent.
    queries: Option<Vec<(i64, usize)>>,
    alt: Vec<(String, u64)>,
    /// The config's `latency` first, then one per `backend_latency` entry in use.
    samplers: Vec<Sampler>,
    pub sum: SimSummary,
}

impl<'a> Engine<'a> {
    // Over 150 lines on purpose: the RNG draws (peer start times, client ports, accept order)
    // happen here in one fixed order that every golden and same-seed test depends on; split, the
    // order would be one refactor away from changing silently.
    pub(crate) fn new(cfg: &'a SimConfig, logs: Option<Logs>) -> Engine<'a> {
        let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
        let mut dns_rng = ChaCha8Rng::seed_from_u64(cfg.seed ^ 0x9E37_79B9_7F4A_7C15);
        let start = cfg.epoch_us - cfg.warmup.0;
        let mut e = Engine {
            cfg,
            addrs: Vec::new(),
            pools: Vec::new(),
            peers: Vec::new(),
            primary: Vec::new(),
            backup: Vec::new(),
            peer_host: Vec::new(),
            hosts: Vec::new(),
            per_request: None,
            faults: Vec::new(),
            has_zone_resolve: cfg.servers.iter().any(|s| s.resolve),
            generation: 0,
            zone_used: 0,
            zone_cap: cfg.zone_peer_capacity(),
            ports: Vec::new(),
            tw_phase: 0,
            caches: vec![VecDeque::new(); cfg.workers.max(1) as usize],
            doomed: vec![0; cfg.workers.max(1) as usize],
            down: false,
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
            client_idle: Vec::new(),
            next_conn: 1,
            logs,
            queries: None,
            alt: Vec::new(),
            samplers: vec![Sampler::new(&cfg.latency)],
            sum: SimSummary::new(cfg.seed),
            rng: ChaCha8Rng::seed_from_u64(0),
            dns_rng: ChaCha8Rng::seed_from_u64(0),
            accept_queue: (0..cfg.workers as u16).collect(),
            accepts: vec![0; cfg.workers as usize],
            race_rng: ChaCha8Rng::seed_from_u64(cfg.seed ^ 0xF125_7B1C_0000_0001),
            race_pending_until: None,
            other_arrivals: (i64::MIN, 0, 0),
        };
        for _ in 0..cfg.accepts_before_load {
            e.accept();
        }
        let total: f64 = cfg.mix.iter().map(|(_, w)| *w).sum();
        let mut acc = 0.0;
        for (_, w) in &cfg.mix {
            acc += w / total;
            e.method_cdf.push(acc);
        }
        // Static server lines become peers now; named ones on their first answer.
        for s in &cfg.servers {
            let kind = match (s.resolve, s.per_request) {
                (true, _) => Some(HostKind::Running),
                (false, true) => Some(HostKind::PerRequest),
                (false, false) => (s.host.parse::<IpAddr>().is_err()).then_some(HostKind::AtStart),
            };
            if let Some(kind) = kind {
                let h = e.hosts.len();
                // Hosts resolve right after start, a few µs apart.
                let next_at = start + 100 * h as i64 + dns_rng.random_range(0..1000);
                let client_port = 32768 + dns_rng.random_range(0..28000u16);
                let mut host = Host::resolved(
                    cfg,
                    &s.host,
                    s.port,
                    (s.max_fails, s.fail_timeout.0 / 1_000_000, s.weight as i64),
                    (next_at, client_port),
                    false,
                );
                host.kind = kind;
                if kind == HostKind::PerRequest {
                    // Each request's own peer list: nothing is remembered between requests.
                    host.max_fails = 0;
                    e.per_request = Some(h);
                }
                e.hosts.push(host);
            } else {
                let ip: IpAddr = s.host.parse().expect("validated");
                let a = e.addr_of(ip, s.port);
                let pid = e.peers.len() as u32;
                e.peers.push(Peer::new(
                    a,
                    s.max_fails,
                    s.fail_timeout.0 / 1_000_000,
                    s.weight as i64,
                ));
                e.peer_host.push(u16::MAX);
                if s.backup {
                    e.backup.push(pid);
                } else {
                    e.primary.push(pid);
                }
            }
        }
        if let Some(f) = &cfg.zone_filler {
            // Declared after `be`, so nginx resolves it after be's names.
            let h = e.hosts.len();
            let next_at = start + 100 * h as i64 + dns_rng.random_range(0..1000);
            let client_port = 32768 + dns_rng.random_range(0..28000u16);
            let mut host = Host::resolved(
                cfg,
                &f.name,
                f.port,
                (0, 10, 1),
                (next_at, client_port),
                true,
            );
            host.group = f.upstream.clone();
            e.hosts.push(host);
        }
        if let Some(p) = &cfg.ephemeral_ports
            && p.granularity.0 > 0
        {
            // Its own stream: the other streams stay as they are without the port model.
            let mut r = ChaCha8Rng::seed_from_u64(cfg.seed ^ 0x7133_0000_0000_0099);
            e.tw_phase = r.random_range(0..p.granularity.0);
        }
        for (i, p) in cfg.pools.iter().enumerate() {
            let sa: SocketAddr = p.target.parse().expect("validated");
            let a = e.addr_of(sa.ip(), sa.port());
            e.addrs[a as usize].pool = i as u16;
            e.pools.push(PoolState {
                free_at: vec![i64::MIN; p.pool as usize],
                waits: Vec::new(),
                timeouts: 0,
                opened: 0,
            });
            if p.probe.is_some() {
                e.push(cfg.epoch_us, Ev::Probe(i as u16));
            }
        }
        for h in 0..e.hosts.len() {
            // A per-request name is resolved by its first request.
            if e.hosts[h].kind != HostKind::PerRequest {
                let at = e.hosts[h].next_at;
                e.push(at, Ev::Host(h as u16));
            }
        }
        for (i, at) in cfg.reloads.iter().enumerate() {
            e.push(cfg.epoch_us + at.0, Ev::Reload(i as u16));
        }
        for (i, at) in cfg.tests.iter().enumerate() {
            e.push(cfg.epoch_us + at.0, Ev::Test(i as u16));
        }
        for (i, at) in cfg.restarts.iter().enumerate() {
            e.push(cfg.epoch_us + at.0, Ev::Restart(i as u16));
        }
        for (i, at) in cfg.starts.iter().enumerate() {
            e.push(cfg.epoch_us + at.0, Ev::Start(i as u16));
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
        e.rng = std::mem::replace(&mut rng, ChaCha8Rng::seed_from_u64(0));
        e.dns_rng = std::mem::replace(&mut dns_rng, ChaCha8Rng::seed_from_u64(0));
        e
    }

    fn addr_of(&mut self, ip: IpAddr, port: u16) -> u32 {
        let text = SocketAddr::new(ip, port).to_string();
        if let Some(i) = self.addrs.iter().position(|a| a.text == text) {
            return i as u32;
        }
        let lat = match self.cfg.backend_latency.get(&text) {
            Some(l) => {
                self.samplers.push(Sampler::new(l));
                (self.samplers.len() - 1) as u16
            }
            None => 0,
        };
        self.addrs.push(Addr {
            text,
            ip,
            port,
            pool: u16::MAX,
            lat,
        });
        (self.addrs.len() - 1) as u32
    }

    fn push(&mut self, t: i64, ev: Ev) {
        self.ev_seq += 1;
        // 42 bits of µs (≈ 50 days, checked by SimConfig::validate), 45 bits of sequence
        // (ties in scheduling order), EV_BITS of event: its index (32) and kind (4, so up to
        // 16 kinds; a kind that did not fit was silently read back as another).
        let rel = (t - self.time_base).clamp(0, (1i64 << 42) - 1) as u128;
        let seq = self.ev_seq as u128 & ((1 << 45) - 1);
        let key = (rel << (45 + EV_BITS)) | (seq << EV_BITS) | ev.pack() as u128;
        self.heap.push(Reverse(key));
    }

    fn unpack(&self, key: u128) -> (i64, Ev) {
        let t = (key >> (45 + EV_BITS)) as i64 + self.time_base;
        (t, Ev::unpack((key & ((1u128 << EV_BITS) - 1)) as u64))
    }

    /// Run the whole load; returns the summary.
    /// Record every DNS query in memory (what an aligned timeline event needs to land on a
    /// re-query), with or without logs.
    pub(crate) fn observe_queries(&mut self) {
        self.queries = Some(Vec::new());
    }

    /// The observed queries, (epoch µs, name), after [`Engine::run`] left them.
    fn observed(&self) -> Vec<(i64, String)> {
        self.queries
            .iter()
            .flatten()
            .map(|&(t, h)| (t, self.hosts[h].name.clone()))
            .collect()
    }

    pub(crate) fn run(mut self) -> std::io::Result<Finished> {
        let cfg = self.cfg;
        let end_of_load = cfg.epoch_us + cfg.duration.0;
        let mut load = cfg.arrivals();
        while let Some((k, t)) = load.next_with(&mut self.rng) {
            let limit = (((t - self.time_base).max(0) as u128) + 1) << 81;
            while let Some(&Reverse(key)) = self.heap.peek() {
                if key >= limit {
                    break;
                }
                self.heap.pop();
                let (te, ev) = self.unpack(key);
                self.event(te, ev)?;
            }
            self.arrive(k, t)?;
        }
        // Drain in-flight work and timeline events up to the end of the load (later DNS timers
        // would run forever).
        while let Some(Reverse(key)) = self.heap.pop() {
            let (te, ev) = self.unpack(key);
            let in_flight = matches!(ev, Ev::Complete(_) | Ev::Fail(_) | Ev::ResolveTimeout(_));
            if te > end_of_load && !in_flight {
                continue;
            }
            self.event(te, ev)?;
        }
        self.sum.generation = self.generation;
        self.sum.simulated_us = cfg.duration.0;
        self.sum.fault_hits = self.faults.iter().map(|f| f.hits).collect();
        self.sum.pool_connections = self.pools.iter().map(|p| p.opened).collect();
        if let Some(l) = &mut self.logs {
            l.backends_json(cfg, &self.pools)?;
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
        let queries = self.observed();
        Ok(Finished {
            summary: self.sum,
            queries,
        })
    }

    fn event(&mut self, t: i64, ev: Ev) -> std::io::Result<()> {
        match ev {
            Ev::Complete(r) => self.complete(r, t),
            Ev::Fail(r) => self.fail(r, t),
            Ev::Host(h) => {
                let before = self.generation;
                self.host_event(h as usize, t)?;
                if self.generation != before {
                    self.draw_first_pick_race(t);
                }
                Ok(())
            }
            Ev::Probe(i) => self.probe(i as usize, t),
            Ev::Reload(_) => self.reload(t),
            Ev::Test(_) => self.test(t),
            Ev::Restart(_) => self.restart(t),
            Ev::Start(_) => self.start(t),
            Ev::ResolveTimeout(r) => self.resolution_failed(r, t, 110),
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
                    let addrs = &self.addrs;
                    for (c, d) in self.caches.iter_mut().zip(&mut self.doomed) {
                        c.retain(|i| !matches_target(target, &addrs[i.addr as usize]));
                        *d = c.iter().filter(|i| i.doom_us != i64::MAX).count() as u32;
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
        let r: Result<Vec<Ipv4Addr>, u8> = match mode.answered().clone() {
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
            DnsMode::Multi { n, base } => Ok((0..n)
                .map(|i| Ipv4Addr::from(u32::from(base) + i))
                .collect()),
            DnsMode::NxDomain | DnsMode::NoData => Err(3),
            DnsMode::ServFail => Err(2),
            DnsMode::Refused => Err(5),
            DnsMode::Drop => Err(110),
            // Rejected by `SimConfig::validate`.
            DnsMode::Weighted(_) | DnsMode::Delay { .. } | DnsMode::Truncate { .. } => Err(2),
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
        if self.hosts[h].kind == HostKind::AtStart {
            return self.resolve_at_start(h, t);
        }
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
        let tcp_port = match step {
            HostStep::Tcp { port, .. } => Some(port),
            _ => None,
        };
        let tcp = tcp_port.is_some();
        let id = match step {
            HostStep::Resend { id, .. } | HostStep::Tcp { id, .. } => id,
            _ => self.dns_rng.random::<u16>(),
        };
        let jitter = self.dns_rng.random_range(0..1000i64);
        let injected = mode_text != self.hosts[h].first_mode;
        let valid = cfg.valid_us();
        match result {
            Err(110) => {
                self.dns_log(
                    h,
                    t,
                    id,
                    &mode_text,
                    "DROPPED",
                    &[],
                    injected,
                    false,
                    tcp_port,
                )?;
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
                self.log_answer(h, t, (id, &mode_text, injected), Err(code), tcp_port)?;
                self.sum.requeries += 1;
                self.resolve_error(h, t, code)?;
                self.hosts[h].step = HostStep::Query;
                self.hosts[h].next_at = if code == 3 {
                    // NXDOMAIN is cached for `valid` like an answer, and empties the host.
                    if self.hosts[h].filler {
                        self.zone_used -= self.hosts[h].filler_ips.len() as u64;
                        self.hosts[h].filler_ips.clear();
                    }
                    self.remove_host_peers(h, None);
                    self.hosts[h].empty_nx = true;
                    t + valid + 1_000_000 + jitter
                } else {
                    t + cfg.resolver_timeout.0.max(1_000_000) + jitter
                };
                self.hosts[h].last_answer = Some(Vec::new());
            }
            Ok(mut ips) if !tcp && !fits_udp(&self.hosts[h].name, &ips) => {
                // nginx sends no EDNS: an answer over 512 bytes comes back truncated and
                // nginx asks again over TCP, about a millisecond later.
                ips.dedup();
                self.dns_log_udp_truncated(h, t, id, &mode_text, injected)?;
                let port = 32768 + self.dns_rng.random_range(0..28000u16);
                self.hosts[h].step = HostStep::Tcp { id, port };
                self.hosts[h].next_at = t + 500 + self.dns_rng.random_range(0..1000i64);
            }
            Ok(mut ips) => {
                ips.dedup();
                self.log_answer(h, t, (id, &mode_text, injected), Ok(&ips), tcp_port)?;
                self.sum.requeries += 1;
                self.apply_answer(h, t, ips)?;
                self.hosts[h].step = HostStep::Query;
                self.hosts[h].next_at = t + valid + 1_000_000 + jitter;
            }
        }
        let at = self.hosts[h].next_at;
        self.push(at, Ev::Host(h as u16));
        Ok(())
    }

    /// A host's new answer: its vanished peers go, the new ones are added while the zone has
    /// room (`ngx_http_upstream_zone_module`); a change after the first answer is a swap.
    fn apply_answer(&mut self, h: usize, t: i64, ips: Vec<IpAddr>) -> std::io::Result<()> {
        let cfg = self.cfg;
        let had_answer = self.hosts[h].last_answer.is_some();
        self.hosts[h].last_answer = Some(ips.clone());
        self.hosts[h].empty_nx = false;
        let before = self.generation;
        // ngx_http_upstream_zone_module: the vanished peers are removed first, then
        // the new ones added until the slab has no room ("goto done").
        let current = if self.hosts[h].filler {
            let host = &mut self.hosts[h];
            let had = host.filler_ips.len();
            host.filler_ips.retain(|ip| ips.contains(ip));
            self.zone_used -= (had - host.filler_ips.len()) as u64;
            host.filler_ips.clone()
        } else {
            self.remove_host_peers(h, Some(&ips));
            self.host_ips(h)
        };
        self.hosts[h].short_mem = false;
        for ip in ips {
            if current.contains(&ip) {
                continue;
            }
            if self.zone_used >= self.zone_cap {
                self.sum.memory_exhausted += 1;
                self.hosts[h].short_mem = true;
                if let Some(l) = &mut self.logs {
                    l.error_plain(
                        t,
                        "crit",
                        &format!(
                            "ngx_slab_alloc() failed: no memory in upstream zone \"{}\"",
                            cfg.upstream
                        ),
                    )?;
                    l.error_plain(
                        t,
                        "error",
                        &format!(
                            "cannot add new server to upstream \"{}\", memory exhausted",
                            self.hosts[h].group
                        ),
                    )?;
                }
                break;
            }
            self.zone_used += 1;
            if self.hosts[h].filler {
                self.hosts[h].filler_ips.push(ip);
                continue;
            }
            let a = self.addr_of(ip, self.hosts[h].port);
            let host = &self.hosts[h];
            let pid = self.peers.len() as u32;
            self.peers.push(Peer::new(
                a,
                host.max_fails,
                host.fail_timeout_s,
                host.weight,
            ));
            self.peer_host.push(h as u16);
            self.primary.push(pid);
            self.generation += 1;
        }
        // The first answer populates the host; a swap is a later change.
        if self.generation != before && had_answer {
            self.sum.swaps += 1;
            self.sum.swap_times_us.push(t);
        }
        Ok(())
    }

    /// Log one answer nginx got: its records (`changed` against the host's last answer) or
    /// the rcode of a failure. `q` = (message id, mode in force, injected).
    fn log_answer(
        &mut self,
        h: usize,
        t: i64,
        (id, mode_text, injected): (u16, &str, bool),
        answer: Result<&[IpAddr], u8>,
        tcp_port: Option<u16>,
    ) -> std::io::Result<()> {
        match answer {
            Ok(ips) => {
                let changed = self.hosts[h]
                    .last_answer
                    .as_ref()
                    .is_some_and(|prev| prev.as_slice() != ips);
                self.dns_log(
                    h, t, id, mode_text, "NOERROR", ips, injected, changed, tcp_port,
                )
            }
            Err(code) => self.dns_log(
                h,
                t,
                id,
                mode_text,
                rcode_text(code),
                &[],
                injected,
                false,
                tcp_port,
            ),
        }
    }

    /// `getaddrinfo` when nginx reads its configuration (start, reload): the answer becomes the
    /// peers; a failure keeps the peers it had (nginx refuses to start, or keeps the running
    /// configuration after a failed reload). No timer follows: the name is pinned.
    fn resolve_at_start(&mut self, h: usize, t: i64) -> std::io::Result<()> {
        match self.ask_at_start(h, t)? {
            Some(ips) => self.apply_answer(h, t, ips),
            None => Ok(()),
        }
    }

    /// `getaddrinfo` for a name resolved at start: the answer, logged (None when it failed).
    fn ask_at_start(&mut self, h: usize, t: i64) -> std::io::Result<Option<Vec<IpAddr>>> {
        let (mode_text, result) = self.answer(h, t, true);
        let id = self.dns_rng.random::<u16>();
        let injected = mode_text != self.hosts[h].first_mode;
        let logged = (id, mode_text.as_str(), injected);
        match result {
            Ok(mut ips) => {
                ips.dedup();
                self.log_answer(h, t, logged, Ok(&ips), None)?;
                Ok(Some(ips))
            }
            Err(code) => {
                self.log_answer(h, t, logged, Err(code), None)?;
                Ok(None)
            }
        }
    }

    /// `nginx -s reload`: new workers read the configuration again — names resolved at start
    /// are resolved again, per-request caches start empty — with no cached keep-alive
    /// connection and fresh `max_fails` state. (`resolve` names keep their timers: the zone
    /// outlives the reload.) A name resolved at start that does not resolve fails the new
    /// configuration (`[emerg] host not found in upstream`: ngx_parse_url fails in
    /// ngx_http_upstream.c, NGX_CONF_ERROR) and the master keeps the running one, unchanged.
    fn reload(&mut self, t: i64) -> std::io::Result<()> {
        if let Some(l) = &mut self.logs {
            l.event(t, "nginx-reload", "nginx", "", None)?;
        }
        let mut answers = Vec::new();
        let mut refused = None;
        for h in 0..self.hosts.len() {
            if self.hosts[h].kind != HostKind::AtStart {
                continue;
            }
            match self.ask_at_start(h, t)? {
                Some(ips) => answers.push((h, ips)),
                None => {
                    refused.get_or_insert(h);
                }
            }
        }
        if let Some(h) = refused {
            let msg = format!(
                "host not found in upstream \"{}:{}\"",
                self.hosts[h].name, self.hosts[h].port
            );
            if let Some(l) = &mut self.logs {
                l.error_plain(t, "emerg", &msg)?;
            }
            return Ok(());
        }
        self.afresh(t, answers)
    }

    /// New workers on a configuration read again (a reload, a start): no cached connection,
    /// fresh `max_fails` state, names resolved at start set to `answers`, per-request caches
    /// empty.
    fn afresh(&mut self, t: i64, answers: Vec<(usize, Vec<IpAddr>)>) -> std::io::Result<()> {
        for c in &mut self.caches {
            c.clear();
        }
        self.doomed.iter_mut().for_each(|d| *d = 0);
        for p in &mut self.peers {
            p.fails = 0;
        }
        for (h, ips) in answers {
            self.apply_answer(h, t, ips)?;
        }
        for host in &mut self.hosts {
            if host.kind == HostKind::PerRequest {
                host.valid_until_s = i64::MIN;
            }
        }
        Ok(())
    }

    /// A restart: nginx stops (SIGQUIT: requests in flight finish, its client and upstream
    /// connections close) and starts again, as [`Self::start`] once down.
    fn restart(&mut self, t: i64) -> std::io::Result<()> {
        if let Some(l) = &mut self.logs {
            l.event(t, event_kind::NGINX_RESTART, "nginx", "", None)?;
        }
        self.down = true;
        self.start(t)
    }

    /// A start, when nginx is down: every name resolved at start is asked (the path of
    /// [`Self::reload`]); one that does not resolve stops the start (`[emerg] host not found in
    /// upstream` in the error log) and nginx stays down — its port refuses connections. Else it
    /// starts afresh: no cached connection, no `max_fails` state, per-request caches empty.
    /// (`resolve` names keep the model's last answer: a fresh start asks them again within
    /// milliseconds, which the model does not play.)
    fn start(&mut self, t: i64) -> std::io::Result<()> {
        if !self.down {
            if let Some(l) = &mut self.logs {
                l.event_noted(t, event_kind::NGINX_START, "nginx", "ok", "was running")?;
            }
            return Ok(());
        }
        let mut answers = Vec::new();
        for h in 0..self.hosts.len() {
            if self.hosts[h].kind != HostKind::AtStart {
                continue;
            }
            let Some(ips) = self.ask_at_start(h, t)? else {
                let msg = format!(
                    "host not found in upstream \"{}:{}\"",
                    self.hosts[h].name, self.hosts[h].port
                );
                if let Some(l) = &mut self.logs {
                    l.error_plain(t, "emerg", &msg)?;
                    l.event_noted(
                        t,
                        event_kind::NGINX_START,
                        "nginx",
                        "refused",
                        &format!("[emerg] {msg}"),
                    )?;
                }
                return Ok(());
            };
            answers.push((h, ips));
        }
        self.down = false;
        self.client_idle.clear();
        self.afresh(t, answers)?;
        if let Some(l) = &mut self.logs {
            l.event_noted(t, event_kind::NGINX_START, "nginx", "ok", "listening")?;
        }
        Ok(())
    }

    /// `nginx -t`: every name resolved at start is asked, as a start would (the same
    /// `ngx_parse_url` path as [`Self::reload`]); nothing running changes. The event says
    /// `ok`, or `refused` with nginx's words.
    fn test(&mut self, t: i64) -> std::io::Result<()> {
        let mut refused = None;
        for h in 0..self.hosts.len() {
            if self.hosts[h].kind == HostKind::AtStart && self.ask_at_start(h, t)?.is_none() {
                refused.get_or_insert(h);
            }
        }
        if let Some(l) = &mut self.logs {
            let (spec, note) = match refused {
                Some(h) => (
                    "refused",
                    format!(
                        "nginx: [emerg] host not found in upstream \"{}:{}\"",
                        self.hosts[h].name, self.hosts[h].port
                    ),
                ),
                None => ("ok", "a start now would succeed".to_string()),
            };
            l.event_noted(t, "nginx-test", "nginx", spec, &note)?;
        }
        Ok(())
    }

    /// A per-request name through the resolver's cache: `Ok(None)` when the request may
    /// proceed, `Ok(Some(code))` when its resolution failed (110: no answer yet, the request
    /// waits `resolver_timeout` for it). An answer and an NXDOMAIN are kept up to the second
    /// after `valid` (`rn->valid = ngx_time() + valid`); other failures are not kept, so the
    /// next request asks again. A request has its own peer list: no generation, no max_fails.
    fn resolve_per_request(&mut self, h: usize, t: i64) -> std::io::Result<Option<u8>> {
        let now_s = t.div_euclid(1_000_000);
        if now_s <= self.hosts[h].valid_until_s {
            return Ok(self.hosts[h].cached_nx.then_some(3));
        }
        let (mode_text, result) = self.answer(h, t, true);
        let id = self.dns_rng.random::<u16>();
        let injected = mode_text != self.hosts[h].first_mode;
        let valid_s = (self.cfg.valid_us() / 1_000_000).max(1);
        let generation = self.generation;
        self.sum.requeries += 1;
        let out = match result {
            Ok(mut ips) => {
                ips.dedup();
                self.log_answer(h, t, (id, &mode_text, injected), Ok(&ips), None)?;
                self.apply_answer(h, t, ips)?;
                self.hosts[h].valid_until_s = now_s + valid_s;
                self.hosts[h].cached_nx = false;
                None
            }
            Err(code) => {
                self.log_answer(h, t, (id, &mode_text, injected), Err(code), None)?;
                if code == 3 {
                    self.remove_host_peers(h, None);
                    self.hosts[h].last_answer = Some(Vec::new());
                    self.hosts[h].valid_until_s = now_s + valid_s;
                    self.hosts[h].cached_nx = true;
                }
                Some(code)
            }
        };
        self.generation = generation;
        Ok(out)
    }

    /// One pass's `proxy_pass`: a per-request name is resolved first, then the tries.
    fn proxy(&mut self, r: u32, t: i64) -> std::io::Result<()> {
        if let Some(h) = self.per_request {
            if !self.cfg.resolver {
                return self.resolution_failed(r, t, NO_RESOLVER);
            }
            match self.resolve_per_request(h, t)? {
                None => {}
                Some(110) => {
                    let at = t + self.cfg.resolver_timeout.0;
                    self.push(at, Ev::ResolveTimeout(r));
                    return Ok(());
                }
                Some(code) => return self.resolution_failed(r, t, code),
            }
            // The pass's peers are the answer just looked up.
            self.reqs[r as usize].tries = self.pass_tries();
        }
        self.attempt(r, t)
    }

    /// The request's own resolution failed: nginx logs it in the request's context and answers
    /// 502 without trying any upstream.
    fn resolution_failed(&mut self, r: u32, t: i64, code: u8) -> std::io::Result<()> {
        let Some(h) = self.per_request else {
            return Ok(());
        };
        self.sum.dns_errors += 1;
        if let Some(l) = &mut self.logs {
            let name = &self.hosts[h].name;
            let msg = match code {
                NO_RESOLVER => format!("no resolver defined to resolve {name}"),
                _ => format!(
                    "{name} could not be resolved ({})",
                    resolve_error_text(code)
                ),
            };
            l.error_req(
                t,
                "error",
                &self.reqs[r as usize],
                &self.methods,
                &msg,
                None,
            )?;
        }
        self.reqs[r as usize].dns_failed = true;
        self.finalize(r, t, 502, None)
    }

    /// Remove this host's peers (all, or those not in `keep`).
    fn remove_host_peers(&mut self, h: usize, keep: Option<&[IpAddr]>) {
        let mut removed = 0;
        let peers = &self.peers;
        let addrs = &self.addrs;
        let peer_host = &self.peer_host;
        let mut freed = 0;
        let mut zombies = Vec::new();
        self.primary.retain(|&p| {
            let mine = peer_host[p as usize] == h as u16;
            let kept = keep.is_some_and(|k| k.contains(&addrs[peers[p as usize].addr as usize].ip));
            if mine && !kept {
                removed += 1;
                if peers[p as usize].refs > 0 {
                    zombies.push(p);
                } else {
                    freed += 1;
                }
                false
            } else {
                true
            }
        });
        for p in zombies {
            self.peers[p as usize].zombie = true;
        }
        self.zone_used -= freed;
        self.generation += removed;
    }

    fn resolve_error(&mut self, h: usize, t: i64, code: u8) -> std::io::Result<()> {
        self.sum.dns_errors += 1;
        let text = resolve_error_text(code);
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
        tcp_port: Option<u16>,
    ) -> std::io::Result<()> {
        if let Some(q) = &mut self.queries {
            q.push((t, h));
        }
        if let Some(l) = &mut self.logs {
            let host = &self.hosts[h];
            let (client_port, tcp) = (tcp_port.unwrap_or(host.client_port), tcp_port.is_some());
            let ttl = self.cfg.dns_ttl.0 / 1_000_000;
            let v4: Vec<IpAddr> = ips.iter().copied().filter(IpAddr::is_ipv4).collect();
            l.dns(
                t,
                client_port,
                &host.name,
                "A",
                id,
                mode,
                rcode,
                &v4,
                ttl,
                changed,
                injected,
                tcp,
                false,
            )?;
            if self.cfg.ipv6 {
                // nginx asks A and AAAA together when ipv6=on.
                let v6: Vec<IpAddr> = ips.iter().copied().filter(IpAddr::is_ipv6).collect();
                l.dns(
                    t,
                    client_port,
                    &host.name,
                    "AAAA",
                    id.wrapping_add(1),
                    mode,
                    rcode,
                    &v6,
                    ttl,
                    false,
                    injected,
                    tcp,
                    false,
                )?;
            }
        }
        Ok(())
    }

    /// The truncated UDP answer (no records) that sends nginx to TCP.
    fn dns_log_udp_truncated(
        &mut self,
        h: usize,
        t: i64,
        id: u16,
        mode: &str,
        injected: bool,
    ) -> std::io::Result<()> {
        if let Some(q) = &mut self.queries {
            q.push((t, h));
        }
        if let Some(l) = &mut self.logs {
            let host = &self.hosts[h];
            let ttl = self.cfg.dns_ttl.0 / 1_000_000;
            l.dns(
                t,
                host.client_port,
                &host.name,
                "A",
                id,
                mode,
                "NOERROR",
                &[],
                ttl,
                false,
                injected,
                false,
                true,
            )?;
        }
        Ok(())
    }

    // ---------------------------------------------------------------- requests

    fn arrive(&mut self, k: u64, t: i64) -> std::io::Result<()> {
        if self.down {
            // Nothing listens: the client's connect is refused, nginx logs nothing.
            self.sum.requests += 1;
            return match &mut self.logs {
                Some(l) => l.load_refused(t, k),
                None => Ok(()),
            };
        }
        let method = if self.method_cdf.len() == 1 {
            0
        } else {
            let u: f64 = self.rng.random::<f64>();
            self.method_cdf.iter().position(|&c| u < c).unwrap_or(0) as u8
        };
        // The most recently returned idle client connection, or a new one. A new connection
        // is accepted by one worker (accept_mutex off, EPOLLEXCLUSIVE order), so the split of
        // requests between workers follows which client connections happen to be hot.
        let (conn, n, worker) = match self.client_idle.pop() {
            Some((c, n, w)) => (c, n + 1, w),
            None => {
                let c = self.next_conn;
                self.next_conn += 1;
                (c, 1, self.accept())
            }
        };
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
                    resp: 200,
                    worker: 0,
                    peer: 0,
                    cached: false,
                    port: false,
                    err: TryError::Closed,
                    dns_failed: false,
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
            q.worker = worker;
            q.hops.clear();
        }
        self.sum.requests += 1;
        self.start_pass(r, t, 1);
        // A request another worker initialised just before the resolving worker changed the
        // peers is refused at its first pick (see `draw_first_pick_race`).
        let mut race = false;
        if worker != RESOLVING_WORKER {
            self.count_other_arrival(t);
            if let Some(until) = self.race_pending_until.take() {
                race = t <= until;
            }
        }
        if race {
            return self.nlu(r, t, Busy::Generation);
        }
        self.proxy(r, t)
    }

    /// The worker that accepts a new client connection (see `accept_queue`).
    fn accept(&mut self) -> u16 {
        let w = self.accept_queue[0];
        if self.accepts[w as usize].is_multiple_of(16) {
            self.accept_queue.rotate_left(1);
        }
        self.accepts[w as usize] += 1;
        w
    }

    fn count_other_arrival(&mut self, t: i64) {
        let sec = t.div_euclid(1_000_000);
        let (cur, n, prev) = &mut self.other_arrivals;
        if *cur != sec {
            *prev = if *cur == sec - 1 { *n } else { 0 };
            *cur = sec;
            *n = 0;
        }
        *n += 1;
    }

    /// The arrival rate (per second) at the workers that do not resolve, around `t`.
    fn other_rate(&self, t: i64) -> f64 {
        let sec = t.div_euclid(1_000_000);
        let (cur, n, prev) = self.other_arrivals;
        let into = t.rem_euclid(1_000_000) as f64 / 1e6;
        if cur == sec {
            (prev + n) as f64 / (1.0 + into)
        } else if cur == sec - 1 {
            n as f64 / (1.0 + into)
        } else {
            0.0
        }
    }

    /// nginx changes the peer list in the resolving worker under the write lock; a request in
    /// another worker that read the list's generation (`init_round_robin_peer`) just before the
    /// lock and picks just after it (`get_round_robin_peer`) sees a new generation and is
    /// refused. The gap between the two is `first_pick_window_us`, and where a change falls
    /// relative to the other workers' requests is random at that scale, so a change catches a
    /// request with probability 1 − e^(−rate·window).
    fn draw_first_pick_race(&mut self, t: i64) {
        if self.cfg.workers < 2 || !self.has_zone_resolve {
            return;
        }
        let rate = self.other_rate(t);
        self.sum.first_pick_exposure_per_us += rate * 1e-6;
        let window = self.cfg.first_pick_window_us;
        if window <= 0.0 {
            return;
        }
        let p = 1.0 - (-rate * window * 1e-6).exp();
        self.sum.first_pick_expected += p;
        if p > 0.0 && self.race_rng.random::<f64>() < p {
            // The caught request was already between its two steps: in the model it is the
            // next one to arrive there (within the second the rate was measured over).
            self.race_pending_until = Some(t + 1_000_000);
        }
    }

    fn start_pass(&mut self, r: u32, _t: i64, pass: u8) {
        let tries = self.pass_tries();
        let q = &mut self.reqs[r as usize];
        q.gen0 = self.generation;
        q.tried = 0;
        q.tried_backup = 0;
        q.tries = tries;
        q.pass = pass;
        q.dns_failed = false;
    }

    /// Tries a pass may make: every peer, capped by `proxy_next_upstream_tries`.
    fn pass_tries(&self) -> u32 {
        let tries = (self.primary.len() + self.backup.len()) as u32;
        let limit = self.cfg.next_upstream.tries;
        if limit > 0 { tries.min(limit) } else { tries }
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

    // Over 150 lines on purpose: one try of one request follows ngx_http_upstream_connect
    // step by step (peer choice, keep-alive reuse, connect, fault, latency) with the RNG draws in
    // the order the golden outputs fix; docs/sim.md maps each step to nginx's source.
    fn attempt(&mut self, r: u32, t: i64) -> std::io::Result<()> {
        let now_s = t.div_euclid(1_000_000);
        let (p, _is_backup) = match self.select(r, now_s) {
            Ok(x) => x,
            Err(b) => return self.nlu(r, t, b),
        };
        let a = self.peers[p as usize].addr;
        self.peers[p as usize].refs += 1;
        // ngx_http_upstream_get_keepalive_peer: the most recently returned idle connection to
        // this address in this worker's cache. One the backend has closed meanwhile is gone
        // (nginx's close handler removed it when the FIN arrived).
        let mut cached = false;
        let mut doom_us = i64::MAX;
        if self.cfg.keepalive > 0 {
            let w = self.reqs[r as usize].worker as usize;
            let cache = &mut self.caches[w];
            let mut i = cache.len();
            while i > 0 {
                i -= 1;
                if cache[i].addr != a {
                    continue;
                }
                let item = cache.remove(i).expect("index in range");
                if item.doom_us != i64::MAX {
                    self.doomed[w] -= 1;
                }
                if item.doom_us > t {
                    cached = true;
                    doom_us = item.doom_us;
                    break;
                }
            }
        }
        // Faults decide the try's fate, in timeline order.
        let mut extra = 0i64;
        let mut failure_free_latency = 0i64;
        let mut failure: Option<(TryError, i64, Option<u16>)> = None;
        let mut port = false;
        if let Some(pc) = &self.cfg.ephemeral_ports {
            // A new connection binds an ephemeral port toward this address; none is free
            // while every port is open or in TIME_WAIT (tcp_tw_reuse = 0).
            if self.ports.len() <= a as usize {
                self.ports.resize_with(a as usize + 1, PortState::default);
            }
            let ps = &mut self.ports[a as usize];
            while ps.time_wait.front().is_some_and(|&e| e <= t) {
                ps.time_wait.pop_front();
            }
            if ps.open as usize + ps.time_wait.len() >= pc.count as usize {
                failure = Some((TryError::NoPort, 0, None));
            } else {
                ps.open += 1;
                port = true;
            }
        }
        if failure.is_none() && doom_us != i64::MAX {
            // Reused inside a reclaim's gap: the backend swallows the request and the close
            // arrives at the doom time (its hit was counted when the close was decided).
            failure = Some((TryError::Closed, (doom_us - t).max(1), None));
        }
        for fi in 0..self.faults.len() {
            if failure.is_some() {
                break;
            }
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
                    // The backend resets at accept: only a new connection can be hit.
                    if !cached && (p >= 1.0 || self.rng.random::<f64>() < p) {
                        failure = Some((TryError::Reset, 200, Some(fi as u16)));
                    }
                }
                // Decided per response, in `complete`.
                FaultKind::Reclaim { .. } => {}
                FaultKind::Stale {
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
                        let d = self.samplers[self.addrs[a as usize].lat as usize]
                            .sample(&mut self.rng);
                        failure = Some((TryError::Closed, d.max(1), Some(fi as u16)));
                    }
                }
                FaultKind::Delay { by } => {
                    extra += by.0;
                    self.faults[fi].hits += 1;
                }
            }
        }
        // proxy_read_timeout: a try slower than it fails with 504 instead of completing.
        let mut resp = 200;
        if failure.is_none() {
            let mut l =
                self.samplers[self.addrs[a as usize].lat as usize].sample(&mut self.rng) + extra;
            let pi = self.addrs[a as usize].pool;
            if pi != u16::MAX {
                // The backend first waits for a pool connection, then makes its round trips.
                let pc = &self.cfg.pools[pi as usize];
                let service = l + pc.round_trips as i64 * pc.round_trip.0;
                match self.pools[pi as usize].acquire(t, service, pc.acquire_timeout.0) {
                    Some(wait) => l = wait + service,
                    None => {
                        self.pools[pi as usize].timeouts += 1;
                        l += pc.acquire_timeout.0;
                        resp = 503;
                    }
                }
            }
            if l > self.cfg.read_timeout.0 {
                failure = Some((TryError::Timeout, self.cfg.read_timeout.0 - extra, None));
            } else {
                failure_free_latency = l;
            }
        }
        let q = &mut self.reqs[r as usize];
        q.peer = p;
        q.cached = cached;
        q.port = port;
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
                    connected: !matches!(err, TryError::Refused | TryError::NoPort),
                    pass_start,
                });
                self.push(t + d + extra, Ev::Fail(r));
            }
            None => {
                let l = failure_free_latency;
                let q = &mut self.reqs[r as usize];
                q.resp = resp;
                q.hops.push(Hop {
                    addr: a,
                    status: resp,
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

    /// A readiness probe straight to a pool backend: its `/ready` makes one round trip
    /// through the same pool. A prober that gives up leaves the queue without a connection.
    fn probe(&mut self, i: usize, t: i64) -> std::io::Result<()> {
        let pc = &self.cfg.pools[i];
        let Some(pr) = &pc.probe else {
            return Ok(());
        };
        let lat = self
            .addrs
            .iter()
            .find(|a| a.pool == i as u16)
            .map_or(0, |a| a.lat as usize);
        let service = self.samplers[lat].sample(&mut self.rng) + pc.round_trip.0;
        let wait = self.pools[i].acquire(t, service, pr.timeout.0.min(pc.acquire_timeout.0));
        if wait.is_none() && pc.acquire_timeout.0 <= pr.timeout.0 {
            // The pool gave up before the prober did.
            self.pools[i].timeouts += 1;
        }
        let took = wait.map(|w| w + service);
        let ok = took.is_some_and(|d| d <= pr.timeout.0);
        if let Some(l) = &mut self.logs {
            l.probe(
                t,
                &pc.name,
                &pr.path,
                ok,
                if ok { took.unwrap_or(0) } else { pr.timeout.0 },
            )?;
        }
        let next = t + pr.interval.0;
        if next <= self.cfg.epoch_us + self.cfg.duration.0 {
            self.push(next, Ev::Probe(i as u16));
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
        self.try_ended(r, t, err == TryError::Timeout);
        self.sum.try_failures += 1;
        let a = self.peers[p as usize].addr;
        if err == TryError::NoPort {
            self.sum.port_exhausted += 1;
        }
        if let Some(l) = &mut self.logs {
            let q = &self.reqs[r as usize];
            let text = &self.addrs[a as usize].text;
            if err == TryError::NoPort {
                // connect() itself failed: nginx names the address and logs it as critical.
                let msg = format!("connect() to {text} {}", err.line());
                l.error_req(t, "crit", q, &self.methods, &msg, Some(text))?;
            } else {
                l.error_req(t, "error", q, &self.methods, err.line(), Some(text))?;
            }
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
                        Some(&self.addrs[a as usize].text),
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
                let own = || self.hosts.iter().filter(|h| !h.filler);
                if own().any(|h| h.short_mem) && !own().any(|h| h.empty_nx) {
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
                Some(&be),
            )?;
        }
        self.finalize(r, t, 502, Some(class))
    }

    /// The try in progress ended: its peer reference goes (a zombie peer's memory with the
    /// last one), and its connection's port, into TIME_WAIT when nginx closed it (a response
    /// without keep-alive, a timeout), at once when the backend did.
    fn try_ended(&mut self, r: u32, t: i64, nginx_closed: bool) {
        let (p, port) = {
            let q = &mut self.reqs[r as usize];
            (q.peer, std::mem::take(&mut q.port))
        };
        let peer = &mut self.peers[p as usize];
        peer.refs -= 1;
        if peer.refs == 0 && peer.zombie {
            peer.zombie = false;
            self.zone_used -= 1;
        }
        if port && let Some(pc) = &self.cfg.ephemeral_ports {
            let ps = &mut self.ports[peer.addr as usize];
            ps.open -= 1;
            if nginx_closed {
                let mut free = t + pc.time_wait.0;
                let g = pc.granularity.0;
                if g > 0 {
                    // The timer fires at the next bucket of the kernel's timer wheel.
                    free = (free - self.tw_phase).div_euclid(g) * g + self.tw_phase;
                    if free < t + pc.time_wait.0 {
                        free += g;
                    }
                }
                ps.time_wait.push_back(free);
            }
        }
    }

    fn complete(&mut self, r: u32, t: i64) -> std::io::Result<()> {
        // keepalive = 0 when ports are modelled: nginx closes the connection after the response.
        self.try_ended(r, t, true);
        let p = self.reqs[r as usize].peer;
        let peer = &mut self.peers[p as usize];
        if peer.accessed_s < peer.checked_s {
            peer.fails = 0;
        }
        let a = peer.addr;
        if self.cfg.keepalive > 0 {
            // The backend decides after this response whether it will close the connection
            // (the lab backend's `reclaim`): the doom travels with the connection.
            let mut doom_us = i64::MAX;
            for fi in 0..self.faults.len() {
                let f = &self.faults[fi];
                if let FaultKind::Reclaim {
                    p,
                    delay_min,
                    delay_max,
                } = f.kind
                    && f.start <= t
                    && t < f.end
                    && matches_target(f.target, &self.addrs[a as usize])
                    && self.rng.random::<f64>() < p
                {
                    let d = if delay_max.0 > delay_min.0 {
                        self.rng.random_range(delay_min.0..=delay_max.0)
                    } else {
                        delay_min.0
                    };
                    doom_us = t + d;
                    self.faults[fi].hits += 1;
                    break;
                }
            }
            // ngx_http_upstream_free_keepalive_peer: the connection just freed is always kept;
            // a full cache closes its least recently used one. Connections the backend already
            // closed left the cache when their close arrived.
            let keepalive = self.cfg.keepalive as usize;
            let w = self.reqs[r as usize].worker as usize;
            let cache = &mut self.caches[w];
            if cache.len() >= keepalive && self.doomed[w] > 0 {
                cache.retain(|i| i.doom_us > t);
                self.doomed[w] = cache.iter().filter(|i| i.doom_us != i64::MAX).count() as u32;
            }
            if cache.len() >= keepalive
                && let Some(old) = cache.pop_front()
                && old.doom_us != i64::MAX
            {
                self.doomed[w] -= 1;
            }
            if doom_us != i64::MAX {
                self.doomed[w] += 1;
            }
            cache.push_back(Idle { addr: a, doom_us });
        }
        let resp = self.reqs[r as usize].resp;
        self.finalize(r, t, resp, None)
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
            return self.proxy(r, t);
        }
        match status {
            200 => self.sum.ok += 1,
            503 => self.sum.status_503 += 1,
            504 => {
                self.sum.status_504 += 1;
                self.sum.upstream_failures += 1;
            }
            _ => {
                self.sum.status_502 += 1;
                match class {
                    Some(c) => self.sum.nlu.add(c),
                    None if self.reqs[r as usize].dns_failed => self.sum.dns_request_failures += 1,
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
                200 | 503 => self.cfg.response_bytes,
                504 => 167,
                _ => 157,
            };
            // The backend's `x-backend` header, on answers that came from a backend.
            let header = q
                .hops
                .last()
                .filter(|h| h.addr != BE && h.status == status)
                .and_then(|h| self.cfg.names.get(&self.addrs[h.addr as usize].text))
                .map(String::as_str);
            l.access(AccessLine {
                header,
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
        // The client connection goes back to the generator's pool, unless nginx closed it after
        // `keepalive_requests` or the pool keeps enough idle ones already.
        let q = &self.reqs[r as usize];
        if q.conn_requests < self.cfg.keepalive_requests
            && self.client_idle.len() < self.cfg.client_connections as usize
        {
            self.client_idle.push((q.conn, q.conn_requests, q.worker));
        }
        self.free.push(r);
        Ok(())
    }
}

/// Not a resolver's code: no `resolver` is in scope, nothing was asked.
const NO_RESOLVER: u8 = 0;

/// nginx's text for a resolver error code (`could not be resolved (…)`).
fn resolve_error_text(code: u8) -> &'static str {
    match code {
        3 => "3: Host not found",
        2 => "2: Server failure",
        5 => "5: Operation refused",
        _ => "110: Operation timed out",
    }
}

/// The DNS log's rcode for a resolver error code.
fn rcode_text(code: u8) -> &'static str {
    match code {
        3 => "NXDOMAIN",
        2 => "SERVFAIL",
        110 => "DROPPED",
        _ => "REFUSED",
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
        FaultKind::Stale {
            p,
            delay_min,
            delay_max,
        } => format!("stale:p={p},delay={}..{}", d(delay_min.0), d(delay_max.0)),
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

/// Does this answer fit a 512-byte UDP response (nginx sends no EDNS)? Header, question, and
/// per record a compressed name pointer, type, class, TTL, length and the address.
fn fits_udp(name: &str, ips: &[IpAddr]) -> bool {
    // A and AAAA are separate queries: each answer must fit on its own.
    let question = name.trim_end_matches('.').len() + 2 + 4;
    let v4 = ips.iter().filter(|ip| ip.is_ipv4()).count();
    let v6 = ips.len() - v4;
    12 + question + 16 * v4 <= 512 && 12 + question + 28 * v6 <= 512
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
