//! The simulator's input: a plain, serde-readable description of one nginx upstream, its DNS,
//! its faults and the load. Durations are written like everywhere else in resolvelab
//! (`"6s"`, `"250ms"`, `"0ms..50ms"`) and held as microseconds.

use anyhow::{Result, bail};
use resolvelab_core::spec::fault::{BackendFault, BackendFaultKind};
use resolvelab_core::spec::latency::Latency as LabLatency;
use resolvelab_core::spec::nginx::ServerParams;
use resolvelab_core::spec::toxic::{ToxicKind, ToxicSpec};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::net::Ipv6Addr;

/// A duration in microseconds, read from `"6s"`-style strings (or a bare integer of µs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Us(pub i64);

impl Us {
    /// From seconds.
    pub const fn s(s: i64) -> Us {
        Us(s * 1_000_000)
    }
    /// From milliseconds.
    pub const fn ms(ms: i64) -> Us {
        Us(ms * 1_000)
    }
}

impl Serialize for Us {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let d = std::time::Duration::from_micros(self.0.unsigned_abs());
        let sign = if self.0 < 0 { "-" } else { "" };
        s.serialize_str(&format!("{sign}{}", resolvelab_core::dur::format(d)))
    }
}

impl<'de> Deserialize<'de> for Us {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Us, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Int(i64),
            Str(String),
        }
        match Raw::deserialize(d)? {
            Raw::Int(v) => Ok(Us(v)),
            Raw::Str(s) => {
                // Timeline offsets may be negative (before the load starts).
                let (neg, body) = match s.trim().strip_prefix('-') {
                    Some(rest) => (true, rest.to_string()),
                    None => (false, s),
                };
                let us = resolvelab_core::dur::parse(&body)
                    .map_err(serde::de::Error::custom)?
                    .as_micros() as i64;
                Ok(Us(if neg { -us } else { us }))
            }
        }
    }
}

/// One `server` line of the upstream block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerLine {
    /// A DNS name or an IPv4 literal. A name without `resolve` is resolved once, when nginx
    /// starts and at each reload (`SimConfig::reloads`), like `getaddrinfo` at config time.
    pub host: String,
    /// Port.
    #[serde(default = "d_port")]
    pub port: u16,
    /// `resolve`: re-resolve `host` and swap the peers (needs a zone).
    #[serde(default)]
    pub resolve: bool,
    /// The line stands for a variable `proxy_pass` (`set $b NAME; proxy_pass http://$b:PORT;`)
    /// with a `resolver`: `host` is resolved per request through the resolver's cache, which
    /// keeps an answer (and an NXDOMAIN) until the second after `valid`, and nothing of a
    /// SERVFAIL, REFUSED or timeout, whose request fails with 502.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub per_request: bool,
    /// `max_fails=` (nginx default 1; 0 disables the accounting).
    #[serde(default = "d_max_fails")]
    pub max_fails: u32,
    /// `fail_timeout=` (nginx default 10 s).
    #[serde(default = "d_fail_timeout")]
    pub fail_timeout: Us,
    /// `backup`.
    #[serde(default)]
    pub backup: bool,
    /// `weight=`.
    #[serde(default = "d_weight")]
    pub weight: u32,
}

fn d_port() -> u16 {
    8080
}
fn d_max_fails() -> u32 {
    ServerParams::DEFAULT_MAX_FAILS
}
fn d_fail_timeout() -> Us {
    Us::ms(ServerParams::DEFAULT_FAIL_TIMEOUT_MS as i64)
}
fn d_weight() -> u32 {
    ServerParams::DEFAULT_WEIGHT
}

impl ServerLine {
    /// `server HOST:PORT resolve;` with nginx's defaults.
    pub fn resolve(host: &str, port: u16) -> ServerLine {
        ServerLine {
            host: host.into(),
            port,
            resolve: true,
            per_request: false,
            max_fails: ServerParams::DEFAULT_MAX_FAILS,
            fail_timeout: d_fail_timeout(),
            backup: false,
            weight: ServerParams::DEFAULT_WEIGHT,
        }
    }
    /// `server IP:PORT;` with nginx's defaults.
    pub fn fixed(ip: &str, port: u16) -> ServerLine {
        ServerLine {
            resolve: false,
            ..ServerLine::resolve(ip, port)
        }
    }
    /// `server HOST:PORT PARAMS;`: what the line leaves out is nginx's default (`per_request`
    /// is not a parameter of the line: false).
    pub fn from_params(host: &str, port: u16, p: &ServerParams) -> ServerLine {
        ServerLine {
            host: host.into(),
            port,
            resolve: p.resolve,
            per_request: false,
            max_fails: p.max_fails_or_default(),
            fail_timeout: Us::ms(p.fail_timeout_ms_or_default() as i64),
            backup: p.backup,
            weight: p.weight_or_default(),
        }
    }
}

/// What the authority answers for a name: the lab's own mode type, so the model reads the very
/// spellings the authority does. The model answers instantly: `delay`/`truncate` wrappers answer
/// their inner mode.
pub use resolvelab_core::spec::dns::DnsMode;
use resolvelab_core::spec::dns::DnsSetting;

/// From `at` on, `name` is answered in `mode`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DnsPhase {
    /// Offset from the load start (negative: before it).
    pub at: Us,
    /// The name (must be a `resolve` server's host).
    pub name: String,
    /// The mode.
    pub mode: DnsMode,
    /// AAAA records answered alongside (peers only with `ipv6 = true`, nginx's default).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aaaa: Vec<Ipv6Addr>,
}

impl DnsPhase {
    /// A phase from the lab DNS's spec syntax: `static:127.0.0.20`, `alternate:…`, or with
    /// AAAA records `static:127.0.0.20;aaaa=::1[,::2]`.
    pub fn lab(at: Us, name: &str, spec: &str) -> Result<DnsPhase> {
        let setting: DnsSetting = spec
            .parse()
            .map_err(|e| anyhow::anyhow!("DNS mode {spec:?}: {e}"))?;
        Ok(DnsPhase::new(at, name, setting))
    }

    /// A phase from a setting already read (its TTL is the lab authority's; the model uses
    /// nginx's `valid`).
    pub fn new(at: Us, name: &str, setting: DnsSetting) -> DnsPhase {
        DnsPhase {
            at,
            name: name.into(),
            mode: setting.mode,
            aaaa: setting.aaaa,
        }
    }

    /// The mode as the model answers it (`mode` in dns.jsonl; wrappers peeled).
    pub fn spec(&self) -> String {
        let mode = answered_text(self.mode.answered());
        if self.aaaa.is_empty() {
            mode
        } else {
            let v: Vec<String> = self.aaaa.iter().map(|a| a.to_string()).collect();
            format!("{mode};aaaa={}", v.join(","))
        }
    }
}

/// A mode's text as the model has always written it: `multi` with its base.
fn answered_text(m: &DnsMode) -> String {
    match m {
        DnsMode::Multi { n, base } => format!("multi:{n}@{base}"),
        other => other.to_string(),
    }
}

/// A fault kind, acting on upstream tries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum FaultKind {
    /// Nothing listens: new connections get `connect() failed (111: Connection refused)`; the
    /// backend's idle keep-alive connections are gone.
    Refuse,
    /// New connections are reset as the backend accepts them (the lab backend's `rst`):
    /// `recv() failed (104: Connection reset by peer)`. Tries on cached keep-alive connections,
    /// accepted before, are not touched.
    Rst {
        /// Probability per new connection.
        #[serde(default = "d_one")]
        p: f64,
    },
    /// The keep-alive reclaim race as the lab backend plays it (`reclaim:toxicity=P,delay=A..B`):
    /// after a response, with probability `p`, the backend closes that connection after a delay
    /// uniform in `delay_min..delay_max`. A request nginx sends on it from its keep-alive cache
    /// in that gap is lost and fails when the close arrives (`upstream prematurely closed
    /// connection while reading response header`); if none comes, the idle connection just
    /// leaves nginx's cache. How often a close catches a request therefore depends on how soon
    /// the connection is reused (the peer's request rate per worker), not only on `p`.
    Reclaim {
        /// Probability per response that the backend closes the connection afterwards.
        p: f64,
        /// Lower bound of the delay before the close.
        #[serde(default)]
        delay_min: Us,
        /// Upper bound of the delay before the close.
        #[serde(default = "d_50ms")]
        delay_max: Us,
    },
    /// A first-try failure process on cached connections, of unknown cause, as production logs
    /// show it: a try on a *cached* connection fails with probability `p`, seen after a delay
    /// uniform in `delay_min..delay_max` (`upstream prematurely closed connection`). This is
    /// `sim predict --first-try-failure`; use `reclaim` to replay the lab backend's fault.
    Stale {
        /// Probability per cached-connection try.
        p: f64,
        /// Lower bound of the detection delay.
        #[serde(default)]
        delay_min: Us,
        /// Upper bound of the detection delay.
        #[serde(default = "d_50ms")]
        delay_max: Us,
    },
    /// Any try fails with probability `p` after its normal latency (premature close).
    Fail {
        /// Probability per try.
        p: f64,
    },
    /// Adds latency to every try.
    Delay {
        /// The added latency.
        by: Us,
    },
}

impl FaultKind {
    /// A lab backend fault as the model plays it: `reclaim` (the keep-alive reclaim race),
    /// `rst`, `refuse`, `close-after-headers` (a premature close), `slow-headers` (added latency),
    /// `hang` (never answers: the read timeout). The window keys (`for=`, `seed=`, `name=`)
    /// belong to the caller's timeline.
    pub fn from_backend(f: &BackendFault) -> Result<FaultKind> {
        let p = f.common.toxicity;
        Ok(match &f.kind {
            BackendFaultKind::Reclaim { delay } => FaultKind::Reclaim {
                p,
                delay_min: Us(delay.lo.as_micros() as i64),
                delay_max: Us(delay.hi.as_micros() as i64),
            },
            BackendFaultKind::Rst => FaultKind::Rst { p },
            BackendFaultKind::Refuse => FaultKind::Refuse,
            // The model's `refuse` already fails a cached connection used in its window (a
            // reset), which is what `restart` adds in the lab; after the window a cached
            // connection would work again in the model and not in the lab (none is cached in
            // the scenarios that use it: `keepalive = 0`).
            BackendFaultKind::Restart => FaultKind::Refuse,
            BackendFaultKind::CloseAfterHeaders => FaultKind::Fail { p },
            BackendFaultKind::SlowHeaders { delay } => FaultKind::Delay {
                by: Us(delay.as_micros() as i64),
            },
            BackendFaultKind::Hang => FaultKind::Delay { by: Us::s(86_400) },
            other => bail!(
                "`{f}`: the simulator does not model `{}` ({MODELLED})",
                other.name()
            ),
        })
    }

    /// A lab proxy toxic as the model plays it: `latency` (added latency; jitter is not
    /// modelled), `reset_peer` (a reset), `down` (refused), `timeout` (never answers).
    pub fn from_toxic(t: &ToxicSpec) -> Result<FaultKind> {
        Ok(match &t.kind {
            ToxicKind::Latency(l) => FaultKind::Delay {
                by: Us(l.delay.as_micros() as i64),
            },
            ToxicKind::ResetPeer(_) => FaultKind::Rst {
                p: t.common.toxicity,
            },
            ToxicKind::Down(_) => FaultKind::Refuse,
            ToxicKind::Timeout(_) => FaultKind::Delay { by: Us::s(86_400) },
            other => bail!(
                "`{t}`: the simulator does not model `{}` ({MODELLED})",
                other.name()
            ),
        })
    }
}

/// What [`FaultKind::from_backend`] and [`FaultKind::from_toxic`] take.
const MODELLED: &str = "it models the backend's reclaim, rst, refuse, restart, close-after-headers, \
     slow-headers and hang, and the proxy's latency, reset_peer, down and timeout";

fn d_one() -> f64 {
    1.0
}
fn d_50ms() -> Us {
    Us::ms(50)
}

/// A backend that calls a slow dependency through a connection pool (the lab's `[[backend]]`
/// with `db`, `round_trips`, `pool`, `acquire_timeout`): every request waits for a pool
/// connection (first come, first served), then makes `round_trips` sequential round trips of
/// `round_trip` each. A request that waits longer than `acquire_timeout` is answered 503.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackendPool {
    /// The backend's `IP:PORT` (a static server line's address).
    pub target: String,
    /// Its name: the `x-backend` header, `backends.json` and `probes.jsonl`.
    pub name: String,
    /// Pool size.
    pub pool: u32,
    /// Sequential round trips to the dependency per request.
    pub round_trips: u32,
    /// One round trip (the link's delay).
    pub round_trip: Us,
    /// Longest wait for a pool connection; a longer one is answered 503.
    pub acquire_timeout: Us,
    /// A readiness probe sent straight to the backend (its `/ready` makes one round trip
    /// through the same pool).
    #[serde(default)]
    pub probe: Option<Probe>,
}

/// A kubelet-like readiness probe: `GET path` every `interval`, failed after `timeout`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Probe {
    /// Time between probes.
    pub interval: Us,
    /// The prober gives up after this long (the request leaves the pool's queue).
    pub timeout: Us,
    /// Path (cosmetic).
    #[serde(default = "d_ready")]
    pub path: String,
}

fn d_ready() -> String {
    "/ready".into()
}

/// A fault active on `[start, end)` for one backend address (`IP:PORT` or `IP`) or all.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FaultWindow {
    /// Start offset from the load start.
    pub start: Us,
    /// End offset (exclusive).
    pub end: Us,
    /// `IP:PORT` or `IP`; absent = every backend.
    #[serde(default)]
    pub target: Option<String>,
    /// What it does.
    #[serde(flatten)]
    pub fault: FaultKind,
}

/// A latency distribution for successful tries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "dist", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Latency {
    /// Always `value`.
    Fixed {
        /// The latency.
        value: Us,
    },
    /// Uniform in `min..max`.
    Uniform {
        /// Lower bound.
        min: Us,
        /// Upper bound.
        max: Us,
    },
    /// Exponential with this mean.
    Exp {
        /// Mean.
        mean: Us,
    },
    /// Log-normal with this median and shape `sigma`.
    Lognormal {
        /// Median.
        median: Us,
        /// Shape (σ of the underlying normal).
        sigma: f64,
    },
}

impl Latency {
    /// Parse the lab's latency grammar (`3ms`, `uniform:1ms..5ms`, `exp:5ms`,
    /// `lognormal:p50=5ms,p99=40ms` or `lognormal:5ms,0.6`; `resolvelab_core::spec::latency`).
    pub fn parse(s: &str) -> Result<Latency> {
        let l: LabLatency = s.parse().map_err(anyhow::Error::msg)?;
        Ok(Latency::from(&l))
    }
}

impl From<&LabLatency> for Latency {
    /// The lab's latency model in the model's units (µs).
    fn from(l: &LabLatency) -> Latency {
        let us = |d: &std::time::Duration| Us(d.as_micros() as i64);
        match l {
            LabLatency::Fixed(d) => Latency::Fixed { value: us(d) },
            LabLatency::Uniform(r) => Latency::Uniform {
                min: us(&r.lo),
                max: us(&r.hi),
            },
            LabLatency::Exp { mean } => Latency::Exp { mean: us(mean) },
            LabLatency::LogNormal { median, sigma } => Latency::Lognormal {
                median: us(median),
                sigma: *sigma,
            },
        }
    }
}

/// `proxy_next_upstream` and `proxy_next_upstream_tries`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NextUpstream {
    /// `error` (default on).
    #[serde(default = "yes")]
    pub error: bool,
    /// `timeout` (default on).
    #[serde(default = "yes")]
    pub timeout: bool,
    /// `non_idempotent`: retry POST/LOCK/PATCH after the request was sent.
    #[serde(default)]
    pub non_idempotent: bool,
    /// `proxy_next_upstream_tries` (0 = unlimited).
    #[serde(default)]
    pub tries: u32,
}

fn yes() -> bool {
    true
}

impl Default for NextUpstream {
    fn default() -> Self {
        NextUpstream {
            error: true,
            timeout: true,
            non_idempotent: false,
            tries: 0,
        }
    }
}

/// `error_page 502 = @retry_once` with a method guard: one more pass (new peer snapshot).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetryShim {
    /// Methods the guard lets through (others get the first pass's 502).
    #[serde(default = "d_guard")]
    pub methods: Vec<String>,
}

fn d_guard() -> Vec<String> {
    vec!["GET".into(), "HEAD".into(), "OPTIONS".into()]
}

impl Default for RetryShim {
    fn default() -> Self {
        RetryShim { methods: d_guard() }
    }
}

/// A second upstream group that shares `be`'s zone (`upstream filler { zone be; server NAME
/// resolve; }`). It takes no traffic; its resolved peers only take slab memory from `be`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ZoneFiller {
    /// The name its `server NAME resolve` line resolves (its answers come from `dns`).
    pub name: String,
    /// Its group name, as the `memory exhausted` lines print it.
    #[serde(default = "d_filler_group")]
    pub upstream: String,
    /// Port of its server line.
    #[serde(default = "d_port")]
    pub port: u16,
}

fn d_filler_group() -> String {
    "filler".into()
}

/// The host's ephemeral ports toward one backend address when TIME_WAIT ports are never reused
/// (`net.ipv4.tcp_tw_reuse = 0`, `net.ipv4.ip_local_port_range`). Every connection nginx opens
/// takes a port; the connections nginx closes itself keep theirs in TIME_WAIT.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EphemeralPorts {
    /// How many ports the range holds (`40000 40499` → 500).
    pub count: u32,
    /// How long a port stays in TIME_WAIT (Linux: `TCP_TIMEWAIT_LEN`, 60 s).
    #[serde(default = "d_time_wait")]
    pub time_wait: Us,
    /// The kernel timer wheel's granularity at that timeout: a TIME_WAIT timer fires at the
    /// next multiple of it (2.048 s for 60 s at HZ=250, as the lab measured; 0 = exact).
    #[serde(default = "d_time_wait_granularity")]
    pub granularity: Us,
}

fn d_time_wait() -> Us {
    Us::s(60)
}
fn d_time_wait_granularity() -> Us {
    Us::ms(2048)
}

/// Everything the simulator needs. Offsets (`at`, `start`, `end`) are relative to the load start;
/// nginx starts `warmup` earlier and sends its first DNS queries then.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimConfig {
    /// RNG seed (ChaCha8).
    #[serde(default = "d_seed")]
    pub seed: u64,
    /// Epoch µs of the load start (timestamps in the logs).
    #[serde(default = "d_epoch")]
    pub epoch_us: i64,
    /// UTC offset of the error log's local time, in seconds (nginx writes local time).
    #[serde(default)]
    pub tz_offset_s: i32,
    /// nginx start → load start (the first DNS answer must land before the load).
    #[serde(default = "d_warmup")]
    pub warmup: Us,
    /// Upstream group name (`be`).
    #[serde(default = "d_group")]
    pub upstream: String,
    /// The `server` lines.
    pub servers: Vec<ServerLine>,
    /// Shared-memory zone size in bytes (`zone be 64k`).
    #[serde(default = "d_zone")]
    pub zone_bytes: u64,
    /// The peer structure's size in the build modeled (`ngx_http_upstream_rr_peer_t`: 192 bytes
    /// in the lab's 1.28.3, built without SSL; ~320 with `--with-compat`); with `zone_bytes` it
    /// gives the peer capacity through the zone's slab model (`resolvelab_core::zone`).
    #[serde(default = "d_peer_bytes")]
    pub peer_bytes: u64,
    /// A second upstream group sharing the zone (absent: `be` has the zone alone).
    #[serde(default)]
    pub zone_filler: Option<ZoneFiller>,
    /// A finite ephemeral port range without TIME_WAIT reuse (absent: ports never run out,
    /// as on loopback with Linux's default `tcp_tw_reuse = 2`). Needs `keepalive = 0`.
    #[serde(default)]
    pub ephemeral_ports: Option<EphemeralPorts>,
    /// `resolver … valid=` (absent: the answer's TTL).
    #[serde(default)]
    pub valid: Option<Us>,
    /// `resolver … ipv6=` (nginx default on): AAAA answers become peers too.
    #[serde(default = "yes")]
    pub ipv6: bool,
    /// TTL the authority puts on its answers.
    #[serde(default = "d_ttl")]
    pub dns_ttl: Us,
    /// `resolver_timeout` (nginx default 30 s).
    #[serde(default = "d_resolver_timeout")]
    pub resolver_timeout: Us,
    /// Upstream `keepalive N` (idle connections cached per worker; 0 = none).
    #[serde(default)]
    pub keepalive: u32,
    /// nginx `worker_processes` (default 1, like nginx; the lab runs 2). Each worker has its
    /// own keep-alive cache of `keepalive` connections, and each client connection is accepted
    /// by one worker in nginx's EPOLLEXCLUSIVE order (see `accepts_before_load`), so a peer's
    /// cached connections are reused less often than with one cache. The peer list,
    /// `max_fails` state and round-robin weights live in the shared zone, as in nginx.
    #[serde(default = "d_workers")]
    pub workers: u32,
    /// Client connections nginx accepted before the load (the lab runner's one readiness
    /// connect). With EPOLLEXCLUSIVE Linux wakes the worker that registered the listening
    /// socket first, and nginx re-registers a worker after its 1st, 17th, 33rd … accept
    /// (`ngx_reorder_accept_events`), so the accept order is a queue: these early accepts decide
    /// which worker takes the load's first connections.
    #[serde(default)]
    pub accepts_before_load: u32,
    /// `proxy_next_upstream` / `_tries`.
    #[serde(default)]
    pub next_upstream: NextUpstream,
    /// `proxy_read_timeout` (nginx default 60 s): a slower try fails with 504.
    #[serde(default = "d_read_timeout")]
    pub read_timeout: Us,
    /// `error_page 502 = @retry_once` (absent: no shim).
    #[serde(default)]
    pub retry_shim: Option<RetryShim>,
    /// DNS mode timeline (a name's first phase is its mode from nginx start).
    #[serde(default)]
    pub dns: Vec<DnsPhase>,
    /// Times (from the load start) of `nginx -s reload`: names resolved at start are resolved
    /// again, keep-alive connections and `max_fails` state start afresh.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reloads: Vec<Us>,
    /// Times of `nginx -t` (a timeline's `nginx = "test"`): every name resolved at start is
    /// asked, and an event says whether a start would succeed; nothing running changes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tests: Vec<Us>,
    /// Times of a restart (a timeline's `nginx = "restart"`): nginx stops and starts again; a
    /// name resolved at start that does not resolve keeps it down until a later start.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub restarts: Vec<Us>,
    /// Times of `nginx = "start"`: start nginx if a restart left it down.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub starts: Vec<Us>,
    /// A `resolver` is in scope of the variable `proxy_pass` (`per_request` line); without one
    /// every request fails with 502 and `no resolver defined to resolve NAME`.
    #[serde(default = "yes", skip_serializing_if = "Clone::clone")]
    pub resolver: bool,
    /// Fault timeline.
    #[serde(default)]
    pub faults: Vec<FaultWindow>,
    /// Requests per second (constant-rate open loop, like the lab's load generator).
    pub rps: f64,
    /// Explicit request times (offsets from the load start, in order) instead of `rps`: the
    /// lab's multi-stage plans (`2@14s,80@500ms,…`) as its scheduler spaces them.
    #[serde(default)]
    pub arrivals: Vec<Us>,
    /// Backends with a connection pool to a slow dependency.
    #[serde(default)]
    pub pools: Vec<BackendPool>,
    /// Backend names by `IP:PORT`: responses from them carry `x-backend: NAME`, which
    /// load.jsonl records like the lab's generator (`header`).
    #[serde(default)]
    pub names: std::collections::BTreeMap<String, String>,
    /// Poisson arrivals instead of a constant interval.
    #[serde(default)]
    pub poisson: bool,
    /// Load duration.
    pub duration: Us,
    /// Method mix, e.g. `[["GET", 0.9], ["POST", 0.1]]` (default all GET).
    #[serde(default = "d_mix")]
    pub mix: Vec<(String, f64)>,
    /// Latency of a successful try.
    #[serde(default = "d_latency")]
    pub latency: Latency,
    /// Per backend `IP:PORT`: its own latency instead of `latency` (a slow and a fast one).
    #[serde(default)]
    pub backend_latency: std::collections::BTreeMap<String, Latency>,
    /// Time between a request's peer-list snapshot and its first pick (nginx: microseconds,
    /// the same call). A peer-list change in the resolving worker (worker 0) catches a request
    /// of another worker inside it with probability 1 − e^(−rate·window): a first-pick race.
    #[serde(default = "d_window")]
    pub first_pick_window_us: f64,
    /// Client keep-alive connections the load generator keeps idle. Like the lab's generator it
    /// reuses the most recently returned one, or opens a new one when none is idle.
    #[serde(default = "d_clients")]
    pub client_connections: u32,
    /// nginx `keepalive_requests` on the client side.
    #[serde(default = "d_keepalive_requests")]
    pub keepalive_requests: u32,
    /// Where nginx listens (the `host:` of error lines).
    #[serde(default = "d_listen")]
    pub listen: String,
    /// Request URI.
    #[serde(default = "d_uri")]
    pub uri: String,
    /// Body bytes of a successful response.
    #[serde(default = "d_bytes")]
    pub response_bytes: u64,
    /// Simulated nginx pid (error log).
    #[serde(default = "d_pid")]
    pub pid: u32,
}

fn d_workers() -> u32 {
    1
}
fn d_read_timeout() -> Us {
    Us::s(60)
}
fn d_seed() -> u64 {
    1
}
fn d_epoch() -> i64 {
    // 2026-11-30T06:00:00Z
    1_796_018_400_000_000
}
fn d_warmup() -> Us {
    Us::s(1)
}
fn d_group() -> String {
    "be".into()
}
fn d_zone() -> u64 {
    64 * 1024
}
fn d_peer_bytes() -> u64 {
    192
}
fn d_ttl() -> Us {
    Us::s(5)
}
fn d_resolver_timeout() -> Us {
    Us::s(30)
}
fn d_mix() -> Vec<(String, f64)> {
    vec![("GET".into(), 1.0)]
}
fn d_latency() -> Latency {
    Latency::Uniform {
        min: Us::ms(1),
        max: Us::ms(5),
    }
}
/// The default first-pick window, µs: the maximum-likelihood value over every real-nginx run
/// of the library (`resolvelab sim calibrate`: one race where the model, replaying the
/// 132 runs, expects 0.1286 per µs of window; 95 % interval 0.2–43 µs).
pub const FIRST_PICK_WINDOW_US: f64 = 7.8;

fn d_window() -> f64 {
    FIRST_PICK_WINDOW_US
}
fn d_clients() -> u32 {
    32
}
fn d_keepalive_requests() -> u32 {
    1000
}
fn d_listen() -> String {
    "127.0.0.1:8080".into()
}
fn d_uri() -> String {
    "/".into()
}
fn d_bytes() -> u64 {
    3
}
fn d_pid() -> u32 {
    1234
}

impl SimConfig {
    /// A config with nginx's defaults around the given server lines: 300 rps for 60 s, valid
    /// absent (TTL 5 s), keepalive 16, no faults, no DNS timeline.
    pub fn new(servers: Vec<ServerLine>) -> SimConfig {
        SimConfig {
            seed: d_seed(),
            epoch_us: d_epoch(),
            tz_offset_s: 0,
            warmup: d_warmup(),
            upstream: d_group(),
            servers,
            zone_bytes: d_zone(),
            peer_bytes: d_peer_bytes(),
            zone_filler: None,
            ephemeral_ports: None,
            valid: None,
            ipv6: true,
            dns_ttl: d_ttl(),
            resolver_timeout: d_resolver_timeout(),
            keepalive: 16,
            workers: d_workers(),
            accepts_before_load: 0,
            next_upstream: NextUpstream::default(),
            read_timeout: d_read_timeout(),
            retry_shim: None,
            dns: Vec::new(),
            reloads: Vec::new(),
            tests: Vec::new(),
            restarts: Vec::new(),
            starts: Vec::new(),
            resolver: true,
            faults: Vec::new(),
            rps: 300.0,
            arrivals: Vec::new(),
            pools: Vec::new(),
            names: Default::default(),
            poisson: false,
            duration: Us::s(60),
            mix: d_mix(),
            latency: d_latency(),
            backend_latency: Default::default(),
            first_pick_window_us: d_window(),
            client_connections: d_clients(),
            keepalive_requests: d_keepalive_requests(),
            listen: d_listen(),
            uri: d_uri(),
            response_bytes: d_bytes(),
            pid: d_pid(),
        }
    }

    /// Read a config from TOML (or JSON for `.json`) and validate it; errors name the file.
    pub fn from_path(path: &std::path::Path) -> Result<SimConfig> {
        use anyhow::Context;
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let cfg: SimConfig = if path.extension().and_then(|e| e.to_str()) == Some("json") {
            serde_json::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?
        } else {
            toml::from_str(&text).map_err(|e| {
                anyhow::anyhow!(
                    "{}: {} (start from `resolvelab sim nginx --print-example`)",
                    path.display(),
                    e.to_string()
                        .split_whitespace()
                        .collect::<Vec<_>>()
                        .join(" ")
                )
            })?
        };
        cfg.validate().with_context(|| path.display().to_string())?;
        Ok(cfg)
    }

    /// How many resolved peers the zone can hold (shared with the `zone_filler` group): the most
    /// that `resolvelab_core::zone`'s slab model fits beside the groups' static part (their
    /// peers lists, each `resolve` line's template and host, each static line's peer).
    pub fn zone_peer_capacity(&self) -> u64 {
        use resolvelab_core::zone::{Group, Layout, pages_available, pages_needed};
        let layout = Layout {
            peer: self.peer_bytes,
            sid: false,
        };
        let server = |s: &ServerLine| s.host.len() + 6;
        let be = Group {
            name: self.upstream.clone(),
            peers: self.servers.iter().map(server).collect(),
            hosts: self
                .servers
                .iter()
                .filter(|s| s.resolve)
                .map(|s| s.host.len())
                .collect(),
            backup: self.servers.iter().any(|s| s.backup),
        };
        let filler = self.zone_filler.as_ref().map(|f| Group {
            name: f.upstream.clone(),
            peers: vec![f.name.len() + 6],
            hosts: vec![f.name.len()],
            backup: false,
        });
        let resolved = be.peers.first().copied().unwrap_or(21);
        let have = pages_available(self.zone_bytes);
        let fits = |n: u64| {
            let mut be = be.clone();
            be.peers.extend(std::iter::repeat_n(resolved, n as usize));
            let groups: Vec<Group> = std::iter::once(be).chain(filler.clone()).collect();
            pages_needed(self.upstream.len(), &groups, layout) <= have
        };
        // The most that fit, by bisection (what fits grows with the zone, peer by peer).
        let (mut lo, mut hi) = (0u64, self.zone_bytes / 64 + 1);
        while lo + 1 < hi {
            let mid = lo + (hi - lo) / 2;
            if fits(mid) { lo = mid } else { hi = mid }
        }
        if fits(lo) { lo } else { 0 }
    }

    /// The load's request times, in order (see [`Arrivals`]).
    pub fn arrivals(&self) -> Arrivals<'_> {
        let n = if self.arrivals.is_empty() {
            (self.duration.0 as f64 * self.rps / 1e6).floor() as u64
        } else {
            self.arrivals.len() as u64
        };
        Arrivals {
            cfg: self,
            k: 0,
            n,
            interval: 1e6 / self.rps,
            t_exact: self.epoch_us as f64,
        }
    }

    /// Effective requery period base (`valid`, else the TTL).
    pub fn valid_us(&self) -> i64 {
        self.valid.unwrap_or(self.dns_ttl).0
    }

    /// Reject configurations that would make a run meaningless, with one clear line each,
    /// checked in this order.
    pub fn validate(&self) -> Result<()> {
        self.check_load()?;
        self.check_servers()?;
        self.check_dns()?;
        self.check_faults()?;
        self.check_requests()?;
        self.check_pools()?;
        self.check_the_rest()
    }

    /// The load's rate and span, and the sizes of the inputs.
    fn check_load(&self) -> Result<()> {
        if !(self.rps > 0.0 && self.rps.is_finite()) {
            bail!("rps = {}: must be a positive number", self.rps);
        }
        if self.duration.0 <= 0 {
            bail!("duration must be positive");
        }
        if self.duration.0 > 40 * 86_400_000_000
            || self.warmup.0 < 0
            || self.warmup.0 > 3_600_000_000
        {
            bail!("duration must be at most 40 days and warmup within 0..=1h");
        }
        if self.dns.len() > 60_000 || self.faults.len() > 30_000 {
            bail!("at most 60,000 DNS phases and 30,000 fault windows");
        }
        Ok(())
    }

    /// The upstream's server lines.
    fn check_servers(&self) -> Result<()> {
        if self.servers.is_empty() {
            bail!("servers is empty: the upstream needs at least one server line");
        }
        if self.servers.iter().all(|s| s.backup) {
            bail!("every server is `backup`: nginx needs at least one primary server");
        }
        for (i, s) in self.servers.iter().enumerate() {
            let named = s.host.parse::<std::net::IpAddr>().is_err();
            if s.per_request && (!named || s.resolve || self.servers.len() > 1) {
                bail!(
                    "servers[{i}]: per_request stands for a variable proxy_pass: the only server line, a name, without `resolve`"
                );
            }
            if named && !self.dns.iter().any(|p| p.name == s.host) {
                bail!(
                    "server {:?} is a name but no DNS phase names it: add a dns entry with name = {:?}",
                    s.host,
                    s.host
                );
            }
            if s.resolve && s.backup {
                bail!(
                    "servers[{i}]: nginx does not allow `resolve` on a `backup` server here — use a static backup"
                );
            }
            if s.weight == 0 {
                bail!("servers[{i}].weight = 0: weight must be ≥ 1");
            }
        }
        Ok(())
    }

    /// The DNS phases, the zone filler and the port model.
    fn check_dns(&self) -> Result<()> {
        let mut last = std::collections::HashMap::new();
        let filler = self.zone_filler.as_ref().map(|f| f.name.as_str());
        for (i, p) in self.dns.iter().enumerate() {
            if p.mode.is_partial() {
                bail!(
                    "dns[{i}].mode `{}` wraps no mode: write it with the mode it delays, e.g. `delay:200ms+static:127.0.0.20`",
                    p.mode
                );
            }
            if let DnsMode::Weighted(_) = p.mode.answered() {
                bail!(
                    "dns[{i}].mode `{}`: the model does not play `weighted` (its picks come from the authority's own RNG); use `alternate`",
                    p.mode
                );
            }
            if !self.servers.iter().any(|s| s.host == p.name) && filler != Some(p.name.as_str()) {
                bail!(
                    "dns[{i}].name {:?} is not the host of any server line",
                    p.name
                );
            }
            if let Some(prev) = last.insert(p.name.as_str(), p.at)
                && prev > p.at
            {
                bail!(
                    "dns[{i}] for {:?} at {} µs is before the previous phase: phases must be in time order",
                    p.name,
                    p.at.0
                );
            }
        }
        if let Some(f) = &self.zone_filler {
            if !self.dns.iter().any(|p| p.name == f.name) {
                bail!(
                    "zone_filler {:?} has no DNS phase: add a dns entry with name = {:?}",
                    f.name,
                    f.name
                );
            }
            if f.upstream == self.upstream {
                bail!(
                    "zone_filler.upstream {:?} is the main group's name: give the filler group its own",
                    f.upstream
                );
            }
        }
        if let Some(p) = &self.ephemeral_ports {
            if p.count == 0 || p.time_wait.0 < 0 || p.granularity.0 < 0 {
                bail!("ephemeral_ports: count must be ≥ 1 and durations ≥ 0");
            }
            if self.keepalive > 0 {
                bail!(
                    "ephemeral_ports with keepalive = {}: the port model covers one connection per try only; set keepalive = 0",
                    self.keepalive
                );
            }
        }
        Ok(())
    }

    /// The fault windows.
    fn check_faults(&self) -> Result<()> {
        for (i, f) in self.faults.iter().enumerate() {
            if let Some(t) = &f.target
                && t.parse::<std::net::SocketAddr>().is_err()
                && t.trim_matches(['[', ']'])
                    .parse::<std::net::IpAddr>()
                    .is_err()
            {
                bail!("faults[{i}].target {t:?}: write IP:PORT, [IPv6]:PORT or IP");
            }
            if f.end.0 <= f.start.0 {
                bail!("faults[{i}]: end must be after start");
            }
            let p = match &f.fault {
                FaultKind::Rst { p }
                | FaultKind::Reclaim { p, .. }
                | FaultKind::Stale { p, .. }
                | FaultKind::Fail { p } => *p,
                _ => 0.0,
            };
            if !(0.0..=1.0).contains(&p) {
                bail!("faults[{i}]: probability p = {p} must be within 0..=1");
            }
            if let FaultKind::Reclaim {
                delay_min,
                delay_max,
                ..
            }
            | FaultKind::Stale {
                delay_min,
                delay_max,
                ..
            } = &f.fault
                && (delay_max.0 < delay_min.0 || delay_min.0 < 0)
            {
                bail!("faults[{i}]: delay_min must be ≥ 0 and delay_max not below it");
            }
        }
        Ok(())
    }

    /// The method mix, the read timeout and explicit arrivals.
    fn check_requests(&self) -> Result<()> {
        let total: f64 = self.mix.iter().map(|(_, w)| *w).sum();
        if self.mix.is_empty() || total <= 0.0 || self.mix.iter().any(|(_, w)| *w < 0.0) {
            bail!("mix needs at least one method with a positive weight");
        }
        if self.read_timeout.0 <= 0 {
            bail!("read_timeout must be positive");
        }
        if self.arrivals.windows(2).any(|w| w[1] < w[0])
            || self
                .arrivals
                .iter()
                .any(|a| a.0 < 0 || a.0 >= self.duration.0)
        {
            bail!("arrivals must be in order and within 0..duration");
        }
        Ok(())
    }

    /// The slow dependency's pools and their probes.
    fn check_pools(&self) -> Result<()> {
        for (i, p) in self.pools.iter().enumerate() {
            if p.target.parse::<std::net::SocketAddr>().is_err() {
                bail!("pools[{i}].target {:?}: write IP:PORT", p.target);
            }
            if p.pool == 0 || p.round_trip.0 < 0 || p.acquire_timeout.0 < 0 {
                bail!(
                    "pools[{i}] ({}): pool must be ≥ 1 and durations ≥ 0",
                    p.name
                );
            }
            if let Some(pr) = &p.probe
                && (pr.interval.0 <= 0 || pr.timeout.0 <= 0)
            {
                bail!(
                    "pools[{i}] ({}): probe interval and timeout must be positive",
                    p.name
                );
            }
        }
        Ok(())
    }

    /// Workers, client connections, the first-pick window and the latency models.
    fn check_the_rest(&self) -> Result<()> {
        if !(1..=1024).contains(&self.workers) {
            bail!("workers = {}: must be within 1..=1024", self.workers);
        }
        if self.client_connections == 0 {
            bail!("client_connections must be ≥ 1");
        }
        if self.first_pick_window_us.is_nan() || self.first_pick_window_us < 0.0 {
            bail!("first_pick_window_us must be ≥ 0");
        }
        let per_backend = self
            .backend_latency
            .iter()
            .map(|(k, l)| (format!("backend_latency.\"{k}\""), l));
        for (field, l) in std::iter::once(("latency".to_string(), &self.latency)).chain(per_backend)
        {
            match l {
                Latency::Uniform { min, max } if max.0 < min.0 => {
                    bail!("{field}: max is below min")
                }
                Latency::Lognormal { sigma, .. } if sigma.is_nan() || *sigma < 0.0 => {
                    bail!("{field}: sigma must be ≥ 0")
                }
                _ => {}
            }
        }
        for k in self.backend_latency.keys() {
            if k.parse::<std::net::SocketAddr>().is_err() {
                bail!("backend_latency.\"{k}\": write IP:PORT");
            }
        }
        Ok(())
    }
}

/// The load's request times (request index, epoch µs): the explicit `arrivals`, else a Poisson
/// process of `rps` when `poisson`, else a constant rate. Every model draws its load from this
/// one sequence, so the nginx and proxy models see the same requests for a seed; the Poisson
/// gaps come from the caller's RNG, whose draw order is part of each model's golden output.
pub struct Arrivals<'a> {
    cfg: &'a SimConfig,
    k: u64,
    n: u64,
    interval: f64,
    t_exact: f64,
}

impl Arrivals<'_> {
    /// The next request, or `None` at the end of the load.
    pub fn next_with<R: rand::Rng + ?Sized>(&mut self, rng: &mut R) -> Option<(u64, i64)> {
        use rand::RngExt;
        let cfg = self.cfg;
        if self.k >= self.n {
            return None;
        }
        let k = self.k;
        self.k += 1;
        if !cfg.arrivals.is_empty() {
            self.t_exact = (cfg.epoch_us + cfg.arrivals[k as usize].0) as f64;
        } else if cfg.poisson {
            let u: f64 = rng.random::<f64>();
            self.t_exact += -(1.0 - u).ln() * self.interval;
            if self.t_exact >= (cfg.epoch_us + cfg.duration.0) as f64 {
                self.k = self.n;
                return None;
            }
        } else {
            self.t_exact = cfg.epoch_us as f64 + k as f64 * self.interval;
        }
        Some((k, self.t_exact as i64))
    }
}
