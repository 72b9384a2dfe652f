//! The open-loop schedule of a rate plan ([`RatePlan`]). Request `k` is scheduled at the instant
//! `t` where the integral of the rate reaches `k`, so stages join without gaps or bursts and a
//! ramp spreads its requests exactly along the line. It lives beside the plan, not in the load
//! generator, because a scenario counts its planned requests before anything runs.
//!
//! ```
//! use resolvelab_core::spec::rate::RatePlan;
//! use std::time::Duration;
//! let plan = RatePlan::parse("100@1s,0..200@2s").unwrap();
//! assert_eq!(plan.schedule(None, None).unwrap().planned(), Some(300));
//! ```

use super::rate::{RatePlan, Stage};
use std::time::Duration;

impl RatePlan {
    /// The schedule of this plan, capped by `duration` and `requests` (whichever comes first).
    /// `None` for `max`, which has no schedule.
    pub fn schedule(&self, duration: Option<Duration>, requests: Option<u64>) -> Option<Schedule> {
        match self {
            RatePlan::Max => None,
            RatePlan::Stages(st) => Some(Schedule {
                stages: st.clone(),
                stage: 0,
                stage_t0: 0.0,
                stage_n0: 0.0,
                k: 0,
                cap_s: duration.map(|d| d.as_secs_f64()),
                requests,
            }),
        }
    }
}

/// The open-loop schedule: an iterator of `(seq, offset from the start)`, finite when the plan,
/// `--duration` or `--requests` bounds it.
#[derive(Debug, Clone)]
pub struct Schedule {
    stages: Vec<Stage>,
    stage: usize,
    stage_t0: f64,
    stage_n0: f64,
    k: u64,
    cap_s: Option<f64>,
    requests: Option<u64>,
}

impl Schedule {
    /// Is the schedule bounded (will the iterator end)?
    pub fn is_bounded(&self) -> bool {
        self.requests.is_some()
            || self.cap_s.is_some()
            || self.stages.last().is_some_and(|s| s.dur.is_some())
    }

    /// Number of requests the schedule will produce (walks a copy; cheap for lab-sized runs).
    pub fn planned(&self) -> Option<u64> {
        if !self.is_bounded() {
            return None;
        }
        // Closed form per stage instead of iterating millions of points.
        let mut total = 0.0f64;
        let mut t = 0.0f64;
        for s in &self.stages {
            let d = match (s.dur, self.cap_s) {
                (Some(d), Some(c)) => d.as_secs_f64().min((c - t).max(0.0)),
                (Some(d), None) => d.as_secs_f64(),
                (None, Some(c)) => (c - t).max(0.0),
                (None, None) => return self.requests,
            };
            let full = s.dur.map(|x| x.as_secs_f64()).unwrap_or(d);
            // Area under the (possibly truncated) ramp.
            let rate_at_end = s.from + (s.to - s.from) * if full > 0.0 { d / full } else { 0.0 };
            total += (s.from + rate_at_end) / 2.0 * d;
            t += d;
        }
        // Requests sit at integral = 0, 1, 2, …, strictly before the end.
        let n = if total > 0.0 {
            (total - 1e-9).ceil().max(0.0) as u64
        } else {
            0
        };
        Some(match self.requests {
            Some(r) => r.min(n),
            None => n,
        })
    }
}

impl Iterator for Schedule {
    type Item = (u64, Duration);

    fn next(&mut self) -> Option<(u64, Duration)> {
        if self.requests.is_some_and(|r| self.k >= r) {
            return None;
        }
        let k = self.k as f64;
        loop {
            let s = self.stages.get(self.stage)?;
            let d = s.dur.map(|d| d.as_secs_f64());
            let count = d.map(|d| (s.from + s.to) / 2.0 * d);
            if let Some(c) = count
                && k >= self.stage_n0 + c - 1e-9
            {
                self.stage_t0 += d.unwrap_or(0.0);
                self.stage_n0 += c;
                self.stage += 1;
                continue;
            }
            let need = k - self.stage_n0;
            let tau = match d {
                Some(d) if s.from != s.to => {
                    // N(τ) = a τ + (b − a) τ² / 2d; solve N(τ) = need for τ ≥ 0.
                    let slope = (s.to - s.from) / d;
                    let disc = (s.from * s.from + 2.0 * slope * need).max(0.0);
                    (disc.sqrt() - s.from) / slope
                }
                _ => {
                    if s.from <= 0.0 {
                        // An open-ended zero rate never schedules anything.
                        return None;
                    }
                    need / s.from
                }
            };
            let t = self.stage_t0 + tau.max(0.0);
            if self.cap_s.is_some_and(|c| t >= c) {
                return None;
            }
            self.k += 1;
            return Some((self.k - 1, Duration::from_secs_f64(t)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offsets(p: &str, d: Option<Duration>, n: Option<u64>) -> Vec<f64> {
        RatePlan::parse(p)
            .unwrap()
            .schedule(d, n)
            .unwrap()
            .map(|(_, t)| t.as_secs_f64())
            .collect()
    }

    #[test]
    fn constant_rate_with_duration() {
        let v = offsets("100", Some(Duration::from_secs(2)), None);
        assert_eq!(v.len(), 200);
        assert!((v[1] - 0.01).abs() < 1e-9);
        assert!((v[199] - 1.99).abs() < 1e-9);
        let s = RatePlan::parse("100")
            .unwrap()
            .schedule(Some(Duration::from_secs(2)), None)
            .unwrap();
        assert_eq!(s.planned(), Some(200));
    }

    #[test]
    fn requests_cap() {
        let v = offsets("1000", None, Some(37));
        assert_eq!(v.len(), 37);
        let v = offsets("10@1s", None, Some(1000));
        assert_eq!(v.len(), 10);
    }

    #[test]
    fn steps_join_without_gap() {
        let v = offsets("10@1s,100@1s", None, None);
        assert_eq!(v.len(), 110);
        // The first stage at 10 rps, then 100 rps starting exactly at 1 s.
        assert!((v[9] - 0.9).abs() < 1e-9);
        assert!((v[10] - 1.0).abs() < 1e-9);
        assert!((v[11] - 1.01).abs() < 1e-9);
        let s = RatePlan::parse("10@1s,100@1s")
            .unwrap()
            .schedule(None, None)
            .unwrap();
        assert_eq!(s.planned(), Some(110));
    }

    #[test]
    fn linear_ramp() {
        // 0 → 200 rps over 2 s: 200 requests, the per-second counts grow linearly.
        let v = offsets("0..200@2s", None, None);
        assert_eq!(v.len(), 200);
        let first = v.iter().filter(|t| **t < 1.0).count();
        let second = v.iter().filter(|t| **t >= 1.0).count();
        assert_eq!(first, 50);
        assert_eq!(second, 150);
        assert!(v.windows(2).all(|w| w[1] > w[0]));
    }

    #[test]
    fn pause_and_cap() {
        let v = offsets("10@1s,0@1s,10@1s", None, None);
        assert_eq!(v.len(), 20);
        assert!(v.iter().all(|t| !(1.0..2.0).contains(t)));
        let v = offsets("10@1s,0@1s,10@1s", Some(Duration::from_millis(1500)), None);
        assert_eq!(v.len(), 10);
    }

    #[test]
    fn an_open_ended_plan_is_unbounded() {
        let open = RatePlan::parse("100")
            .unwrap()
            .schedule(None, None)
            .unwrap();
        assert!(!open.is_bounded());
    }
}
