//! The transport-independent authority: one packet in, at most one packet out.
//!
//! [`Engine::handle`] is a plain function of (packet, client, transport) plus the per-name state,
//! so the fuzz test can throw millions of packets at it without sockets, and the UDP and TCP
//! loops share every rule.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use hickory_proto::op::{
    Edns, Header, Message, MessageType, Metadata, OpCode, Query, ResponseCode,
};
use hickory_proto::rr::rdata::{A, AAAA};
use hickory_proto::rr::{DNSClass, RData, Record, RecordType};
use hickory_proto::serialize::binary::{BinDecodable, BinDecoder};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;

use crate::zone::{Align, ModeSpec, NameConfig, Unknown};
use resolvelab_core::spec::dns::DnsMode;
use resolvelab_core::text::Exposition;

/// UDP answers larger than the client's limit (512 bytes, or its EDNS size) are truncated.
const UDP_PLAIN_LIMIT: usize = 512;
/// The EDNS payload size we advertise (the DNS flag day 2020 value).
const EDNS_PAYLOAD: u16 = 1232;
/// Per-name memory of previous answers (for `changed`) is reset past this many clients.
const MAX_CLIENTS_PER_NAME: usize = 65_536;

/// How a query arrived (the query log's type, shared with its reader).
pub use resolvelab_core::evidence::Transport;

/// One query and what it was answered: a line of the query log (`resolvelab.dns/v1`), the type
/// its reader (`history`) shares.
pub use resolvelab_core::evidence::DnsQuery as QueryEvent;

/// A mode change, as it happens (set, aligned set taking effect, revert, timeline).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModeChange {
    /// Epoch microseconds when the change took effect.
    pub t_us: i64,
    /// The name.
    pub name: String,
    /// The mode before.
    pub from: String,
    /// The mode after.
    pub to: String,
    /// `set`, `aligned` (a `next-query` set taking effect), `revert` or `pending`.
    pub reason: String,
    /// Injection hits of this name so far.
    pub hits: u64,
}

/// A name's state as the control API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NameStatus {
    /// The name.
    pub name: String,
    /// The mode in force.
    pub mode: String,
    /// The configured mode.
    pub default_mode: String,
    /// `mode != default_mode`.
    pub injected: bool,
    /// Record TTL in seconds.
    pub ttl: u32,
    /// AAAA records.
    pub aaaa: Vec<Ipv6Addr>,
    /// Queries answered (or dropped) for this name.
    pub queries: u64,
    /// Queries answered under a non-default mode.
    pub hits: u64,
    /// A `next-query` change waiting for the next query: its mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<String>,
    /// Its `for`, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_for_ms: Option<u64>,
    /// The mode this name reverts to, and in how many milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revert_to: Option<String>,
    /// Milliseconds until the revert.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revert_in_ms: Option<u64>,
    /// The views with an answer of their own (`serve_view`): view → its mode.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub views: std::collections::BTreeMap<u16, String>,
}

/// Why a control request failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetError {
    /// The name is not served.
    UnknownName(String),
    /// The mode is not acceptable (message says why).
    Invalid(String),
}

impl std::fmt::Display for SetError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SetError::UnknownName(s) | SetError::Invalid(s) => f.write_str(s),
        }
    }
}

impl std::error::Error for SetError {}

/// What to send back for one packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// The encoded answer; `None` = send nothing.
    pub bytes: Option<Vec<u8>>,
    /// Wait this long before sending (`delay` mode).
    pub delay: Duration,
}

impl Reply {
    fn none() -> Reply {
        Reply {
            bytes: None,
            delay: Duration::ZERO,
        }
    }
}

/// Engine settings (the server's [`crate::DnsConfig`] minus sockets and files).
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// The names served.
    pub names: Vec<NameConfig>,
    /// TTL of names without their own.
    pub ttl: u32,
    /// How to answer names we do not serve.
    pub unknown: Unknown,
    /// Seed of every name's `weighted` RNG (mixed with the name).
    pub seed: u64,
    /// Allow answers with non-loopback addresses.
    pub allow_remote: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Given {
    rcode: &'static str,
    answers: Vec<IpAddr>,
}

struct NameState {
    name: String,
    default_mode: DnsMode,
    mode: DnsMode,
    mode_str: Arc<str>,
    /// Stack of (when, mode to restore): a `for` pushes, the clock pops.
    reverts: Vec<(Instant, DnsMode)>,
    pending: Option<(ModeSpec, Option<Duration>)>,
    ttl: u32,
    aaaa: Vec<Ipv6Addr>,
    cursor: usize,
    rng: ChaCha8Rng,
    last: HashMap<(IpAddr, u16), Given>,
    /// Every mode string this name has been in; counters refer to them by index.
    modes_seen: Vec<Arc<str>>,
    mode_id: u32,
    counters: HashMap<(&'static str, &'static str, u32, Transport), u64>,
    queries: u64,
    hits: u64,
    /// Views with an answer of their own ([`Engine::serve_view`]): a query that arrives on a
    /// view's address is answered with it instead of the name's mode.
    views: HashMap<u16, ViewMode>,
}

/// A view's own answer for a name.
struct ViewMode {
    mode: DnsMode,
    mode_str: Arc<str>,
    mode_id: u32,
}

impl NameState {
    fn injected(&self) -> bool {
        self.mode != self.default_mode
    }

    fn switch(&mut self, to: DnsMode) -> (String, String) {
        let from = self.mode_str.to_string();
        self.mode_str = Arc::from(to.to_string());
        self.mode_id = self.mode_index(&self.mode_str.clone());
        self.mode = to;
        (from, self.mode_str.to_string())
    }

    /// The counters' index of a mode string, registered when new.
    fn mode_index(&mut self, mode: &Arc<str>) -> u32 {
        match self.modes_seen.iter().position(|m| m == mode) {
            Some(i) => i as u32,
            None => {
                self.modes_seen.push(mode.clone());
                (self.modes_seen.len() - 1) as u32
            }
        }
    }

    fn resolve(&self, spec: &ModeSpec) -> DnsMode {
        match spec {
            ModeSpec::Default => self.default_mode.clone(),
            ModeSpec::DnsMode(m) => m.clone().wrap_onto(&self.mode),
        }
    }

    fn status(&self, now: Instant) -> NameStatus {
        let (pending, pending_for_ms) = match &self.pending {
            Some((m, f)) => (Some(m.to_string()), f.map(|d| d.as_millis() as u64)),
            None => (None, None),
        };
        let (revert_to, revert_in_ms) = match self.reverts.last() {
            Some((at, m)) => (
                Some(m.to_string()),
                Some(at.saturating_duration_since(now).as_millis() as u64),
            ),
            None => (None, None),
        };
        NameStatus {
            name: self.name.clone(),
            mode: self.mode_str.to_string(),
            default_mode: self.default_mode.to_string(),
            injected: self.injected(),
            ttl: self.ttl,
            aaaa: self.aaaa.clone(),
            queries: self.queries,
            hits: self.hits,
            pending,
            pending_for_ms,
            revert_to,
            revert_in_ms,
            views: (self.views.iter())
                .map(|(k, v)| (*k, v.mode_str.to_string()))
                .collect(),
        }
    }
}

/// What a mode decided for one query.
enum Plan {
    Records {
        rcode: ResponseCode,
        v4: Vec<Ipv4Addr>,
        v6: Vec<Ipv6Addr>,
    },
    Truncated,
    Drop,
}

/// Where events go: the query log, the live broadcast, the mode-change broadcast.
pub(crate) struct Sinks {
    pub(crate) log: RwLock<Option<std::sync::mpsc::SyncSender<Vec<QueryEvent>>>>,
    pub(crate) events: broadcast::Sender<QueryEvent>,
    pub(crate) changes: broadcast::Sender<ModeChange>,
}

#[derive(Default)]
struct Stats {
    malformed_dropped: AtomicU64,
    formerr: AtomicU64,
    unknown: Mutex<HashMap<(&'static str, &'static str, Transport), u64>>,
    other: Mutex<HashMap<(&'static str, Transport), u64>>,
}

/// The authority's state and its packet handler. Shared (`Arc`) by the UDP and TCP loops and
/// the control API.
pub struct Engine {
    names: RwLock<HashMap<String, Arc<Mutex<NameState>>>>,
    unknown: Unknown,
    allow_remote: bool,
    stats: Stats,
    pub(crate) sinks: Sinks,
    epoch: (Instant, i64),
    /// How many views the server bound (`DnsConfig::views`): `serve_view` refuses others.
    pub(crate) views: std::sync::atomic::AtomicU16,
}

pub(crate) fn rcode_str(r: ResponseCode) -> &'static str {
    match r {
        ResponseCode::NoError => "NOERROR",
        ResponseCode::FormErr => "FORMERR",
        ResponseCode::ServFail => "SERVFAIL",
        ResponseCode::NXDomain => "NXDOMAIN",
        ResponseCode::NotImp => "NOTIMP",
        ResponseCode::Refused => "REFUSED",
        _ => "OTHER",
    }
}

fn qtype_str(t: RecordType) -> String {
    match t {
        RecordType::Unknown(n) => format!("TYPE{n}"),
        t => t.to_string(),
    }
}

/// A bounded label set for metrics (fuzzers can send 65,536 qtypes).
fn qtype_label(t: RecordType) -> &'static str {
    match t {
        RecordType::A => "A",
        RecordType::AAAA => "AAAA",
        RecordType::ANY => "ANY",
        RecordType::CNAME => "CNAME",
        RecordType::MX => "MX",
        RecordType::NS => "NS",
        RecordType::SOA => "SOA",
        RecordType::TXT => "TXT",
        RecordType::SRV => "SRV",
        RecordType::HTTPS => "HTTPS",
        _ => "OTHER",
    }
}

/// The name as the log and the lookup want it: lowercase, no trailing dot. Hostname labels are
/// copied directly; anything else goes through hickory's escaping.
fn lower_name(name: &hickory_proto::rr::Name) -> String {
    let mut s = String::with_capacity(name.len());
    for (i, label) in name.iter().enumerate() {
        if i > 0 {
            s.push('.');
        }
        for &b in label {
            if b.is_ascii_alphanumeric() || b == b'-' || b == b'_' {
                s.push(char::from(b.to_ascii_lowercase()));
            } else {
                let mut slow = name.to_ascii();
                if slow.ends_with('.') {
                    slow.pop();
                }
                slow.make_ascii_lowercase();
                return slow;
            }
        }
    }
    s
}

fn seed_for(seed: u64, name: &str) -> u64 {
    // FNV-1a: a stable per-name stream from one seed, independent of HashMap order.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ seed;
    for b in name.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

impl Engine {
    /// Build the engine. Fails on duplicate names or non-loopback answers (unless allowed).
    pub fn new(cfg: EngineConfig) -> Result<Engine, String> {
        let mut names = HashMap::new();
        for n in cfg.names {
            n.check_loopback(cfg.allow_remote)?;
            let state = NameState {
                name: n.name.clone(),
                default_mode: n.mode.clone(),
                mode_str: Arc::from(n.mode.to_string()),
                modes_seen: vec![Arc::from(n.mode.to_string())],
                mode_id: 0,
                mode: n.mode,
                reverts: Vec::new(),
                pending: None,
                ttl: n.ttl.unwrap_or(cfg.ttl),
                aaaa: n.aaaa,
                cursor: 0,
                rng: ChaCha8Rng::seed_from_u64(seed_for(cfg.seed, &n.name)),
                last: HashMap::new(),
                counters: HashMap::new(),
                queries: 0,
                hits: 0,
                views: HashMap::new(),
            };
            if names
                .insert(n.name.clone(), Arc::new(Mutex::new(state)))
                .is_some()
            {
                return Err(format!(
                    "name `{}` is given twice (in --name and/or the zone file); give it once",
                    n.name
                ));
            }
        }
        Ok(Engine {
            names: RwLock::new(names),
            unknown: cfg.unknown,
            allow_remote: cfg.allow_remote,
            stats: Stats::default(),
            sinks: Sinks {
                log: RwLock::new(None),
                events: broadcast::channel(16_384).0,
                changes: broadcast::channel(1024).0,
            },
            epoch: (Instant::now(), resolvelab_core::time::now_us()),
            views: std::sync::atomic::AtomicU16::new(0),
        })
    }

    fn t_us(&self, at: Instant) -> i64 {
        let (i0, u0) = self.epoch;
        match at.checked_duration_since(i0) {
            Some(d) => u0 + d.as_micros() as i64,
            None => u0 - i0.duration_since(at).as_micros() as i64,
        }
    }

    fn entry(&self, name: &str) -> Option<Arc<Mutex<NameState>>> {
        let names = self.names.read().unwrap_or_else(|p| p.into_inner());
        names.get(name).cloned()
    }

    fn announce(&self, at: Instant, st: &NameState, from: String, to: String, reason: &str) {
        let _ = self.sinks.changes.send(ModeChange {
            t_us: self.t_us(at),
            name: st.name.clone(),
            from,
            to,
            reason: reason.into(),
            hits: st.hits,
        });
    }

    /// Apply every revert that is due at `now` (lazily at each query, and by the server's
    /// ticker so that changes are announced on time).
    fn settle(&self, st: &mut NameState, now: Instant) {
        while let Some((at, _)) = st.reverts.last() {
            if *at > now {
                break;
            }
            let (at, m) = st.reverts.pop().expect("checked non-empty");
            if m != st.mode {
                let (from, to) = st.switch(m);
                self.announce(at, st, from, to, "revert");
            }
        }
    }

    /// Apply due reverts on every name (called periodically by the server).
    pub fn tick(&self) {
        let now = Instant::now();
        let names: Vec<_> = {
            let n = self.names.read().unwrap_or_else(|p| p.into_inner());
            n.values().cloned().collect()
        };
        for e in names {
            let mut st = e.lock().unwrap_or_else(|p| p.into_inner());
            if !st.reverts.is_empty() {
                self.settle(&mut st, now);
            }
        }
    }

    /// Set `name`'s mode. `for_` reverts to the mode in force before after that long (a later
    /// set without `for` cancels pending reverts); `Align::NextQuery` makes the change happen
    /// exactly at the next query for the name, and `for_` then counts from that query.
    pub fn set_mode(
        &self,
        name: &str,
        spec: ModeSpec,
        for_: Option<Duration>,
        align: Align,
    ) -> Result<NameStatus, SetError> {
        let key = crate::zone::normalize_name(name).map_err(SetError::Invalid)?;
        let entry = self.entry(&key).ok_or_else(|| {
            let names = self.names.read().unwrap_or_else(|p| p.into_inner());
            let mut known: Vec<_> = names.keys().cloned().collect();
            known.sort();
            SetError::UnknownName(format!(
                "unknown name `{key}`; served names: {}",
                if known.is_empty() {
                    "(none)".into()
                } else {
                    known.join(", ")
                }
            ))
        })?;
        if let ModeSpec::DnsMode(m) = &spec {
            m.check_loopback(self.allow_remote)
                .map_err(SetError::Invalid)?;
        }
        if for_ == Some(Duration::ZERO) {
            return Err(SetError::Invalid("`for` must be longer than 0".into()));
        }
        if align == Align::BetweenQueries {
            return Err(SetError::Invalid(
                "`between-requeries` is placed by a scenario's runner, which knows nginx's \
                 re-query times; the authority takes `now` or `next-requery`"
                    .into(),
            ));
        }
        let now = Instant::now();
        let mut st = entry.lock().unwrap_or_else(|p| p.into_inner());
        self.settle(&mut st, now);
        match align {
            Align::NextQuery => {
                st.pending = Some((spec.clone(), for_));
                let from = st.mode_str.to_string();
                self.announce(now, &st, from, spec.to_string(), "pending");
            }
            Align::Now | Align::BetweenQueries => {
                st.pending = None;
                self.apply(&mut st, &spec, for_, now, "set");
            }
        }
        Ok(st.status(now))
    }

    /// Answer `name` with `mode` from now on as its configured mode: what a GSLB does when its
    /// health checks change its answer. Not an injection (the answers are the name's own) and
    /// it cancels pending reverts and aligned sets. Announced with `reason`.
    pub fn serve(&self, name: &str, mode: DnsMode, reason: &str) -> Result<NameStatus, SetError> {
        let key = crate::zone::normalize_name(name).map_err(SetError::Invalid)?;
        let entry = self
            .entry(&key)
            .ok_or_else(|| SetError::UnknownName(format!("unknown name `{key}`")))?;
        mode.check_loopback(self.allow_remote)
            .map_err(SetError::Invalid)?;
        let now = Instant::now();
        let mut st = entry.lock().unwrap_or_else(|p| p.into_inner());
        st.pending = None;
        st.reverts.clear();
        st.default_mode = mode.clone();
        if st.mode != mode {
            let (from, to) = st.switch(mode);
            self.announce(now, &st, from, to, reason);
        }
        Ok(st.status(now))
    }

    /// Answer `name` with `mode` to the queries that arrive on `view`'s address
    /// ([`crate::DnsConfig::views`]), or, with `None`, with the name's mode again: a GSLB that
    /// answers each resolver (each site) its own members. Like [`Engine::serve`], a configured
    /// answer, not an injection. View 0 is the main address, whose answer is the name's own:
    /// set it with [`Engine::serve`].
    pub fn serve_view(
        &self,
        name: &str,
        view: u16,
        mode: Option<DnsMode>,
    ) -> Result<NameStatus, SetError> {
        let key = crate::zone::normalize_name(name).map_err(SetError::Invalid)?;
        let entry = self
            .entry(&key)
            .ok_or_else(|| SetError::UnknownName(format!("unknown name `{key}`")))?;
        if view == 0 {
            return Err(SetError::Invalid(
                "view 0 is the main address: its answer is the name's own (serve)".into(),
            ));
        }
        let bound = self.views.load(std::sync::atomic::Ordering::Relaxed);
        if view > bound {
            return Err(SetError::Invalid(format!(
                "view {view} is not served: this authority has {bound} view(s) (--view ADDR:PORT)"
            )));
        }
        let mut st = entry.lock().unwrap_or_else(|p| p.into_inner());
        match mode {
            Some(mode) => {
                mode.check_loopback(self.allow_remote)
                    .map_err(SetError::Invalid)?;
                let mode_str: Arc<str> = Arc::from(mode.to_string());
                let mode_id = st.mode_index(&mode_str);
                st.views.insert(
                    view,
                    ViewMode {
                        mode,
                        mode_str,
                        mode_id,
                    },
                );
            }
            None => {
                st.views.remove(&view);
            }
        }
        Ok(st.status(Instant::now()))
    }

    fn apply(
        &self,
        st: &mut NameState,
        spec: &ModeSpec,
        for_: Option<Duration>,
        now: Instant,
        reason: &str,
    ) {
        let to = st.resolve(spec);
        match for_ {
            Some(d) => {
                let back = st.mode.clone();
                st.reverts.push((now + d, back));
            }
            None => st.reverts.clear(),
        }
        let (from, to) = st.switch(to);
        self.announce(now, st, from, to, reason);
    }

    /// The mode in force for `name` (after due reverts).
    pub fn mode(&self, name: &str) -> Option<DnsMode> {
        let e = self.entry(&crate::zone::normalize_name(name).ok()?)?;
        let mut st = e.lock().unwrap_or_else(|p| p.into_inner());
        self.settle(&mut st, Instant::now());
        Some(st.mode.clone())
    }

    /// One name's status.
    pub fn status(&self, name: &str) -> Option<NameStatus> {
        let e = self.entry(&crate::zone::normalize_name(name).ok()?)?;
        let now = Instant::now();
        let mut st = e.lock().unwrap_or_else(|p| p.into_inner());
        self.settle(&mut st, now);
        Some(st.status(now))
    }

    /// Every name's status, sorted by name.
    pub fn list(&self) -> Vec<NameStatus> {
        let now = Instant::now();
        let entries: Vec<_> = {
            let n = self.names.read().unwrap_or_else(|p| p.into_inner());
            n.values().cloned().collect()
        };
        let mut out: Vec<NameStatus> = entries
            .iter()
            .map(|e| {
                let mut st = e.lock().unwrap_or_else(|p| p.into_inner());
                self.settle(&mut st, now);
                st.status(now)
            })
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// Injection hits over all names: queries answered under a non-default mode.
    pub fn hits(&self) -> u64 {
        self.list().iter().map(|s| s.hits).sum()
    }

    /// Malformed packets: (dropped silently, answered FORMERR).
    pub fn malformed(&self) -> (u64, u64) {
        (
            self.stats.malformed_dropped.load(Ordering::Relaxed),
            self.stats.formerr.load(Ordering::Relaxed),
        )
    }

    /// Count a datagram too large to read whole (dropped as malformed).
    pub(crate) fn count_oversized(&self) {
        self.stats.malformed_dropped.fetch_add(1, Ordering::Relaxed);
    }

    fn wants_events(&self) -> bool {
        self.sinks.events.receiver_count() > 0
            || self.sinks.log.read().map(|l| l.is_some()).unwrap_or(false)
    }

    /// Hand events to the subscribers and the query log (one channel message per batch, so a
    /// busy UDP loop wakes the log writer once per `recvmmsg` batch, not once per query).
    pub(crate) fn publish(&self, events: &mut Vec<QueryEvent>) {
        if events.is_empty() {
            return;
        }
        if self.sinks.events.receiver_count() > 0 {
            for ev in events.iter() {
                let _ = self.sinks.events.send(ev.clone());
            }
        }
        match self
            .sinks
            .log
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
        {
            // Blocking when the writer is far behind: back-pressure beats losing evidence.
            Some(tx) => {
                let _ = tx.send(std::mem::take(events));
            }
            None => events.clear(),
        }
    }

    /// Handle one DNS message from `client`. Never panics on any input.
    pub fn handle(&self, packet: &[u8], client: SocketAddr, transport: Transport) -> Reply {
        self.handle_view(packet, client, transport, 0)
    }

    /// [`Engine::handle`] for a query that arrived on `view`'s address (0: the main one).
    pub fn handle_view(
        &self,
        packet: &[u8],
        client: SocketAddr,
        transport: Transport,
        view: u16,
    ) -> Reply {
        let mut events = Vec::new();
        let reply = self.handle_into(packet, client, (transport, view), &mut events);
        self.publish(&mut events);
        reply
    }

    /// [`Engine::handle`], collecting the query events in `events` for a later
    /// [`Engine::publish`].
    pub(crate) fn handle_into(
        &self,
        packet: &[u8],
        client: SocketAddr,
        (transport, view): (Transport, u16),
        events: &mut Vec<QueryEvent>,
    ) -> Reply {
        let arrived = Instant::now();
        let req = match self.decode(packet, client, transport, arrived, events) {
            Ok(m) => m,
            Err(reply) => return reply,
        };
        let query = &req.queries[0];
        let qtype = query.query_type();
        let qname = lower_name(query.name());
        let entry = if query.query_class() == DNSClass::IN {
            self.entry(&qname)
        } else {
            None
        };

        let want_events = self.wants_events();
        let (plan, delay, ttl, mode_str, injected, entry_guard) = match &entry {
            Some(e) => {
                let mut st = e.lock().unwrap_or_else(|p| p.into_inner());
                self.settle(&mut st, arrived);
                if let Some((spec, for_)) = st.pending.take() {
                    self.apply(&mut st, &spec, for_, arrived, "aligned");
                }
                let mut delay = Duration::ZERO;
                // A view's own answer is configured, never an injection.
                let (mode, mode_str, injected) = match st.views.get(&view) {
                    Some(v) => (v.mode.clone(), v.mode_str.clone(), false),
                    None => (st.mode.clone(), st.mode_str.clone(), st.injected()),
                };
                let plan = plan_for(&mode, &mut st, qtype, transport, &mut delay);
                st.queries += 1;
                if injected {
                    st.hits += 1;
                }
                (plan, delay, st.ttl, mode_str, injected, Some(st))
            }
            None => {
                let rcode = if query.query_class() != DNSClass::IN {
                    ResponseCode::Refused
                } else {
                    match self.unknown {
                        Unknown::Nxdomain => ResponseCode::NXDomain,
                        Unknown::Refused => ResponseCode::Refused,
                    }
                };
                let plan = Plan::Records {
                    rcode,
                    v4: Vec::new(),
                    v6: Vec::new(),
                };
                (plan, Duration::ZERO, 0, Arc::from("unknown"), false, None)
            }
        };

        let Encoded {
            bytes,
            rcode,
            answers,
            truncated,
        } = encode(&req, plan, ttl, transport);

        // Bookkeeping under the name's lock: counters, `changed`.
        let mut changed = false;
        match entry_guard {
            Some(mut st) => {
                let mode_id = st.views.get(&view).map_or(st.mode_id, |v| v.mode_id);
                let c = st
                    .counters
                    .entry((qtype_label(qtype), rcode, mode_id, transport))
                    .or_insert(0);
                *c += 1;
                // `changed` is only visible in events: without a log or a subscriber, skip it.
                if want_events && !truncated && rcode != "DROPPED" {
                    let mut sorted = answers.clone();
                    sorted.sort_unstable();
                    let given = Given {
                        rcode,
                        answers: sorted,
                    };
                    if st.last.len() >= MAX_CLIENTS_PER_NAME {
                        st.last.clear();
                    }
                    match st
                        .last
                        .insert((client.ip(), u16::from(qtype)), given.clone())
                    {
                        Some(prev) => changed = prev != given,
                        None => changed = false,
                    }
                }
            }
            None => {
                let mut u = self.stats.unknown.lock().unwrap_or_else(|p| p.into_inner());
                *u.entry((qtype_label(qtype), rcode, transport)).or_insert(0) += 1;
            }
        }

        if want_events {
            events.push(QueryEvent {
                t_us: self.t_us(arrived),
                client,
                qname,
                qtype: qtype_str(qtype),
                transport,
                id: req.metadata.id,
                mode: mode_str.to_string(),
                rcode: rcode.to_string(),
                answers,
                ttl,
                changed,
                injected,
                truncated,
                view: (view > 0).then_some(view),
                ..QueryEvent::default()
            });
        }
        Reply { bytes, delay }
    }

    /// Decode one packet into a query message, or the reply it gets instead: none for what is
    /// not a query at all (too short, a response), FORMERR or NOTIMP for a malformed or
    /// unsupported one.
    fn decode(
        &self,
        packet: &[u8],
        client: SocketAddr,
        transport: Transport,
        arrived: Instant,
        events: &mut Vec<QueryEvent>,
    ) -> Result<Message, Reply> {
        if packet.len() < 12 {
            self.stats.malformed_dropped.fetch_add(1, Ordering::Relaxed);
            return Err(Reply::none());
        }
        let mut dec = BinDecoder::new(packet);
        let (header, counts) = match Header::read(&mut dec) {
            Ok(h) => (h.metadata, h.counts),
            Err(_) => {
                self.stats.malformed_dropped.fetch_add(1, Ordering::Relaxed);
                return Err(Reply::none());
            }
        };
        // Never answer a response: two servers would ping-pong forever.
        if header.message_type == MessageType::Response {
            self.stats.malformed_dropped.fetch_add(1, Ordering::Relaxed);
            return Err(Reply::none());
        }
        // The common query (one question, nothing else) is decoded question-only; anything with
        // more sections (EDNS, …) goes through the full hickory decoder.
        let simple = counts.queries == 1
            && counts.answers == 0
            && counts.authorities == 0
            && counts.additionals == 0;
        let decoded = if simple {
            Query::read(&mut dec)
                .map(|q| {
                    let mut m = Message::new(header.id, header.message_type, header.op_code);
                    m.metadata = header;
                    m.queries.push(q);
                    m
                })
                .map_err(|_| ())
        } else {
            Message::from_vec(packet).map_err(|_| ())
        };
        let reply = |code, events: &mut Vec<QueryEvent>| {
            Err(self.error_reply(&header, code, client, transport, arrived, events))
        };
        let Ok(req) = decoded else {
            self.stats.formerr.fetch_add(1, Ordering::Relaxed);
            return reply(ResponseCode::FormErr, events);
        };
        if req.metadata.op_code != OpCode::Query {
            self.count_other("NOTIMP", transport);
            return reply(ResponseCode::NotImp, events);
        }
        if req.queries.len() != 1 {
            self.stats.formerr.fetch_add(1, Ordering::Relaxed);
            return reply(ResponseCode::FormErr, events);
        }
        Ok(req)
    }

    fn count_other(&self, rcode: &'static str, transport: Transport) {
        let mut o = self.stats.other.lock().unwrap_or_else(|p| p.into_inner());
        *o.entry((rcode, transport)).or_insert(0) += 1;
    }

    fn error_reply(
        &self,
        header: &Metadata,
        rcode: ResponseCode,
        client: SocketAddr,
        transport: Transport,
        arrived: Instant,
        events: &mut Vec<QueryEvent>,
    ) -> Reply {
        let mut resp = Message::new(header.id, MessageType::Response, header.op_code);
        resp.metadata = Metadata::response_from_request(header);
        resp.metadata.response_code = rcode;
        if self.wants_events() {
            events.push(QueryEvent {
                t_us: self.t_us(arrived),
                client,
                qname: String::new(),
                qtype: String::new(),
                transport,
                id: header.id,
                mode: String::new(),
                rcode: rcode_str(rcode).into(),
                answers: Vec::new(),
                ttl: 0,
                changed: false,
                injected: false,
                truncated: false,
                ..QueryEvent::default()
            });
        }
        Reply {
            bytes: resp.to_vec().ok(),
            delay: Duration::ZERO,
        }
    }

    /// Prometheus text exposition of the counters.
    pub fn metrics(&self) -> String {
        let mut m = Exposition::default();
        let q = "resolvelab_dns_queries_total";
        m.family(
            q,
            "counter",
            Some("DNS queries by name, qtype, rcode, mode and transport."),
        );
        let entries: Vec<_> = {
            let n = self.names.read().unwrap_or_else(|p| p.into_inner());
            let mut v: Vec<_> = n.iter().map(|(k, e)| (k.clone(), e.clone())).collect();
            v.sort_by(|a, b| a.0.cmp(&b.0));
            v
        };
        let mut hits = Vec::new();
        let mut injected = Vec::new();
        for (name, e) in &entries {
            let st = e.lock().unwrap_or_else(|p| p.into_inner());
            let mut rows: Vec<_> = st.counters.iter().collect();
            rows.sort_by(|a, b| a.0.cmp(b.0));
            for ((qt, rc, mode, tr), n) in rows {
                let mode = st.modes_seen.get(*mode as usize).map_or("", |m| &**m);
                let (qt, rc) = (qt.to_string(), rc.to_string());
                let l = [
                    ("name", name.as_str()),
                    ("qtype", &qt),
                    ("rcode", &rc),
                    ("mode", mode),
                    ("transport", tr.as_str()),
                ];
                m.sample(q, &l, n);
            }
            hits.push((name.clone(), st.hits));
            injected.push((name.clone(), st.injected(), st.mode_str.clone()));
        }
        {
            let u = self.stats.unknown.lock().unwrap_or_else(|p| p.into_inner());
            let mut rows: Vec<_> = u.iter().collect();
            rows.sort_by(|a, b| a.0.cmp(b.0));
            for ((qt, rc, tr), n) in rows {
                let (qt, rc) = (qt.to_string(), rc.to_string());
                let l = [
                    ("name", ""),
                    ("qtype", qt.as_str()),
                    ("rcode", &rc),
                    ("mode", "unknown"),
                    ("transport", tr.as_str()),
                ];
                m.sample(q, &l, n);
            }
        }
        let h = "resolvelab_dns_injection_hits_total";
        m.family(
            h,
            "counter",
            Some("Queries answered under a non-default (injected) mode."),
        );
        for (name, n) in &hits {
            m.sample(h, &[("name", name)], n);
        }
        let i = "resolvelab_dns_injected";
        m.family(
            i,
            "gauge",
            Some("1 while the name is in a non-default mode."),
        );
        for (name, inj, mode) in &injected {
            m.sample(i, &[("name", name), ("mode", mode)], u8::from(*inj));
        }
        let (dropped, formerr) = self.malformed();
        let mal = "resolvelab_dns_malformed_total";
        m.family(
            mal,
            "counter",
            Some("Malformed packets, by what was done with them."),
        );
        m.sample(mal, &[("action", "dropped")], dropped);
        m.sample(mal, &[("action", "formerr")], formerr);
        {
            let o = self.stats.other.lock().unwrap_or_else(|p| p.into_inner());
            if !o.is_empty() {
                let un = "resolvelab_dns_unsupported_total";
                m.family(
                    un,
                    "counter",
                    Some("Messages with an opcode other than QUERY."),
                );
                let mut rows: Vec<_> = o.iter().collect();
                rows.sort_by(|a, b| a.0.cmp(b.0));
                for ((rc, tr), n) in rows {
                    let rc = rc.to_string();
                    m.sample(un, &[("rcode", rc.as_str()), ("transport", tr.as_str())], n);
                }
            }
        }
        m.finish()
    }
}

/// A reply as it goes on the wire, with what the query log says of it.
struct Encoded {
    bytes: Option<Vec<u8>>,
    rcode: &'static str,
    answers: Vec<IpAddr>,
    truncated: bool,
}

/// The wire form of `plan`'s reply to `req`: records with `ttl`, truncated (TC, no records)
/// when a UDP answer exceeds the client's payload size.
fn encode(req: &Message, plan: Plan, ttl: u32, transport: Transport) -> Encoded {
    let query = &req.queries[0];
    let mut truncated = false;
    let (bytes, rcode, answers) = match plan {
        Plan::Drop => (None, "DROPPED", Vec::new()),
        Plan::Truncated => {
            truncated = true;
            let resp = response_shell(req, ResponseCode::NoError, true);
            (resp.to_vec().ok(), "NOERROR", Vec::new())
        }
        Plan::Records { rcode, v4, v6 } => {
            let mut resp = response_shell(req, rcode, false);
            let mut answers = Vec::with_capacity(v4.len() + v6.len());
            for ip in v4 {
                answers.push(IpAddr::V4(ip));
                resp.add_answer(Record::from_rdata(
                    query.name().clone(),
                    ttl,
                    RData::A(A(ip)),
                ));
            }
            for ip in v6 {
                answers.push(IpAddr::V6(ip));
                resp.add_answer(Record::from_rdata(
                    query.name().clone(),
                    ttl,
                    RData::AAAA(AAAA(ip)),
                ));
            }
            let mut bytes = resp.to_vec().ok();
            if transport == Transport::Udp {
                let limit = req
                    .edns
                    .as_ref()
                    .map(|e| usize::from(e.max_payload()).max(UDP_PLAIN_LIMIT))
                    .unwrap_or(UDP_PLAIN_LIMIT);
                if bytes.as_ref().is_some_and(|b| b.len() > limit) {
                    truncated = true;
                    bytes = response_shell(req, rcode, true).to_vec().ok();
                    answers.clear();
                }
            }
            (bytes, rcode_str(rcode), answers)
        }
    };
    Encoded {
        bytes,
        rcode,
        answers,
        truncated,
    }
}

fn response_shell(req: &Message, rcode: ResponseCode, truncated: bool) -> Message {
    let mut resp = Message::new(req.metadata.id, MessageType::Response, OpCode::Query);
    resp.metadata = Metadata::response_from_request(&req.metadata);
    resp.metadata.authoritative = true;
    resp.metadata.truncation = truncated;
    resp.metadata.response_code = rcode;
    resp.add_queries(req.queries.iter().cloned());
    if req.edns.is_some() {
        let mut e = Edns::new();
        e.set_max_payload(EDNS_PAYLOAD);
        resp.set_edns(e);
    }
    resp
}

fn plan_for(
    mode: &DnsMode,
    st: &mut NameState,
    qtype: RecordType,
    transport: Transport,
    delay: &mut Duration,
) -> Plan {
    let empty = |rcode| Plan::Records {
        rcode,
        v4: Vec::new(),
        v6: Vec::new(),
    };
    let records = |v4: Vec<Ipv4Addr>, st: &NameState| match qtype {
        RecordType::A => Plan::Records {
            rcode: ResponseCode::NoError,
            v4,
            v6: Vec::new(),
        },
        RecordType::AAAA => Plan::Records {
            rcode: ResponseCode::NoError,
            v4: Vec::new(),
            v6: st.aaaa.clone(),
        },
        _ => empty(ResponseCode::NoError),
    };
    match mode {
        DnsMode::Static(v) => records(
            if qtype == RecordType::A {
                v.clone()
            } else {
                Vec::new()
            },
            st,
        ),
        DnsMode::Alternate(v) => {
            if qtype != RecordType::A {
                return records(Vec::new(), st);
            }
            // The rotation advances only on A queries that get an answer.
            let ip = v[st.cursor % v.len()];
            st.cursor = st.cursor.wrapping_add(1);
            records(vec![ip], st)
        }
        DnsMode::Weighted(v) => {
            if qtype != RecordType::A {
                return records(Vec::new(), st);
            }
            let total: u64 = v.iter().map(|(_, w)| u64::from(*w)).sum();
            let mut x = st.rng.random_range(0..total);
            let mut pick = v[0].0;
            for (ip, w) in v {
                if x < u64::from(*w) {
                    pick = *ip;
                    break;
                }
                x -= u64::from(*w);
            }
            records(vec![pick], st)
        }
        DnsMode::Multi { n, base } => {
            if qtype != RecordType::A {
                return records(Vec::new(), st);
            }
            let b = u32::from(*base);
            records((0..*n).map(|i| Ipv4Addr::from(b + i)).collect(), st)
        }
        DnsMode::NxDomain => empty(ResponseCode::NXDomain),
        DnsMode::ServFail => empty(ResponseCode::ServFail),
        DnsMode::Refused => empty(ResponseCode::Refused),
        DnsMode::NoData => empty(ResponseCode::NoError),
        DnsMode::Drop => Plan::Drop,
        DnsMode::Delay { by, inner } => {
            *delay += *by;
            match inner {
                Some(i) => plan_for(i, st, qtype, transport, delay),
                None => empty(ResponseCode::NoError),
            }
        }
        DnsMode::Truncate { inner } => match (transport, inner) {
            (Transport::Udp, _) => Plan::Truncated,
            (Transport::Tcp, Some(i)) => plan_for(i, st, qtype, transport, delay),
            (Transport::Tcp, None) => empty(ResponseCode::NoError),
        },
    }
}
