//! Stale addresses per day: "the backend moves N times a day — how many requests does each way
//! of using its name cost?" Each setup is simulated over `samples` moves (each at a random
//! phase of nginx's re-query timer and resolver cache), and the mean per move is scaled to
//! `moves_per_day`, with a Poisson 95 % interval on the simulated count.
//!
//! A move: the name's answer changes from the old address to the new one, and the old address
//! keeps serving for `grace` (a pod's termination grace, a drained VIP), then refuses.
//!
//! ```
//! use resolvelab_sim::nginx::moves::{MovesInput, predict_moves};
//! use resolvelab_sim::nginx::Us;
//! let m = MovesInput { rps: 100.0, moves_per_day: 24.0, samples: 4, ..MovesInput::default() };
//! let rows = predict_moves(&m).unwrap();
//! assert_eq!(rows.len(), 3);
//! // Resolved at start: every request fails until the reload (5 min by default).
//! assert!(rows[0].per_move > rows[2].per_move * 10.0);
//! ```

use super::predict::{PerDay, in_threads};
use super::{
    DnsMode, DnsPhase, FaultKind, FaultWindow, ServerLine, SimConfig, Us, simulate_counts,
};
use anyhow::{Result, bail};
use rand::{RngExt, SeedableRng};
use serde::Serialize;

const NAME: &str = "backend.example.internal";
const OLD: [u8; 4] = [127, 0, 0, 20];
const NEW: [u8; 4] = [127, 0, 0, 30];

/// A user's churn.
#[derive(Debug, Clone, PartialEq)]
pub struct MovesInput {
    /// Requests per second to the backend.
    pub rps: f64,
    /// How often the backend moves.
    pub moves_per_day: f64,
    /// The resolver's `valid=` (cache and re-query period).
    pub valid: Us,
    /// How long the old address keeps serving after the answer changed.
    pub grace: Us,
    /// When someone reloads nginx after a move (the only thing that ends a resolve-once pin).
    pub reload_after: Us,
    /// Moves simulated per setup.
    pub samples: u32,
    /// RNG seed (the phases of the moves).
    pub seed: u64,
    /// nginx instances sharing `rps` (a fleet): a move reaches every instance at once, and each
    /// follows at its own phase of its re-query timer and resolver cache.
    pub instances: u32,
}

impl Default for MovesInput {
    fn default() -> Self {
        MovesInput {
            rps: 300.0,
            moves_per_day: 24.0,
            valid: Us::s(5),
            grace: Us(0),
            reload_after: Us::s(300),
            samples: 16,
            seed: 1,
            instances: 1,
        }
    }
}

/// One setup's cost.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MovePrediction {
    /// `resolve-once`, `per-request`, `resolve`.
    pub setup: String,
    /// The configuration it stands for.
    pub config: String,
    /// Mean failed requests per move.
    pub per_move: f64,
    /// The same as seconds of full outage (failed requests / rps).
    pub outage_s: f64,
    /// Failed requests per day.
    pub per_day: PerDay,
    /// Moves simulated.
    pub samples: u32,
    /// nginx instances the failures are summed over.
    pub instances: u32,
    /// Mean time from a move until the last instance followed (its failures ÷ its rate): the
    /// fleet's recovery; `outage_s` with one instance.
    pub last_followed_s: f64,
}

/// The three behaviours (a `server` line without `resolve` and `proxy_pass http://name` are
/// the same pin: one row).
fn setups(m: &MovesInput) -> Vec<(&'static str, String, ServerLine, bool)> {
    vec![
        (
            "resolve-once",
            format!(
                "`server NAME:PORT;` in an upstream, or `proxy_pass http://NAME:PORT;` — reloaded {} s after each move",
                m.reload_after.0 / 1_000_000
            ),
            ServerLine::fixed(NAME, 8080),
            true,
        ),
        (
            "per-request",
            format!(
                "`set $b NAME; proxy_pass http://$b:PORT;` + `resolver … valid={}s`",
                m.valid.0 / 1_000_000
            ),
            ServerLine {
                per_request: true,
                ..ServerLine::fixed(NAME, 8080)
            },
            false,
        ),
        (
            "resolve",
            format!(
                "`server NAME:PORT resolve;` + `resolver … valid={}s` (nginx >= 1.27.3)",
                m.valid.0 / 1_000_000
            ),
            ServerLine::resolve(NAME, 8080),
            false,
        ),
    ]
}

/// One move at `at` (µs after the load start) under `line`.
fn config(m: &MovesInput, line: ServerLine, reload: bool, at: i64, seed: u64) -> SimConfig {
    let mut cfg = SimConfig::new(vec![line]);
    cfg.seed = seed;
    cfg.rps = m.rps;
    cfg.poisson = true;
    cfg.valid = Some(m.valid);
    cfg.keepalive = 0;
    let static_ = |ip: [u8; 4]| DnsMode::Static(vec![ip.into()]);
    cfg.dns = vec![
        DnsPhase {
            at: Us(0),
            name: NAME.into(),
            mode: static_(OLD),
            aaaa: Vec::new(),
        },
        DnsPhase {
            at: Us(at),
            name: NAME.into(),
            mode: static_(NEW),
            aaaa: Vec::new(),
        },
    ];
    let dark = at + m.grace.0;
    // Long enough for the slowest way to follow, plus the requests in flight.
    let follow = if reload {
        m.reload_after.0
    } else {
        m.valid.0 + 2_000_000
    };
    cfg.duration = Us(dark.max(at + follow) + 2_000_000);
    cfg.faults = vec![FaultWindow {
        start: Us(dark),
        end: Us(cfg.duration.0 + 60_000_000),
        target: Some(format!("{}:8080", std::net::Ipv4Addr::from(OLD))),
        fault: FaultKind::Refuse,
    }];
    if reload {
        cfg.reloads = vec![Us(at + m.reload_after.0)];
    }
    cfg
}

fn check(m: &MovesInput) -> Result<()> {
    if !(m.rps.is_finite() && m.rps > 0.0 && m.rps <= 1e6) {
        bail!("--rps must be above 0 (and at most 1,000,000)");
    }
    if !m.moves_per_day.is_finite() || m.moves_per_day < 0.0 {
        bail!("--moves-per-day must be 0 or more");
    }
    if m.valid.0 < 1_000_000 {
        bail!("--valid must be at least 1s");
    }
    if m.samples == 0 || m.samples > 1000 {
        bail!("--moves must be within 1..=1000");
    }
    if m.reload_after.0 <= 0 || m.reload_after.0 > 86_400_000_000 {
        bail!("--reload-after must be within 1s..24h");
    }
    if !(1..=super::predict::MAX_INSTANCES).contains(&m.instances) {
        bail!(
            "--instances must be within 1..={}",
            super::predict::MAX_INSTANCES
        );
    }
    Ok(())
}

/// Simulate every setup (a thread each) and scale to a day.
pub fn predict_moves(m: &MovesInput) -> Result<Vec<MovePrediction>> {
    check(m)?;
    // The same move phases for every setup: for each move, each instance's phase uniform over
    // one re-query period, after a warm-up that fills the resolver cache.
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(m.seed ^ 0x6d6f_7665);
    let period = m.valid.0 + 1_000_000;
    let phases: Vec<Vec<i64>> = (0..m.samples)
        .map(|_| {
            (0..m.instances)
                .map(|_| period + rng.random_range(0..period))
                .collect()
        })
        .collect();
    let phases = &phases;
    in_threads(setups(m).into_iter().map(|(setup, text, line, reload)| {
        move || -> Result<MovePrediction> {
            let share = MovesInput {
                rps: m.rps / f64::from(m.instances),
                ..m.clone()
            };
            let (mut failed, mut last) = (0u64, 0.0);
            for (k, move_) in phases.iter().enumerate() {
                let mut worst = 0u64;
                for (i, &at) in move_.iter().enumerate() {
                    let seed = super::predict::instance_seed(m.seed + k as u64, i as u32);
                    let s = simulate_counts(&config(&share, line.clone(), reload, at, seed))?;
                    failed += s.status_502 + s.status_504;
                    worst = worst.max(s.status_502 + s.status_504);
                }
                last += worst as f64 / share.rps;
            }
            let n = phases.len() as f64;
            let per_move = failed as f64 / n;
            Ok(MovePrediction {
                setup: setup.to_string(),
                config: text,
                per_move,
                outage_s: per_move / m.rps,
                // Scaled from the simulated moves to the day's.
                per_day: PerDay::new(failed, m.moves_per_day / n),
                samples: phases.len() as u32,
                instances: m.instances,
                last_followed_s: last / n,
            })
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_setup_costs_what_its_way_of_resolving_allows() {
        let m = MovesInput {
            rps: 200.0,
            moves_per_day: 10.0,
            reload_after: Us::s(60),
            samples: 8,
            ..MovesInput::default()
        };
        let rows = predict_moves(&m).unwrap();
        let by = |s: &str| rows.iter().find(|r| r.setup == s).unwrap();
        // The pin fails every request until the reload: 60 s at 200 rps.
        let once = by("resolve-once");
        assert!((once.outage_s - 60.0).abs() < 1.5, "{once:?}");
        // Per request: within the cache's life (valid 5 s, whole seconds); resolve: within
        // valid + 1 s. On average about half of it.
        for s in ["per-request", "resolve"] {
            let r = by(s);
            assert!(r.outage_s > 0.5 && r.outage_s <= 6.5, "{r:?}");
        }
        assert!((once.per_day.per_day - once.per_move * 10.0).abs() < 1e-6);
        // A grace longer than any setup's follow time costs nothing but the pin.
        let graced = predict_moves(&MovesInput {
            grace: Us::s(8),
            ..m.clone()
        })
        .unwrap();
        assert_eq!(graced[1].per_move, 0.0, "{:?}", graced[1]);
        assert_eq!(graced[2].per_move, 0.0, "{:?}", graced[2]);
        assert!(graced[0].outage_s > 50.0);
    }

    #[test]
    fn a_fleet_follows_a_move_at_its_instances_phases() {
        let m = MovesInput {
            rps: 400.0,
            moves_per_day: 10.0,
            reload_after: Us::s(30),
            samples: 6,
            instances: 4,
            ..MovesInput::default()
        };
        let rows = predict_moves(&m).unwrap();
        let by = |s: &str| rows.iter().find(|r| r.setup == s).unwrap();
        // Reloaded at once everywhere: every instance fails until then.
        let once = by("resolve-once");
        assert!((once.outage_s - 30.0).abs() < 1.5, "{once:?}");
        assert!(
            (once.last_followed_s - once.outage_s).abs() < 1.5,
            "{once:?}"
        );
        // resolve: each instance within valid + 1 s at its own phase; the last of four later
        // than the mean, never later than one period.
        for s in ["per-request", "resolve"] {
            let r = by(s);
            assert_eq!(r.instances, 4);
            assert!(r.outage_s > 0.5 && r.outage_s <= 6.5, "{r:?}");
            assert!(
                r.last_followed_s > r.outage_s && r.last_followed_s <= 6.5,
                "{r:?}"
            );
        }
        assert!(predict_moves(&MovesInput { instances: 0, ..m }).is_err());
    }

    #[test]
    fn bad_inputs_are_refused() {
        for m in [
            MovesInput {
                rps: 0.0,
                ..MovesInput::default()
            },
            MovesInput {
                valid: Us(0),
                ..MovesInput::default()
            },
            MovesInput {
                samples: 0,
                ..MovesInput::default()
            },
            MovesInput {
                moves_per_day: -1.0,
                ..MovesInput::default()
            },
        ] {
            assert!(predict_moves(&m).is_err(), "{m:?}");
        }
    }
}
