//! Production questions answered by simulation: "how many `no live upstreams` per day at this
//! rate, with a swap every N seconds and this first-try failure rate — and what would each
//! mitigation change?"
//!
//! Each variant is simulated for `sample` of traffic (counting only, no logs) and the counts
//! are scaled to a day, with a Poisson 95 % interval on the simulated count (Byar's
//! approximation), scaled the same way. The scaling assumes the traffic is stationary.
//!
//! ```
//! use resolvelab_sim::nginx::predict::{PredictInput, predict};
//! use resolvelab_sim::nginx::Us;
//! let mut p = PredictInput::default();
//! p.rps = 300.0;
//! p.sample = Us::s(120);
//! let rows = predict(&p).unwrap();
//! assert_eq!(rows[0].variant, "baseline");
//! assert!(rows.iter().any(|r| r.variant == "per-dc" && r.total.count == 0));
//! ```

use super::{
    DnsMode, DnsPhase, FaultKind, FaultWindow, Latency, NluClass, RetryShim, ServerLine, SimConfig,
    SimSummary, Us, simulate_counts,
};
use anyhow::{Result, bail};
use serde::Serialize;

/// The production facts a prediction starts from.
#[derive(Debug, Clone, PartialEq)]
pub struct PredictInput {
    /// Requests per second at the proxy (one upstream group).
    pub rps: f64,
    /// Time between peer-list swaps (the GSLB answer changes at every requery; the requery
    /// period is `valid + 1 s`, so `valid = swap_interval - 1 s`).
    pub swap_interval: Us,
    /// Probability that a try on a cached keep-alive connection fails (reclaim race).
    pub first_try_failure: f64,
    /// Detection delay of such a failure (uniform between the two).
    pub failure_delay: (Us, Us),
    /// Latency of successful tries.
    pub latency: Latency,
    /// Upstream keep-alive connections (per worker, like nginx's `keepalive`).
    pub keepalive: u32,
    /// nginx worker processes (`worker_processes`; `auto` is one per core). Only a worker that
    /// does not resolve can lose a first-pick race, and each has its own keep-alive cache.
    pub workers: u32,
    /// The µs window between snapshot and first pick.
    pub first_pick_window_us: f64,
    /// `valid` of the "larger valid" mitigation.
    pub larger_valid: Us,
    /// Factor on `first_try_failure` of the "keep-alive hygiene" mitigation.
    pub hygiene_factor: f64,
    /// Simulated traffic per variant.
    pub sample: Us,
    /// RNG seed.
    pub seed: u64,
    /// nginx instances sharing `rps` (a fleet behind an L4 balancer): each is simulated at
    /// `rps / instances` with its own seed — its own re-query phase and races — and the fleet's
    /// counts are their sum.
    pub instances: u32,
}

impl Default for PredictInput {
    fn default() -> Self {
        PredictInput {
            rps: 8000.0,
            swap_interval: Us::s(6),
            first_try_failure: 0.001,
            failure_delay: (Us(0), Us::ms(50)),
            latency: Latency::Lognormal {
                median: Us::ms(5),
                sigma: 0.6,
            },
            keepalive: 32,
            workers: 4,
            first_pick_window_us: super::FIRST_PICK_WINDOW_US,
            larger_valid: Us::s(30),
            hygiene_factor: 0.1,
            sample: Us::s(3600),
            seed: 1,
            instances: 1,
        }
    }
}

/// A count in the sample, scaled to a day, with its 95 % interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PerDay {
    /// Count in the simulated sample.
    pub count: u64,
    /// Expected per day.
    pub per_day: f64,
    /// Lower 95 % bound per day.
    pub lo: f64,
    /// Upper 95 % bound per day.
    pub hi: f64,
}

impl PerDay {
    /// `count` in the sample, scaled to a day by `scale`.
    pub(crate) fn new(count: u64, scale: f64) -> PerDay {
        let (lo, hi) = poisson_95(count);
        PerDay {
            count,
            per_day: count as f64 * scale,
            lo: lo * scale,
            hi: hi * scale,
        }
    }
}

/// One variant's prediction.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Prediction {
    /// `baseline`, `per-dc`, `retry-shim`, `max-fails-0`, `larger-valid`, `keepalive-hygiene`.
    pub variant: String,
    /// What the variant changes.
    pub change: String,
    /// Simulated requests.
    pub requests: u64,
    /// Swaps in the sample.
    pub swaps: u64,
    /// Client-visible NLU per day, all classes.
    pub total: PerDay,
    /// Per class (class id → per day).
    pub classes: Vec<(String, PerDay)>,
    /// Client-visible 502s that were not NLU.
    pub upstream_failures: PerDay,
    /// nginx instances the counts are summed over.
    pub instances: u32,
    /// With several instances: each one's NLU per day, lowest, median and highest.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_instance: Option<Spread>,
}

/// How a count spreads over a fleet's instances (per day).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Spread {
    /// The lowest instance's.
    pub min: f64,
    /// The median instance's.
    pub median: f64,
    /// The highest instance's.
    pub max: f64,
}

impl Spread {
    /// The spread of `v` (not empty).
    pub fn of(mut v: Vec<f64>) -> Spread {
        v.sort_by(f64::total_cmp);
        Spread {
            min: v[0],
            median: v[v.len() / 2],
            max: v[v.len() - 1],
        }
    }
}

/// Poisson 95 % interval for an observed count (Byar's approximation; exact at 0).
pub fn poisson_95(k: u64) -> (f64, f64) {
    let z = 1.959_963_985;
    let kf = k as f64;
    let lo = if k == 0 {
        0.0
    } else {
        kf * (1.0 - 1.0 / (9.0 * kf) - z / (3.0 * kf.sqrt())).powi(3)
    };
    let k1 = kf + 1.0;
    let hi = k1 * (1.0 - 1.0 / (9.0 * k1) + z / (3.0 * k1.sqrt())).powi(3);
    (lo, hi)
}

const NAME: &str = "gslb.example.internal";

/// The baseline model of the production setup.
pub fn baseline_config(p: &PredictInput) -> SimConfig {
    let mut cfg = SimConfig::new(vec![ServerLine::resolve(NAME, 8080)]);
    cfg.seed = p.seed;
    cfg.rps = p.rps;
    cfg.poisson = true;
    cfg.duration = p.sample;
    cfg.valid = Some(Us((p.swap_interval.0 - 1_000_000).max(1_000_000)));
    cfg.keepalive = p.keepalive;
    cfg.workers = p.workers.max(1);
    cfg.latency = p.latency.clone();
    cfg.first_pick_window_us = p.first_pick_window_us;
    cfg.client_connections = 256;
    cfg.dns = vec![DnsPhase {
        at: Us(0),
        name: NAME.into(),
        mode: DnsMode::Alternate(vec![[127, 0, 0, 20].into(), [127, 0, 0, 30].into()]),
        aaaa: Vec::new(),
    }];
    cfg.faults = vec![first_try_failures(&cfg, p)];
    cfg
}

/// Production's everyday first-try failures on reused connections (`p.first_try_failure`,
/// seen after `p.failure_delay`), over all of `cfg`'s warm-up and `p.sample`: the churn a
/// prediction plays, on the baseline model or a user's own upstream (`verify --per-day`).
pub fn first_try_failures(cfg: &SimConfig, p: &PredictInput) -> FaultWindow {
    FaultWindow {
        start: Us(-cfg.warmup.0),
        end: Us(p.sample.0 + 3_600_000_000),
        target: None,
        fault: FaultKind::Stale {
            p: p.first_try_failure,
            delay_min: p.failure_delay.0,
            delay_max: p.failure_delay.1,
        },
    }
}

/// Every variant's config: baseline first, then one mitigation each.
pub fn variants(p: &PredictInput) -> Vec<(String, String, SimConfig)> {
    let base = baseline_config(p);
    let what = format!(
        "one name, answer changes every {} s, first-try failure {}",
        p.swap_interval.0 as f64 / 1e6,
        p.first_try_failure
    );
    variants_of(base, what, p)
}

/// The mitigations applied to any base config (a user's own `SimConfig` for `--config`):
/// per-DC names (every DNS phase answers its first address only), the retry shim,
/// `max_fails=0` on every server line, a larger `valid`, and keep-alive hygiene (reclaim and
/// stale and premature-close probabilities × `hygiene_factor`).
pub fn variants_of(
    base: SimConfig,
    what: String,
    p: &PredictInput,
) -> Vec<(String, String, SimConfig)> {
    let mut out = vec![("baseline".to_string(), what, base.clone())];
    let mut perdc = base.clone();
    for ph in &mut perdc.dns {
        let first = match &ph.mode {
            DnsMode::Static(v) | DnsMode::Alternate(v) => v.first().copied(),
            DnsMode::Multi { base, .. } => Some(*base),
            _ => None,
        };
        if let Some(ip) = first {
            ph.mode = DnsMode::Static(vec![ip]);
        }
    }
    out.push((
        "per-dc".into(),
        "fixed per-DC name: the answer never changes".into(),
        perdc,
    ));
    let mut shim = base.clone();
    shim.retry_shim = Some(RetryShim::default());
    out.push((
        "retry-shim".into(),
        "error_page 502 = @retry_once (GET/HEAD/OPTIONS)".into(),
        shim,
    ));
    let mut mf0 = base.clone();
    for s in &mut mf0.servers {
        s.max_fails = 0;
    }
    out.push((
        "max-fails-0".into(),
        "max_fails=0 on every server line".into(),
        mf0,
    ));
    let mut lv = base.clone();
    lv.valid = Some(p.larger_valid);
    out.push((
        "larger-valid".into(),
        format!("resolver valid={}s", p.larger_valid.0 as f64 / 1e6),
        lv,
    ));
    let mut hy = base;
    for f in &mut hy.faults {
        match &mut f.fault {
            FaultKind::Reclaim { p: fp, .. }
            | FaultKind::Stale { p: fp, .. }
            | FaultKind::Fail { p: fp } => *fp *= p.hygiene_factor,
            _ => {}
        }
    }
    out.push((
        "keepalive-hygiene".into(),
        format!(
            "upstream keepalive_timeout below the backend's: first-try failures ×{}",
            p.hygiene_factor
        ),
        hy,
    ));
    out
}

/// A variant's prediction from its instances' summaries (one, or a fleet's).
fn prediction(name: String, change: String, ss: &[SimSummary], sample: Us) -> Prediction {
    let scale = 86_400e6 / sample.0 as f64;
    let sum = |f: &dyn Fn(&SimSummary) -> u64| ss.iter().map(f).sum::<u64>();
    let classes = ss[0]
        .nlu
        .iter()
        .map(|(c, _): (NluClass, u64)| {
            let n = sum(&|s| s.nlu.get(c));
            (c.id().to_string(), PerDay::new(n, scale))
        })
        .collect();
    Prediction {
        variant: name,
        change,
        requests: sum(&|s| s.requests),
        swaps: sum(&|s| s.swaps),
        total: PerDay::new(sum(&|s| s.nlu_total()), scale),
        classes,
        upstream_failures: PerDay::new(sum(&|s| s.upstream_failures), scale),
        instances: ss.len() as u32,
        per_instance: (ss.len() > 1)
            .then(|| Spread::of(ss.iter().map(|s| s.nlu_total() as f64 * scale).collect())),
    }
}

/// Instance `k`'s seed: the fleet's instances race independently; instance 0 keeps the
/// variant's seed, so one instance is the single-proxy prediction.
pub fn instance_seed(seed: u64, k: u32) -> u64 {
    seed.wrapping_add(u64::from(k).wrapping_mul(0x9e37_79b9_7f4a_7c15))
}

/// `cfg` played by `n` instances, each at `rps / n` with its own seed.
fn fleet_counts(cfg: &SimConfig, n: u32) -> Result<Vec<SimSummary>> {
    (0..n.max(1))
        .map(|k| {
            let mut c = cfg.clone();
            c.rps = cfg.rps / f64::from(n.max(1));
            c.seed = instance_seed(cfg.seed, k);
            simulate_counts(&c)
        })
        .collect()
}

/// Simulate every variant (in parallel threads) and scale to a day.
pub fn predict(p: &PredictInput) -> Result<Vec<Prediction>> {
    check(p)?;
    run_variants(variants(p), p)
}

/// Like [`predict`], with the user's own config as the baseline (its `rps`, timeline and faults;
/// `duration` is replaced by `sample`).
pub fn predict_from(base: &SimConfig, p: &PredictInput) -> Result<Vec<Prediction>> {
    base.validate()?;
    if p.sample.0 < 1_000_000 {
        bail!("--sample must be at least 1s");
    }
    let mut base = base.clone();
    base.duration = p.sample;
    if !(1..=MAX_INSTANCES).contains(&p.instances) {
        bail!("--instances must be within 1..={MAX_INSTANCES}");
    }
    let what = format!("your config at {} rps", base.rps);
    run_variants(variants_of(base, what, p), p)
}

fn check(p: &PredictInput) -> Result<()> {
    if p.rps.is_nan() || p.rps <= 0.0 {
        bail!("--rps must be positive");
    }
    if p.swap_interval.0 < 2_000_000 {
        bail!(
            "--swap-interval must be at least 2s (the requery period is valid + 1 s, valid ≥ 1 s)"
        );
    }
    if !(0.0..=1.0).contains(&p.first_try_failure) {
        bail!("--first-try-failure must be a probability within 0..=1");
    }
    if p.sample.0 < 1_000_000 {
        bail!("--sample must be at least 1s");
    }
    if !(1..=MAX_INSTANCES).contains(&p.instances) {
        bail!("--instances must be within 1..={MAX_INSTANCES}");
    }
    Ok(())
}

/// Most instances a fleet prediction simulates (each one is a simulation of `sample`).
pub const MAX_INSTANCES: u32 = 1000;

fn run_variants(vs: Vec<(String, String, SimConfig)>, p: &PredictInput) -> Result<Vec<Prediction>> {
    let n = p.instances;
    let results = in_threads(vs.iter().map(|(_, _, cfg)| move || fleet_counts(cfg, n)))?;
    Ok(vs
        .into_iter()
        .zip(results)
        .map(|((name, change, _), ss)| prediction(name, change, &ss, p.sample))
        .collect())
}

/// Run each job on a thread of its own; the results in the jobs' order, or the first error.
pub(crate) fn in_threads<T: Send, F: FnOnce() -> Result<T> + Send>(
    jobs: impl IntoIterator<Item = F>,
) -> Result<Vec<T>> {
    std::thread::scope(|scope| {
        let handles: Vec<_> = jobs.into_iter().map(|j| scope.spawn(j)).collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("a simulation thread panicked")))
            })
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fleet_is_the_sum_of_its_instances_each_at_its_share() {
        let p = PredictInput {
            rps: 400.0,
            sample: Us::s(60),
            first_try_failure: 0.3,
            instances: 4,
            ..PredictInput::default()
        };
        let rows = predict(&p).unwrap();
        let base = &rows[0];
        assert_eq!((base.variant.as_str(), base.instances), ("baseline", 4));
        // The same four simulations by hand: rps / 4 each, instance k's seed.
        let cfg = baseline_config(&p);
        let mut by_hand = (0u64, 0u64, Vec::new());
        for k in 0..4 {
            let mut c = cfg.clone();
            c.rps = 100.0;
            c.seed = instance_seed(p.seed, k);
            let s = simulate_counts(&c).unwrap();
            by_hand.0 += s.requests;
            by_hand.1 += s.nlu_total();
            by_hand.2.push(s.nlu_total());
        }
        assert_eq!((base.requests, base.total.count), (by_hand.0, by_hand.1));
        assert!(
            base.total.count > 0,
            "first-try failures at 0.3 race the swaps"
        );
        let sp = base.per_instance.unwrap();
        let day = 86_400.0 / 60.0;
        let (lo, hi) = (
            *by_hand.2.iter().min().unwrap() as f64 * day,
            *by_hand.2.iter().max().unwrap() as f64 * day,
        );
        assert_eq!((sp.min, sp.max), (lo, hi));
        assert!(sp.min <= sp.median && sp.median <= sp.max);
        // Per-DC names remove the race on every instance.
        assert_eq!(rows[1].total.count, 0);
        // One instance is the single-proxy prediction: seed unchanged, no spread.
        let one = predict(&PredictInput {
            instances: 1,
            ..p.clone()
        })
        .unwrap();
        let c = simulate_counts(&cfg).unwrap();
        assert_eq!(one[0].total.count, c.nlu_total());
        assert!(one[0].per_instance.is_none());
        assert!(predict(&PredictInput { instances: 0, ..p }).is_err());
    }

    #[test]
    fn poisson_interval_brackets_the_count() {
        assert_eq!(poisson_95(0).0, 0.0);
        assert!((poisson_95(0).1 - 3.689).abs() < 0.05); // exact: 3.689
        let (lo, hi) = poisson_95(100);
        assert!(
            (lo - 81.4).abs() < 0.5 && (hi - 121.6).abs() < 0.5,
            "{lo} {hi}"
        );
    }
}
