//! Latency models: how long a backend takes before its response headers. The lab backend
//! samples them, the model samples its own copy, both read this one grammar.
//!
//! | written | model |
//! |---|---|
//! | `2ms` or `fixed:2ms` | always 2 ms |
//! | `1ms..5ms` or `uniform:1ms..5ms` | uniform in the range |
//! | `exp:5ms` | exponential with that mean |
//! | `lognormal:p50=2ms,p99=40ms` (or `lognormal:2ms,0.6`: median and σ) | log-normal |
//!
//! ```
//! use resolvelab_core::spec::latency::Latency;
//! let l: Latency = "lognormal:p50=2ms,p99=40ms".parse().unwrap();
//! let Latency::LogNormal { median, sigma } = l else { unreachable!() };
//! assert_eq!(median, std::time::Duration::from_millis(2));
//! assert!((sigma - 1.2878).abs() < 1e-3);
//! assert_eq!("lognormal:2ms,0.6".parse::<Latency>().unwrap().to_string(), "lognormal:2ms,0.6");
//! ```

use super::Spec;
use crate::dur;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// z-score of the 99th percentile of the standard normal distribution.
pub const Z99: f64 = 2.326_347_874;

/// A latency distribution.
#[derive(Debug, Clone, PartialEq)]
pub enum Latency {
    /// Always this long (`0` for none).
    Fixed(Duration),
    /// Uniform in a range.
    Uniform(dur::Range),
    /// Exponential with this mean.
    Exp {
        /// The mean.
        mean: Duration,
    },
    /// Log-normal: `ln(latency)` is normal around `ln(median)` with deviation `sigma`.
    LogNormal {
        /// The median (p50).
        median: Duration,
        /// σ of `ln(latency)`; from a p99, `ln(p99 / p50) / Z99`.
        sigma: f64,
    },
}

impl Default for Latency {
    fn default() -> Self {
        Latency::Fixed(Duration::ZERO)
    }
}

const FORMS: &str = "forms: 2ms, uniform:1ms..5ms, exp:5ms, lognormal:p50=2ms,p99=40ms";

impl Latency {
    /// Is it always zero (so a hot path can skip the RNG and the timer)?
    pub fn is_zero(&self) -> bool {
        matches!(self, Latency::Fixed(d) if d.is_zero())
    }

    /// The log-normal with this median and 99th percentile.
    pub fn lognormal_p99(p50: Duration, p99: Duration) -> Result<Latency, String> {
        if p50.is_zero() || p99 < p50 {
            return Err("need 0 < p50 <= p99".into());
        }
        let sigma = (p99.as_secs_f64().ln() - p50.as_secs_f64().ln()) / Z99;
        Ok(Latency::LogNormal { median: p50, sigma })
    }

    fn parse_lognormal(s: &str, rest: &str) -> Result<Latency, String> {
        let bad = |e: String| format!("latency `{s}`: {e}");
        if let Some((m, sigma)) = rest.split_once(',').filter(|(m, _)| !m.contains('=')) {
            // The median-and-σ form: `lognormal:5ms,0.6`.
            let median = dur::parse(m.trim()).map_err(bad)?;
            let sigma: f64 = sigma
                .trim()
                .parse()
                .ok()
                .filter(|v: &f64| v.is_finite() && *v >= 0.0)
                .ok_or_else(|| bad(format!("σ `{}` is not a number ≥ 0", sigma.trim())))?;
            if median.is_zero() {
                return Err(bad("the median must be above 0".into()));
            }
            return Ok(Latency::LogNormal { median, sigma });
        }
        let spec = Spec::parse(&format!("lognormal:{rest}")).map_err(bad)?;
        spec.only(&["p50", "p99"]).map_err(bad)?;
        let get = |k: &str| -> Result<Duration, String> {
            let v = spec.get(k).ok_or_else(|| {
                format!("latency `{s}` needs {k}=DUR, e.g. lognormal:p50=2ms,p99=40ms")
            })?;
            dur::parse(v).map_err(|e| format!("latency `{s}`: {e}"))
        };
        Latency::lognormal_p99(get("p50")?, get("p99")?).map_err(bad)
    }
}

impl FromStr for Latency {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        let (kind, rest) = s.split_once(':').unwrap_or(("", s));
        match kind {
            "lognormal" => Latency::parse_lognormal(s, rest),
            "exp" => dur::parse(rest.trim())
                .map(|mean| Latency::Exp { mean })
                .map_err(|e| format!("latency `{s}`: {e} ({FORMS})")),
            "uniform" => dur::Range::parse(rest.trim())
                .map(Latency::Uniform)
                .map_err(|e| format!("latency `{s}`: {e} ({FORMS})")),
            "fixed" | "" if rest.contains("..") && kind.is_empty() => dur::Range::parse(rest)
                .map(Latency::Uniform)
                .map_err(|e| format!("latency `{s}`: {e} ({FORMS})")),
            "fixed" | "" => dur::parse(rest.trim())
                .map(Latency::Fixed)
                .map_err(|e| format!("latency `{s}`: {e} ({FORMS})")),
            other => Err(format!(
                "latency `{s}`: unknown distribution `{other}` ({FORMS})"
            )),
        }
    }
}

impl fmt::Display for Latency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Latency::Fixed(d) => f.write_str(&dur::format(*d)),
            Latency::Uniform(r) => {
                write!(f, "uniform:{}..{}", dur::format(r.lo), dur::format(r.hi))
            }
            Latency::Exp { mean } => write!(f, "exp:{}", dur::format(*mean)),
            // The median-and-σ form round-trips exactly; a p99 would be rounded.
            Latency::LogNormal { median, sigma } => {
                write!(f, "lognormal:{},{sigma}", dur::format(*median))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_parses_and_round_trips() {
        for (text, shown) in [
            ("2ms", "2ms"),
            ("fixed:2ms", "2ms"),
            ("1ms..5ms", "uniform:1ms..5ms"),
            ("uniform:1ms..5ms", "uniform:1ms..5ms"),
            ("exp:5ms", "exp:5ms"),
            ("lognormal:5ms,0.6", "lognormal:5ms,0.6"),
        ] {
            let l: Latency = text.parse().unwrap();
            assert_eq!(l.to_string(), shown, "{text}");
            assert_eq!(shown.parse::<Latency>().unwrap(), l);
        }
        let Latency::LogNormal { median, sigma } =
            "lognormal:p50=2ms,p99=40ms".parse::<Latency>().unwrap()
        else {
            panic!("lognormal")
        };
        // p99 = median · e^(Z99 σ)
        let p99 = median.as_secs_f64() * (Z99 * sigma).exp();
        assert!((p99 - 0.040).abs() < 1e-9, "{p99}");
    }

    #[test]
    fn errors_name_the_form() {
        let e = |s: &str| s.parse::<Latency>().unwrap_err();
        assert!(e("lognormal:p50=2ms").contains("p99=DUR"));
        assert!(e("lognormal:p50=40ms,p99=2ms").contains("p50 <= p99"));
        assert!(e("gauss:1ms").contains("unknown distribution"));
        assert!(e("lognormal:5ms,x").contains("σ"));
        assert!(e("soon").contains("forms"));
    }
}
