//! The DNS-vs-proxy balancing model of DOMAIN.md §7: four selection layers kept apart.
//!
//! 1. **DNS answer + TTL cache** — the cache is refreshed only when it has expired, from whatever
//!    the authority answers *at that instant*; DNS round-robin walks the cached list with one cursor.
//! 2. **Proxy weighted round-robin** — weight slots (A×5, B, C) cycled by a cursor, independent of DNS.
//!    `proxy-rr` is the same rule under another name (the seed keeps it weighted on purpose).
//! 3. **Proxy least-connections** — lowest `active / weight`, ties broken by backend id.
//! 4. **Connection reuse** — a request reuses a connection only to the same address, while
//!    `reusableUntil > t` and `activeStreams < maxStreams` (HTTP/2-style stream capacity).
//!
//! Time is abstract integer ticks. Completions at the same instant as an arrival are released
//! before that arrival is handled; `activeBefore` is the selected backend's active count before the
//! request is added.
//!
//! ```
//! use resolvelab_sim::balance::{golden_input, simulate, Strategy};
//! let rows = simulate(&golden_input(), Strategy::Dns).unwrap();
//! assert_eq!(rows[0].selected, "A");
//! assert_eq!(rows[0].connection, "conn-1");
//! assert!(rows[0].reused);
//! assert_eq!(rows[11].selected, "C"); // the first [B,C] answer is used at t=10
//! assert!(!rows[11].reused);
//! ```

mod render;

pub use render::{render_html, render_table};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::path::Path;
use std::str::FromStr;

/// A selection strategy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// Round-robin over the cached DNS answer (no health filtering).
    Dns,
    /// Proxy weighted round-robin over healthy backends.
    ProxyWeighted,
    /// Same slot rule as [`Strategy::ProxyWeighted`] (the seed's `proxy-rr` is weighted too).
    ProxyRr,
    /// Proxy least-connections by `active / weight`, ties to the backend id.
    ProxyLeast,
}

impl Strategy {
    /// Every strategy, in documentation order.
    pub const ALL: [Strategy; 4] = [
        Strategy::Dns,
        Strategy::ProxyWeighted,
        Strategy::ProxyRr,
        Strategy::ProxyLeast,
    ];

    /// The CLI / JSON name.
    pub fn name(self) -> &'static str {
        match self {
            Strategy::Dns => "dns",
            Strategy::ProxyWeighted => "proxy-weighted",
            Strategy::ProxyRr => "proxy-rr",
            Strategy::ProxyLeast => "proxy-least",
        }
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Strategy {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        Strategy::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .with_context(|| {
                format!(
                    "unknown strategy {s:?}: use one of dns, proxy-weighted, proxy-rr, proxy-least"
                )
            })
    }
}

/// One request: when it arrives and how long it keeps its stream busy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RequestSpec {
    /// Arrival time (ticks).
    pub arrival: i64,
    /// Service time (ticks); the request is done at `arrival + service`.
    pub service: i64,
}

/// What the DNS authority answers from `at` on (until the next entry).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DnsAnswer {
    /// From this time on, the authority answers `addresses`.
    pub at: i64,
    /// Backend ids in answer order.
    pub addresses: Vec<String>,
    /// TTL of this answer (ticks, > 0).
    pub ttl: i64,
}

/// A backend behind both the DNS name and the proxy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Backend {
    /// Backend id (also its address in DNS answers).
    pub id: String,
    /// Proxy weight (≥ 0; 0 takes no proxy traffic).
    #[serde(default = "one")]
    pub weight: i64,
    /// Health as the proxy sees it (DNS never looks at it).
    #[serde(default = "yes")]
    pub healthy: bool,
}

fn one() -> i64 {
    1
}
fn yes() -> bool {
    true
}

/// A connection that exists before the first request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConnectionSpec {
    /// Connection id; generated ids (`conn-N`) skip every supplied id.
    pub id: String,
    /// Backend id the connection goes to.
    pub address: String,
    /// The connection may carry new requests while `reusableUntil > t`.
    pub reusable_until: i64,
}

/// The model's whole input (JSON or TOML, camelCase keys).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BalanceInput {
    /// Optional default strategy (the CLI's `--strategy` wins).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<String>,
    /// Requests in arrival order.
    pub requests: Vec<RequestSpec>,
    /// Authority answers over time, in time order.
    pub dns: Vec<DnsAnswer>,
    /// Backends with weight and health.
    pub backends: Vec<Backend>,
    /// Pre-existing connections.
    #[serde(default)]
    pub connections: Vec<ConnectionSpec>,
    /// Lifetime of a newly opened connection (ticks, > 0): reusable until `opened + lifetime`.
    pub connection_lifetime: i64,
    /// Concurrent streams per connection (≥ 1).
    pub max_streams: i64,
}

impl BalanceInput {
    /// Read JSON (`.json`) or TOML (`.toml`) input; any other extension is tried as JSON.
    pub fn from_path(path: &Path) -> Result<BalanceInput> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let is_toml = path.extension().and_then(|e| e.to_str()) == Some("toml");
        let input: BalanceInput = if is_toml {
            toml::from_str(&text).map_err(|e| {
                anyhow::anyhow!(
                    "{}: {} (see docs/balance.md for the input format)",
                    path.display(),
                    e.to_string().replace('\n', " ").trim()
                )
            })?
        } else {
            serde_json::from_str(&text).map_err(|e| {
                anyhow::anyhow!(
                    "{}: {e} (see docs/balance.md for the input format)",
                    path.display()
                )
            })?
        };
        input
            .validate()
            .with_context(|| format!("{}", path.display()))?;
        Ok(input)
    }

    /// Check everything that would make a run meaningless, before running.
    pub fn validate(&self) -> Result<()> {
        if let Some(s) = &self.strategy {
            Strategy::from_str(s).context("strategy")?;
        }
        if self.max_streams < 1 {
            bail!(
                "maxStreams = {}: stream capacity must be at least 1",
                self.max_streams
            );
        }
        if self.connection_lifetime <= 0 {
            bail!(
                "connectionLifetime = {}: must be positive",
                self.connection_lifetime
            );
        }
        let mut ids = HashSet::new();
        for (i, b) in self.backends.iter().enumerate() {
            if b.id.is_empty() {
                bail!("backends[{i}].id is empty");
            }
            if !ids.insert(b.id.as_str()) {
                bail!(
                    "backends[{i}].id {:?} is a duplicate backend id: give every backend its own id",
                    b.id
                );
            }
            if b.weight < 0 {
                bail!(
                    "backends[{i}] ({}) weight = {}: weight must be ≥ 0",
                    b.id,
                    b.weight
                );
            }
        }
        if self.backends.is_empty() {
            bail!("backends is empty: define at least one backend");
        }
        if self.dns.is_empty() {
            bail!("dns is empty: give at least one authority answer (at, addresses, ttl)");
        }
        for (i, a) in self.dns.iter().enumerate() {
            if a.ttl <= 0 {
                bail!("dns[{i}].ttl = {}: TTL must be positive", a.ttl);
            }
            if i > 0 && a.at <= self.dns[i - 1].at {
                bail!(
                    "dns[{i}].at = {} is not after dns[{}].at = {}: answers must be in time order",
                    a.at,
                    i - 1,
                    self.dns[i - 1].at
                );
            }
            if a.addresses.is_empty() {
                bail!(
                    "dns[{i}].addresses is empty: an answer needs at least one address (model NXDOMAIN with the nginx simulator instead)"
                );
            }
            for addr in &a.addresses {
                if !ids.contains(addr.as_str()) {
                    bail!("dns[{i}] answers {addr:?}, which is not a backend id");
                }
            }
        }
        let mut last = i64::MIN;
        for (i, r) in self.requests.iter().enumerate() {
            if r.arrival < last {
                bail!(
                    "requests[{i}].arrival = {} is before requests[{}].arrival = {last}: requests must be in time order",
                    r.arrival,
                    i - 1
                );
            }
            if r.service < 0 {
                bail!("requests[{i}].service = {}: must be ≥ 0", r.service);
            }
            last = r.arrival;
        }
        if let Some(first) = self.requests.first()
            && first.arrival < self.dns[0].at
        {
            bail!(
                "requests[0].arrival = {} is before the first DNS answer (dns[0].at = {}): the authority must answer from the first arrival on",
                first.arrival,
                self.dns[0].at
            );
        }
        let mut conn_ids = HashSet::new();
        for (i, c) in self.connections.iter().enumerate() {
            if !conn_ids.insert(c.id.as_str()) {
                bail!(
                    "connections[{i}].id {:?} is a duplicate connection id: give every connection its own id",
                    c.id
                );
            }
            if !ids.contains(c.address.as_str()) {
                bail!(
                    "connections[{i}] ({}) goes to {:?}, which is not a backend id",
                    c.id,
                    c.address
                );
            }
        }
        Ok(())
    }
}

/// One row of the trace: what DNS returned and where the request really went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestTrace {
    /// `req-1`, `req-2`, …
    pub id: String,
    /// Arrival time.
    pub arrival: i64,
    /// Service time.
    pub service: i64,
    /// The (cached) DNS answer at arrival — an observation, not a routing decision.
    pub dns_returned: Vec<String>,
    /// When that cached answer expires.
    pub dns_cache_expires_at: i64,
    /// The backend the request reached.
    pub selected: String,
    /// Whether an existing connection carried it.
    pub reused: bool,
    /// The connection id.
    pub connection: String,
    /// Active requests on `selected` before this one was added.
    pub active_before: i64,
    /// `arrival + service`.
    pub done_at: i64,
}

/// The input of the golden trace of DOMAIN.md §7.
pub fn golden_input() -> BalanceInput {
    let services = [8, 1, 7, 2, 6, 2, 9, 1, 5, 3, 4, 2];
    BalanceInput {
        strategy: None,
        requests: services
            .iter()
            .enumerate()
            .map(|(i, &s)| RequestSpec {
                arrival: i as i64,
                service: s,
            })
            .collect(),
        dns: vec![
            DnsAnswer {
                at: 0,
                addresses: vec!["A".into(), "B".into()],
                ttl: 5,
            },
            DnsAnswer {
                at: 7,
                addresses: vec!["B".into(), "C".into()],
                ttl: 5,
            },
        ],
        backends: vec![
            Backend {
                id: "A".into(),
                weight: 5,
                healthy: true,
            },
            Backend {
                id: "B".into(),
                weight: 1,
                healthy: true,
            },
            Backend {
                id: "C".into(),
                weight: 1,
                healthy: true,
            },
        ],
        connections: vec![
            ConnectionSpec {
                id: "conn-1".into(),
                address: "A".into(),
                reusable_until: 20,
            },
            ConnectionSpec {
                id: "conn-2".into(),
                address: "B".into(),
                reusable_until: 20,
            },
        ],
        connection_lifetime: 20,
        max_streams: 2,
    }
}

/// A connection during the run.
struct Conn {
    id: String,
    address: String,
    reusable_until: i64,
    active_streams: i64,
}

/// Run the model. Validates first; the DNS strategy fails with
/// `DNS returned unhealthy backend X` when the cached answer holds an unhealthy backend.
pub fn simulate(input: &BalanceInput, strategy: Strategy) -> Result<Vec<RequestTrace>> {
    input.validate()?;
    let backend = |id: &str| {
        input
            .backends
            .iter()
            .find(|b| b.id == id)
            .expect("validated: answers and connections name known backends")
    };
    let mut conns: Vec<Conn> = input
        .connections
        .iter()
        .map(|c| Conn {
            id: c.id.clone(),
            address: c.address.clone(),
            reusable_until: c.reusable_until,
            active_streams: 0,
        })
        .collect();
    let mut used_ids: HashSet<String> = conns.iter().map(|c| c.id.clone()).collect();
    let mut next_conn = 1u64;
    let mut active: BTreeMap<&str, i64> =
        input.backends.iter().map(|b| (b.id.as_str(), 0)).collect();
    // (done_at, backend, connection index) of requests still holding a stream.
    let mut in_flight: Vec<(i64, usize, usize)> = Vec::new();
    let mut cache: Option<(Vec<String>, i64)> = None;
    let mut dns_cursor = 0usize;
    let mut weighted_cursor = 0usize;
    let slots: Vec<usize> = input
        .backends
        .iter()
        .enumerate()
        .filter(|(_, b)| b.healthy && b.weight > 0)
        .flat_map(|(i, b)| std::iter::repeat_n(i, b.weight as usize))
        .collect();
    let mut rows = Vec::with_capacity(input.requests.len());

    for (n, req) in input.requests.iter().enumerate() {
        let t = req.arrival;
        let rid = format!("req-{}", n + 1);
        // Completions at the same instant free their streams before this arrival.
        in_flight.retain(|&(done, b, c)| {
            if done <= t {
                *active
                    .get_mut(input.backends[b].id.as_str())
                    .expect("known") -= 1;
                conns[c].active_streams -= 1;
                false
            } else {
                true
            }
        });
        let expired = match &cache {
            None => true,
            Some((_, exp)) => t >= *exp,
        };
        if expired {
            let answer = input
                .dns
                .iter()
                .rev()
                .find(|a| a.at <= t)
                .expect("validated: dns[0].at <= first arrival");
            cache = Some((answer.addresses.clone(), t + answer.ttl));
        }
        let (answer, expires_at) = cache.clone().expect("filled above");

        let selected: usize = match strategy {
            Strategy::Dns => {
                if let Some(bad) = answer.iter().find(|a| !backend(a).healthy) {
                    bail!(
                        "{rid} at t={t}: DNS returned unhealthy backend {bad} (cached answer [{}]) — DNS answers are address data, not health checks; a proxy strategy filters it",
                        answer.join(",")
                    );
                }
                let addr = &answer[dns_cursor % answer.len()];
                dns_cursor += 1;
                input
                    .backends
                    .iter()
                    .position(|b| &b.id == addr)
                    .expect("known")
            }
            Strategy::ProxyWeighted | Strategy::ProxyRr => {
                if slots.is_empty() {
                    bail!(
                        "{rid} at t={t}: no healthy backend with weight > 0 for the proxy to select"
                    );
                }
                let b = slots[weighted_cursor % slots.len()];
                weighted_cursor += 1;
                b
            }
            Strategy::ProxyLeast => least_loaded(input, &active).with_context(|| {
                format!(
                    "{rid} at t={t}: no healthy backend with weight > 0 for the proxy to select"
                )
            })?,
        };
        let sel_id = input.backends[selected].id.clone();
        let active_before = active[sel_id.as_str()];
        *active.get_mut(sel_id.as_str()).expect("known") += 1;

        let (ci, reused) =
            connection_for(&mut conns, &mut used_ids, &mut next_conn, input, &sel_id, t);
        conns[ci].active_streams += 1;
        let done_at = t + req.service;
        in_flight.push((done_at, selected, ci));
        rows.push(RequestTrace {
            id: rid,
            arrival: t,
            service: req.service,
            dns_returned: answer,
            dns_cache_expires_at: expires_at,
            selected: sel_id,
            reused,
            connection: conns[ci].id.clone(),
            active_before,
            done_at,
        });
    }
    Ok(rows)
}

/// The healthy backend with the fewest active streams per weight (ties: the smaller id).
fn least_loaded(input: &BalanceInput, active: &BTreeMap<&str, i64>) -> Option<usize> {
    let mut best: Option<usize> = None;
    for (i, b) in input.backends.iter().enumerate() {
        if !b.healthy || b.weight <= 0 {
            continue;
        }
        best = Some(match best {
            None => i,
            Some(j) => {
                let bj = &input.backends[j];
                // Compare active/weight exactly: a_i * w_j vs a_j * w_i.
                let lhs = active[b.id.as_str()] * bj.weight;
                let rhs = active[bj.id.as_str()] * b.weight;
                if lhs < rhs || (lhs == rhs && b.id < bj.id) {
                    i
                } else {
                    j
                }
            }
        });
    }
    best
}

/// A connection to `backend` with a free stream that is still reusable at `t`, else a new one
/// (`conn-N`, the first N no supplied connection uses): its index and whether it was reused.
fn connection_for(
    conns: &mut Vec<Conn>,
    used_ids: &mut HashSet<String>,
    next_conn: &mut u64,
    input: &BalanceInput,
    backend: &str,
    t: i64,
) -> (usize, bool) {
    let reuse = conns.iter().position(|c| {
        c.address == backend && c.reusable_until > t && c.active_streams < input.max_streams
    });
    if let Some(ci) = reuse {
        return (ci, true);
    }
    let id = loop {
        let candidate = format!("conn-{next_conn}");
        *next_conn += 1;
        if !used_ids.contains(&candidate) {
            break candidate;
        }
    };
    used_ids.insert(id.clone());
    conns.push(Conn {
        id,
        address: backend.to_string(),
        reusable_until: t + input.connection_lifetime,
        active_streams: 0,
    });
    (conns.len() - 1, false)
}
