//! A deterministic discrete-event model of nginx 1.28's upstream/resolve logic (DOMAIN.md §2).
//!
//! What is modelled, each with its nginx source behaviour:
//! * peers of `server NAME resolve` lines live in a zone with a **generation** counter (+1 per
//!   peer added or removed); the **requery timer** fires `valid + 1 s` after an answer;
//! * **NXDOMAIN** (and an empty NOERROR) removes every peer of the host until the next successful
//!   requery; SERVFAIL/REFUSED/timeouts keep the peers and retry after `max(resolver_timeout, 1 s)`;
//! * the zone's **slab capacity** (`resolvelab_core::zone`'s model of `zone_bytes` holding peer
//!   structures of `peer_bytes`), shared with a second group
//!   (`zone_filler`) whose name's answers take peers too: additions stop with
//!   `cannot add new server to upstream "be", memory exhausted` after the removals happened,
//!   and a removed peer that in-flight tries still reference stays allocated (a **zombie**)
//!   until the last of them ends;
//! * a finite **ephemeral port range** without TIME_WAIT reuse (`ephemeral_ports`): a connect
//!   with no free port toward the backend fails at once with `(99: Cannot assign requested
//!   address)`;
//! * peer selection snapshots the generation at request init: a changed generation at any later
//!   pick returns BUSY → `no live upstreams` (**generation race**, at the first pick inside a µs
//!   window, or at a retry), and the BUSY path skips `backup`;
//! * the **single guard** (one primary peer, no backup: max_fails off, tries → 0);
//!   `max_fails`/`fail_timeout` (defaults 1 / 10 s, one-second clock) with the
//!   `upstream server temporarily disabled` warning;
//! * the upstream **keep-alive cache**, one per worker process (`workers`), and the try
//!   compensation for a failed cached connection;
//!   `proxy_next_upstream` (error/timeout/non_idempotent) and `_tries`; POST after the request was
//!   sent is not retried; `proxy_read_timeout` (504, `upstream timed out (110…)`);
//! * the `error_page 502 = @retry_once` **shim**: a second pass with a new snapshot;
//! * first-try failure processes as fault windows: the lab backend's keep-alive **reclaim race**
//!   (after a response the backend closes the connection a little later; only a request reusing
//!   it in that gap fails), `stale` cached connections (a per-try probability, for production
//!   questions), resets of new connections, refused connections, added latency;
//! * the load generator's client connections, reused most-recent-first like the lab's, each
//!   accepted by one nginx worker.
//!
//! ```
//! use resolvelab_sim::nginx::{DnsMode, DnsPhase, ServerLine, SimConfig, Us, simulate_counts};
//! let mut cfg = SimConfig::new(vec![ServerLine::resolve("app.test.local", 8080)]);
//! cfg.valid = Some(Us::s(5));
//! cfg.duration = Us::s(30);
//! cfg.dns = vec![DnsPhase {
//!     at: Us(0),
//!     name: "app.test.local".into(),
//!     mode: "alternate:127.0.0.20,127.0.0.30".parse().unwrap(),
//!     aaaa: vec![],
//! }];
//! let s = simulate_counts(&cfg).unwrap();
//! assert_eq!(s.requests, 9000);
//! assert!(s.swaps >= 4); // a swap every 6 s
//! assert_eq!(s.ok, 9000); // swaps alone are harmless (F1)
//! ```

mod config;
mod engine;
pub mod fidelity;
mod logs;
pub mod moves;
pub mod predict;

pub use config::{
    Arrivals, BackendPool, DnsMode, DnsPhase, EphemeralPorts, FIRST_PICK_WINDOW_US, FaultKind,
    FaultWindow, Latency, NextUpstream, Probe, RetryShim, ServerLine, SimConfig, Us, ZoneFiller,
};

pub(crate) use engine::Sampler;
pub(crate) use logs::Logs;

use anyhow::{Context, Result};
use serde::Serialize;
use std::path::Path;

/// A complete example configuration (the generation race of DOMAIN.md §8), for
/// `resolvelab sim nginx --print-example`.
pub const EXAMPLE_TOML: &str = r#"# resolvelab simulated nginx: one upstream, its DNS, faults and load.
# Offsets (at, start, end) are relative to the load start; nginx starts `warmup` earlier.
seed = 1
rps = 300
duration = "120s"
valid = "5s"            # resolver ... valid=5s  → a requery every 6 s
keepalive = 16          # upstream keepalive 16 (per worker)
workers = 1             # worker_processes
first_pick_window_us = 7.8   # snapshot → first pick; races need workers ≥ 2
latency = { dist = "uniform", min = "1ms", max = "5ms" }
mix = [["GET", 1.0]]
# retry_shim = { methods = ["GET", "HEAD", "OPTIONS"] }   # error_page 502 = @retry_once
# zone_filler = { name = "filler.test.local" }   # a 2nd group in the zone (give it [[dns]] phases)
# ephemeral_ports = { count = 500 }   # tcp_tw_reuse = 0: 60 s TIME_WAIT per port (keepalive = 0)
# backend_latency = { "127.0.0.20:8080" = { dist = "fixed", value = "100ms" } }

[[servers]]
host = "app.test.local"
port = 8080
resolve = true
max_fails = 1           # nginx default
fail_timeout = "10s"    # nginx default

[next_upstream]
error = true
timeout = true
non_idempotent = false
tries = 0

[[dns]]
at = "-1s"
name = "app.test.local"
mode = "alternate:127.0.0.20,127.0.0.30"

# The keep-alive reclaim race, as the lab backend plays it: after 30 % of the responses the
# backend closes the connection 0–50 ms later; a request nginx sends on it in that gap fails.
[[faults]]
start = "0s"
end = "120s"
kind = "reclaim"
p = 0.3
delay_min = "0ms"
delay_max = "50ms"
"#;

/// The failure class of a `no live upstreams` answer, as the model knows it (ground truth).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NluClass {
    /// A swap between a failed first try and its retry (2-hop).
    GenerationRaceRetry,
    /// A swap between the snapshot and the first pick (1-hop, µs window).
    GenerationRaceFirstPick,
    /// Every peer excluded by max_fails.
    MaxfailsWipeout,
    /// The host has no peers after NXDOMAIN.
    DnsNxdomain,
    /// The host lost peers to slab exhaustion.
    ZoneMemoryExhausted,
    /// Every peer already tried in this request.
    TriesExhausted,
}

impl NluClass {
    /// The stable class id (docs/DESIGN.md).
    pub fn id(self) -> &'static str {
        match self {
            NluClass::GenerationRaceRetry => "generation-race-retry",
            NluClass::GenerationRaceFirstPick => "generation-race-first-pick",
            NluClass::MaxfailsWipeout => "maxfails-wipeout",
            NluClass::DnsNxdomain => "dns-nxdomain",
            NluClass::ZoneMemoryExhausted => "zone-memory-exhausted",
            NluClass::TriesExhausted => "tries-exhausted",
        }
    }
}

/// Counts of NLU answers per class (serialized with the class ids).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct ClassCounts {
    /// `generation-race-retry`.
    pub generation_race_retry: u64,
    /// `generation-race-first-pick`.
    pub generation_race_first_pick: u64,
    /// `maxfails-wipeout`.
    pub maxfails_wipeout: u64,
    /// `dns-nxdomain`.
    pub dns_nxdomain: u64,
    /// `zone-memory-exhausted`.
    pub zone_memory_exhausted: u64,
    /// `tries-exhausted`.
    pub tries_exhausted: u64,
}

impl ClassCounts {
    /// Count one.
    pub fn add(&mut self, c: NluClass) {
        *self.get_mut(c) += 1;
    }
    fn get_mut(&mut self, c: NluClass) -> &mut u64 {
        match c {
            NluClass::GenerationRaceRetry => &mut self.generation_race_retry,
            NluClass::GenerationRaceFirstPick => &mut self.generation_race_first_pick,
            NluClass::MaxfailsWipeout => &mut self.maxfails_wipeout,
            NluClass::DnsNxdomain => &mut self.dns_nxdomain,
            NluClass::ZoneMemoryExhausted => &mut self.zone_memory_exhausted,
            NluClass::TriesExhausted => &mut self.tries_exhausted,
        }
    }
    /// The count of one class.
    pub fn get(&self, c: NluClass) -> u64 {
        let mut copy = *self;
        *copy.get_mut(c)
    }
    /// All classes with their ids.
    pub fn iter(&self) -> impl Iterator<Item = (NluClass, u64)> + '_ {
        [
            NluClass::GenerationRaceRetry,
            NluClass::GenerationRaceFirstPick,
            NluClass::MaxfailsWipeout,
            NluClass::DnsNxdomain,
            NluClass::ZoneMemoryExhausted,
            NluClass::TriesExhausted,
        ]
        .into_iter()
        .map(|c| (c, self.get(c)))
    }
    /// Sum over classes.
    pub fn total(&self) -> u64 {
        self.iter().map(|(_, n)| n).sum()
    }
    /// Add another's counts, class by class.
    pub fn absorb(&mut self, o: &ClassCounts) {
        for (c, n) in o.iter() {
            *self.get_mut(c) += n;
        }
    }
}

/// What a simulation did (the ground truth a verdict on its logs can be checked against).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SimSummary {
    /// The seed used.
    pub seed: u64,
    /// Requests sent by the load.
    pub requests: u64,
    /// Final 200s.
    pub ok: u64,
    /// Final 502s (NLU and upstream failures).
    pub status_502: u64,
    /// Final 504s (`proxy_read_timeout`).
    pub status_504: u64,
    /// Final 503s answered by a pool backend whose pool wait timed out.
    pub status_503: u64,
    /// Final 502s that were `no live upstreams`, by class.
    pub nlu: ClassCounts,
    /// Final 502/504s after real tries, without NLU (`upstream-failure`).
    pub upstream_failures: u64,
    /// 502s of requests whose own (per-request) resolution failed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dns_request_failures: u64,
    /// Failed upstream tries (every try, first or not).
    pub try_failures: u64,
    /// Retries to a next peer after a failed try.
    pub retries: u64,
    /// Requests with more than one hop.
    pub retried_requests: u64,
    /// Second passes started by the `error_page` shim.
    pub shim_passes: u64,
    /// First-pass NLUs the shim retried (by class).
    pub shim_first_pass_nlu: ClassCounts,
    /// First-pass upstream failures the shim retried.
    pub shim_first_pass_failures: u64,
    /// DNS answers received (successful or rcode errors).
    pub requeries: u64,
    /// Requeries that changed the peer list.
    pub swaps: u64,
    /// Epoch µs of every swap.
    pub swap_times_us: Vec<i64>,
    /// `could not be resolved` lines.
    pub dns_errors: u64,
    /// `upstream server temporarily disabled` lines.
    pub disabled_warnings: u64,
    /// `memory exhausted` lines (either group of the zone).
    pub memory_exhausted: u64,
    /// Tries that found no free ephemeral port (`99: Cannot assign requested address`).
    pub port_exhausted: u64,
    /// Final generation counter.
    pub generation: u64,
    /// Hits of every fault window (same order as the config).
    pub fault_hits: Vec<u64>,
    /// Simulated load duration (µs).
    pub simulated_us: i64,
    /// Per pool backend (same order as `pools`): pool connections ever opened.
    pub pool_connections: Vec<u64>,
    /// The expected number of first-pick races (the sum of every peer-list change's race
    /// probability): for a class this rare, the count to compare pooled lab counts with.
    pub first_pick_expected: f64,
    /// The other workers' request rate summed over every peer-list change, per µs: the races
    /// expected per µs of `first_pick_window_us` while rate × window ≪ 1 (what
    /// `resolvelab sim calibrate` fits the window with).
    pub first_pick_exposure_per_us: f64,
}

impl SimSummary {
    fn new(seed: u64) -> SimSummary {
        SimSummary {
            seed,
            ..SimSummary::default()
        }
    }

    /// Total NLU answers.
    pub fn nlu_total(&self) -> u64 {
        self.nlu.total()
    }

    /// Add another instance's counts to these: a fleet's summary is its instances' sums (the
    /// swap times merged in order, the fault and pool counters added index by index, the
    /// longest simulated span and the highest generation kept).
    pub fn absorb(&mut self, o: &SimSummary) {
        self.requests += o.requests;
        self.ok += o.ok;
        self.status_502 += o.status_502;
        self.status_504 += o.status_504;
        self.status_503 += o.status_503;
        self.nlu.absorb(&o.nlu);
        self.upstream_failures += o.upstream_failures;
        self.dns_request_failures += o.dns_request_failures;
        self.try_failures += o.try_failures;
        self.retries += o.retries;
        self.retried_requests += o.retried_requests;
        self.shim_passes += o.shim_passes;
        self.shim_first_pass_nlu.absorb(&o.shim_first_pass_nlu);
        self.shim_first_pass_failures += o.shim_first_pass_failures;
        self.requeries += o.requeries;
        self.swaps += o.swaps;
        self.swap_times_us.extend(&o.swap_times_us);
        self.swap_times_us.sort_unstable();
        self.dns_errors += o.dns_errors;
        self.disabled_warnings += o.disabled_warnings;
        self.memory_exhausted += o.memory_exhausted;
        self.port_exhausted += o.port_exhausted;
        self.generation = self.generation.max(o.generation);
        add_each(&mut self.fault_hits, &o.fault_hits);
        self.simulated_us = self.simulated_us.max(o.simulated_us);
        add_each(&mut self.pool_connections, &o.pool_connections);
        self.first_pick_expected += o.first_pick_expected;
        self.first_pick_exposure_per_us += o.first_pick_exposure_per_us;
    }
}

/// `a[i] += b[i]`, `a` grown to `b`'s length.
fn add_each(a: &mut Vec<u64>, b: &[u64]) {
    if a.len() < b.len() {
        a.resize(b.len(), 0);
    }
    for (x, y) in a.iter_mut().zip(b) {
        *x += y;
    }
}

/// Run the model and write `access.log`, `error.log`, `dns.jsonl`, `events.jsonl` and
/// `load.jsonl` into `out_dir` (created if missing), exactly like a real lab run.
pub fn simulate(cfg: &SimConfig, out_dir: &Path) -> Result<SimSummary> {
    cfg.validate()?;
    std::fs::create_dir_all(out_dir)
        .with_context(|| format!("cannot create {}", out_dir.display()))?;
    let logs = logs::Logs::create(out_dir, cfg)?;
    let done = engine::Engine::new(cfg, Some(logs))
        .run()
        .with_context(|| format!("writing logs into {}", out_dir.display()))?;
    Ok(done.summary)
}

/// Run the model without writing anything (counting only): the benchmark and `sim predict` mode.
pub fn simulate_counts(cfg: &SimConfig) -> Result<SimSummary> {
    cfg.validate()?;
    Ok(engine::Engine::new(cfg, None).run()?.summary)
}

/// The times of nginx's DNS queries for `name` (µs after the load start, in order, one per
/// query even when it asks A and AAAA), observed in memory without writing anything: what a
/// timeline event aligned on a re-query needs.
pub fn query_times(cfg: &SimConfig, name: &str) -> Result<Vec<i64>> {
    cfg.validate()?;
    let mut e = engine::Engine::new(cfg, None);
    e.observe_queries();
    let mut out: Vec<i64> = e
        .run()?
        .queries
        .into_iter()
        .filter(|(_, n)| n == name)
        .map(|(t, _)| t - cfg.epoch_us)
        .collect();
    out.dedup();
    Ok(out)
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}
