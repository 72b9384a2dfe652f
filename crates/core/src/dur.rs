//! Human durations (`250ms`, `2s`, `1.5s`, `1m`, `500us`) and ranges (`0ms..50ms`), and
//! [`Dur`], a duration as a file wrote it.
//!
//! ```
//! use resolvelab_core::dur::Dur;
//! use std::time::Duration;
//! let d: Dur = "1500ms".parse().unwrap();
//! assert_eq!(d.get(), Duration::from_millis(1500));
//! assert_eq!(d.to_string(), "1500ms", "the spelling is kept");
//! assert_eq!(d.scaled(0.5).to_string(), "750ms");
//! assert!("5 parsecs".parse::<Dur>().is_err());
//! ```

use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

/// A duration read from a file: its value, typed once when the file is read, and its text, so
/// the file written back (a run directory's `scenario.toml`) keeps the author's spelling.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Dur {
    value: Duration,
    text: String,
}

impl Dur {
    /// A duration with its compact spelling ([`format`]).
    pub fn new(d: Duration) -> Dur {
        Dur {
            value: d,
            text: format(d),
        }
    }

    /// The value.
    pub fn get(&self) -> Duration {
        self.value
    }

    /// Scaled by `f`, to the millisecond, spelled anew.
    pub fn scaled(&self, f: f64) -> Dur {
        Dur::new(Duration::from_millis(
            (self.value.as_millis() as f64 * f).round() as u64,
        ))
    }
}

impl std::str::FromStr for Dur {
    type Err = String;
    fn from_str(s: &str) -> Result<Dur, String> {
        Ok(Dur {
            value: parse(s)?,
            text: s.to_string(),
        })
    }
}

impl fmt::Display for Dur {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

serde_as_text!(Dur);

/// Parse a duration such as `200ms`, `2s`, `1.5s`, `1m`, `750us`, or `0` (zero needs no unit).
pub fn parse(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    if s.starts_with('-') {
        return Err(format!(
            "duration `{s}` is negative: durations are 0 or more"
        ));
    }
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(|| format!("duration `{s}` has no unit: write e.g. `{s}ms` or `{s}s`"))?;
    let (num, unit) = s.split_at(split);
    let value: f64 = num
        .parse()
        .map_err(|_| format!("duration `{s}`: `{num}` is not a number"))?;
    let secs = match unit {
        "ns" => value / 1e9,
        "us" | "µs" => value / 1e6,
        "ms" => value / 1e3,
        "s" => value,
        "m" | "min" => value * 60.0,
        "h" => value * 3600.0,
        _ => {
            return Err(format!(
                "duration `{s}`: unknown unit `{unit}` (use ns, us, ms, s, m or h)"
            ));
        }
    };
    if !secs.is_finite() || secs < 0.0 {
        return Err(format!("duration `{s}` is out of range"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Render a duration compactly (`1.5s`, `250ms`, `40us`).
pub fn format(d: Duration) -> String {
    let us = d.as_micros();
    if us == 0 {
        "0s".into()
    } else if us.is_multiple_of(1_000_000) {
        format!("{}s", us / 1_000_000)
    } else if us >= 1_000_000 {
        format!("{}s", d.as_secs_f64())
    } else if us.is_multiple_of(1000) {
        format!("{}ms", us / 1000)
    } else {
        format!("{us}us")
    }
}

/// An inclusive range of durations, `LO..HI`, or a single fixed duration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    /// Lower bound.
    pub lo: Duration,
    /// Upper bound (equal to `lo` for a fixed duration).
    pub hi: Duration,
}

impl Range {
    /// Parse `0ms..50ms`, `uniform:0..50ms` or a single duration.
    pub fn parse(s: &str) -> Result<Range, String> {
        let s = s.trim().strip_prefix("uniform:").unwrap_or(s.trim());
        match s.split_once("..") {
            None => {
                let d = parse(s)?;
                Ok(Range { lo: d, hi: d })
            }
            Some((a, b)) => {
                let hi = parse(b)?;
                // `0..50ms`: the unit of the upper bound applies to a bare lower bound.
                let lo = match parse(a) {
                    Ok(d) => d,
                    Err(_) if a.chars().all(|c| c.is_ascii_digit() || c == '.') => {
                        let unit = b.trim_start_matches(|c: char| c.is_ascii_digit() || c == '.');
                        parse(&format!("{a}{unit}"))?
                    }
                    Err(e) => return Err(e),
                };
                if lo > hi {
                    return Err(format!("range `{s}`: lower bound is above the upper bound"));
                }
                Ok(Range { lo, hi })
            }
        }
    }

    /// Pick a duration in the range from a uniform sample `u` in [0, 1).
    pub fn at(&self, u: f64) -> Duration {
        let span = self.hi.saturating_sub(self.lo).as_secs_f64();
        self.lo + Duration::from_secs_f64(span * u.clamp(0.0, 1.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(parse("200ms").unwrap(), Duration::from_millis(200));
        assert_eq!(parse("2s").unwrap(), Duration::from_secs(2));
        assert_eq!(parse("1m").unwrap(), Duration::from_secs(60));
        assert_eq!(parse("750us").unwrap(), Duration::from_micros(750));
        assert_eq!(parse("0").unwrap(), Duration::ZERO);
        assert!(parse("5").unwrap_err().contains("no unit"));
        assert!(parse("5parsecs").unwrap_err().contains("unknown unit"));
        assert!(
            parse("-10s").unwrap_err().contains("is negative"),
            "not \"`` is not a number\""
        );
        assert_eq!(format(Duration::from_millis(1500)), "1.5s");
        assert_eq!(format(Duration::from_millis(250)), "250ms");
    }

    #[test]
    fn ranges() {
        let r = Range::parse("0..50ms").unwrap();
        assert_eq!((r.lo, r.hi), (Duration::ZERO, Duration::from_millis(50)));
        assert_eq!(r.at(0.5), Duration::from_millis(25));
        let r = Range::parse("uniform:1ms..5ms").unwrap();
        assert_eq!(r.lo, Duration::from_millis(1));
        assert!(Range::parse("5ms..1ms").is_err());
        let fixed = Range::parse("3ms").unwrap();
        assert_eq!(fixed.at(0.9), Duration::from_millis(3));
    }
}
