//! Rate plans: `max`, a constant rate (`500`), or comma-separated stages (`100@10s,500@30s`,
//! `0..1000@60s` for a linear ramp, `0@5s` for a pause). The load generator turns a plan into
//! its open-loop schedule; scenarios scale it for quick runs.
//!
//! ```
//! use resolvelab_core::spec::rate::RatePlan;
//! let p = RatePlan::parse("100@10s,0..500@30s").unwrap();
//! assert_eq!(p.scaled(0.5).to_string(), "50@5s,0..250@15s");
//! ```

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
    /// The rate of a plan that is one open-ended constant stage (`300`), else `None`.
    pub fn constant(&self) -> Option<f64> {
        match self {
            RatePlan::Stages(st) => match st.as_slice() {
                [s] if s.dur.is_none() && s.from == s.to => Some(s.from),
                _ => None,
            },
            RatePlan::Max => None,
        }
    }

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
                        crate::dur::parse(d)
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

    /// The plan for a quicker run: every rate and every stage length times `f`. A non-zero
    /// rate stays at least 1 request/s; a pause stays a pause.
    pub fn scaled(&self, f: f64) -> RatePlan {
        let rate = |v: f64| {
            if v > 0.0 {
                (v * f).round().max(1.0)
            } else {
                0.0
            }
        };
        match self {
            RatePlan::Max => RatePlan::Max,
            RatePlan::Stages(st) => RatePlan::Stages(
                st.iter()
                    .map(|s| Stage {
                        from: rate(s.from),
                        to: rate(s.to),
                        dur: s.dur.map(|d| {
                            Duration::from_millis((d.as_millis() as f64 * f).round() as u64)
                        }),
                    })
                    .collect(),
            ),
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
                        write!(f, "@{}", crate::dur::format(d))?;
                    }
                }
                Ok(())
            }
        }
    }
}

impl std::str::FromStr for RatePlan {
    type Err = String;
    fn from_str(s: &str) -> Result<RatePlan, String> {
        RatePlan::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }

    #[test]
    fn a_ramp_scales_in_rate_and_duration() {
        let p = RatePlan::parse("100..1000@60s,0@5s,300").unwrap();
        let RatePlan::Stages(st) = p.scaled(0.5) else {
            panic!("stages")
        };
        assert_eq!((st[0].from, st[0].to), (50.0, 500.0));
        assert_eq!(st[0].dur, Some(Duration::from_secs(30)));
        assert_eq!((st[1].from, st[1].to), (0.0, 0.0), "a pause stays a pause");
        assert_eq!(st[1].dur, Some(Duration::from_millis(2500)));
        assert_eq!((st[2].from, st[2].dur), (150.0, None));
        assert_eq!(p.scaled(0.5).to_string(), "50..500@30s,0@2.5s,150");
        assert_eq!(RatePlan::parse("3").unwrap().scaled(0.1).to_string(), "1");
        assert_eq!(RatePlan::Max.scaled(0.5), RatePlan::Max);
    }
}
