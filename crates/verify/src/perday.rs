//! `verify --per-day RPS`: what the model predicts a day at your traffic, for each DNS-fed
//! upstream as your configuration writes it.
//!
//! The lab's events are short and intense (30 % of reused connections reclaimed) so that a
//! minute shows the mechanism; a day of production is long and mild. This plays the target on
//! the model ([`crate::model`]: its server lines, `max_fails`, `valid=`, keep-alive, retries,
//! shims) under production's churn — the GSLB's answer alternating at every re-query, a small
//! first-try failure probability on reused connections — for a sample of traffic at `rps`, and
//! scales the counts to a day with a 95 % interval, beside what each mitigation would change
//! (`sim predict --config`'s variants).

use crate::events::{self, Event, Settings};
use crate::find::Target;
use crate::rewrite::LabConfig;
use resolvelab_lint::load::Config;
use resolvelab_sim::nginx::Us;
use resolvelab_sim::nginx::predict::{PredictInput, Prediction, first_try_failures, predict_from};

/// The traffic a day is predicted at.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Traffic {
    /// Requests per second through the upstream.
    pub rps: f64,
    /// Probability that a try on a reused keep-alive connection fails (production's reclaim
    /// race; `sim predict`'s default 0.001).
    pub first_try_failure: f64,
    /// Traffic simulated per variant.
    pub sample: Us,
}

impl Default for Traffic {
    fn default() -> Self {
        Traffic {
            rps: 1000.0,
            first_try_failure: 0.001,
            sample: Us::s(600),
        }
    }
}

/// The target's day at `t` and each mitigation's, or why the model cannot play it.
pub fn predict(
    cfg: &Config,
    target: &Target,
    lab: &LabConfig,
    s: &Settings,
    t: &Traffic,
) -> Result<Vec<Prediction>, String> {
    if !target.asks_at_run_time() {
        return Err(
            "nginx asks for its names only at start and reload: no answer change reaches it while it runs (see the move and reload-nxdomain events)".into(),
        );
    }
    let text = events::model_scenario(cfg, target, lab, Event::SwapRace, s)?;
    let sc = resolvelab_scenario::Scenario::from_toml(&text, "verify --per-day")
        .map_err(|e| format!("{e:#}"))?;
    let mut base =
        resolvelab_lab::simrun::sim_config(&sc, 1, (0, 0)).map_err(|e| format!("{e:#}"))?;
    base.rps = t.rps;
    base.poisson = true;
    base.duration = t.sample;
    let input = PredictInput {
        rps: t.rps,
        first_try_failure: t.first_try_failure,
        sample: t.sample,
        ..PredictInput::default()
    };
    // Production's first-try failures instead of the lab event's 30 % reclaim.
    base.faults = vec![first_try_failures(&base, &input)];
    predict_from(&base, &input).map_err(|e| format!("{e:#}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Request, prepare};

    #[test]
    fn a_name_asked_only_at_start_has_no_day_of_answer_changes() {
        let conf = "http {\n upstream be { server api.example.com:8080; }\n server { listen 80; location / { proxy_pass http://be; } }\n}\n";
        let cfg = resolvelab_lint::load::load_text("nginx.conf", conf.into(), None).unwrap();
        let plans = prepare(&cfg, &Request::default());
        let lab = plans[0].lab.as_ref().unwrap();
        let s = Settings::default();
        let e = predict(&cfg, &plans[0].target, lab, &s, &Traffic::default()).unwrap_err();
        assert!(e.contains("only at start and reload"), "{e}");
    }
}
