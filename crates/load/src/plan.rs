//! Rate plans (`--rate`) and the open-loop schedule they produce.
//!
//! A plan is `max`, a constant rate (`500`), or a comma-separated list of stages
//! (`100@10s,500@30s`, `0..1000@60s` for a linear ramp, `0@5s` for a pause). Request `k` is
//! scheduled at the instant `t` where the integral of the rate reaches `k`, so stages join
//! without gaps or bursts and a ramp spreads its requests exactly along the line.

use std::fmt;
use std::time::Duration;

/// One stage of a plan: a rate that goes linearly from `from` to `to` requests/s over `dur`
/// (`from == to` is a constant rate). `dur == None` is an open-ended constant stage that only
/// `--duration` or `--requests` bounds; it can only be the last stage.
#[derive(Debug, Clone, PartialEq)]
pub struct Stage {
    /// Rate at the start of the stage, requests per second.
    pub from: f64,
    /// Rate at the end of the stage, requests per second.
    pub to: f64,
    /// Length of the stage; `None` for an open-ended last stage.
    pub dur: Option<Duration>,
}

/// What `--rate` says.
#[derive(Debug, Clone, PartialEq)]
pub enum RatePlan {
    /// Closed loop, as fast as the connections allow (`--rate max`): a throughput test.
    Max,
    /// An open-loop schedule made of stages.
    Stages(Vec<Stage>),
}

fn parse_rate(s: &str, whole: &str) -> Result<f64, String> {
    let t = s.trim().trim_end_matches("/s");
    let v: f64 = t.parse().map_err(|_| {
        format!("--rate `{whole}`: `{s}` is not a rate; write e.g. `500`, `100@10s,500@30s` or `0..1000@60s`")
    })?;
    if !v.is_finite() || v < 0.0 {
        return Err(format!(
            "--rate `{whole}`: rate `{s}` must be a non-negative number"
        ));
    }
    if v > 10_000_000.0 {
        return Err(format!(
            "--rate `{whole}`: rate `{s}` is above 10,000,000 requests/s; use `max` for a throughput test"
        ));
    }
    Ok(v)
}

impl RatePlan {
    /// Parse `max`, `500`, `100@10s,500@30s` or `0..1000@60s` (stages may be mixed).
    pub fn parse(s: &str) -> Result<RatePlan, String> {
        let whole = s.trim();
        if whole.eq_ignore_ascii_case("max") {
            return Ok(RatePlan::Max);
        }
        if whole.is_empty() {
            return Err("--rate is empty; write e.g. `500` or `100@10s,500@30s`".into());
        }
        let items: Vec<&str> = whole.split(',').collect();
        let mut stages = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let (rates, dur) = match item.split_once('@') {
                Some((r, d)) => (
                    r,
                    Some(
                        resolvelab_core::dur::parse(d)
                            .map_err(|e| format!("--rate `{whole}`: stage `{item}`: {e}"))?,
                    ),
                ),
                None => (*item, None),
            };
            if dur.is_none() && i + 1 != items.len() {
                return Err(format!(
                    "--rate `{whole}`: stage `{item}` needs a duration (`{item}@10s`); only the last stage may be open-ended"
                ));
            }
            let (from, to) = match rates.split_once("..") {
                Some((a, b)) => (parse_rate(a, whole)?, parse_rate(b, whole)?),
                None => {
                    let r = parse_rate(rates, whole)?;
                    (r, r)
                }
            };
            if dur.is_none() && from != to {
                return Err(format!(
                    "--rate `{whole}`: the ramp `{item}` needs a duration, e.g. `{item}@30s`"
                ));
            }
            if dur == Some(Duration::ZERO) {
                return Err(format!(
                    "--rate `{whole}`: stage `{item}` has a zero duration"
                ));
            }
            stages.push(Stage { from, to, dur });
        }
        Ok(RatePlan::Stages(stages))
    }

    /// The plan's own length, when every stage has a duration.
    pub fn length(&self) -> Option<Duration> {
        match self {
            RatePlan::Max => None,
            RatePlan::Stages(st) => st.iter().map(|s| s.dur).sum(),
        }
    }

    /// Is this an open-loop plan (not `max`)?
    pub fn is_open_loop(&self) -> bool {
        matches!(self, RatePlan::Stages(_))
    }

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

impl fmt::Display for RatePlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RatePlan::Max => f.write_str("max"),
            RatePlan::Stages(st) => {
                for (i, s) in st.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    if s.from == s.to {
                        write!(f, "{}", s.from)?;
                    } else {
                        write!(f, "{}..{}", s.from, s.to)?;
                    }
                    if let Some(d) = s.dur {
                        write!(f, "@{}", resolvelab_core::dur::format(d))?;
                    }
                }
                Ok(())
            }
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
    fn errors_are_explained() {
        assert!(RatePlan::parse("abc").unwrap_err().contains("not a rate"));
        assert!(
            RatePlan::parse("100,200@1s")
                .unwrap_err()
                .contains("needs a duration")
        );
        assert!(RatePlan::parse("0..100").unwrap_err().contains("ramp"));
        assert!(RatePlan::parse("-5").unwrap_err().contains("non-negative"));
        assert_eq!(RatePlan::parse("MAX").unwrap(), RatePlan::Max);
        assert_eq!(
            RatePlan::parse("100@10s,0..50@5s").unwrap().to_string(),
            "100@10s,0..50@5s"
        );
        let open = RatePlan::parse("100")
            .unwrap()
            .schedule(None, None)
            .unwrap();
        assert!(!open.is_bounded());
    }
}
