//! Response models: latency, status mix and body size.

use rand::RngExt;
use rand_chacha::ChaCha8Rng;

use std::str::FromStr;
use std::time::Duration;

/// How long a response takes before its headers are sent: the lab's latency models
/// (`resolvelab_core::spec::latency`), sampled here.
pub use resolvelab_core::spec::latency::Latency;

/// Drawing from a latency model.
pub trait Sample {
    /// Draw one latency.
    fn sample(&self, rng: &mut ChaCha8Rng) -> Duration;
}

impl Sample for Latency {
    fn sample(&self, rng: &mut ChaCha8Rng) -> Duration {
        match self {
            Latency::Fixed(d) => *d,
            Latency::Uniform(r) => r.at(rng.random::<f64>()),
            Latency::Exp { mean } => {
                let u: f64 = rng.random::<f64>().max(f64::MIN_POSITIVE);
                Duration::from_secs_f64((-mean.as_secs_f64() * u.ln()).min(3600.0))
            }
            Latency::LogNormal { median, sigma } => {
                // Box–Muller: one standard normal from two uniforms.
                let u1: f64 = rng.random::<f64>().max(f64::MIN_POSITIVE);
                let u2: f64 = rng.random::<f64>();
                let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
                let mu = median.as_secs_f64().ln();
                Duration::from_secs_f64((mu + sigma * z).exp().min(3600.0))
            }
        }
    }
}

/// A weighted mix of status codes: `200`, or `200=0.9,503=0.1`.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusMix {
    /// (code, cumulative probability), the last one is 1.0.
    cumulative: Vec<(u16, f64)>,
}

impl Default for StatusMix {
    fn default() -> Self {
        StatusMix {
            cumulative: vec![(200, 1.0)],
        }
    }
}

impl FromStr for StatusMix {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let mut parts = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (code, w) = part.split_once('=').unwrap_or((part, "1"));
            let code: u16 = code
                .trim()
                .parse()
                .ok()
                .filter(|c| (100..=599).contains(c))
                .ok_or_else(|| {
                    format!("status mix `{s}`: `{code}` is not an HTTP status (100–599)")
                })?;
            let w: f64 = w
                .trim()
                .parse()
                .ok()
                .filter(|w: &f64| w.is_finite() && *w >= 0.0)
                .ok_or_else(|| {
                    format!("status mix `{s}`: weight `{w}` is not a non-negative number")
                })?;
            parts.push((code, w));
        }
        let total: f64 = parts.iter().map(|p| p.1).sum();
        if parts.is_empty() || total <= 0.0 {
            return Err(format!(
                "status mix `{s}`: write e.g. `200` or `200=0.9,503=0.1`"
            ));
        }
        let mut acc = 0.0;
        let mut cumulative: Vec<(u16, f64)> = parts
            .into_iter()
            .map(|(c, w)| {
                acc += w / total;
                (c, acc)
            })
            .collect();
        if let Some(last) = cumulative.last_mut() {
            last.1 = 1.0;
        }
        Ok(StatusMix { cumulative })
    }
}

impl StatusMix {
    /// A single code, no randomness needed.
    pub fn fixed(&self) -> Option<u16> {
        (self.cumulative.len() == 1).then(|| self.cumulative[0].0)
    }

    /// Draw one status.
    pub fn sample(&self, rng: &mut ChaCha8Rng) -> u16 {
        if let Some(c) = self.fixed() {
            return c;
        }
        let u: f64 = rng.random::<f64>();
        self.cumulative
            .iter()
            .find(|(_, p)| u < *p)
            .map_or(self.cumulative[self.cumulative.len() - 1].0, |c| c.0)
    }
}

/// Parse a byte size: `512`, `4k`, `4KiB`, `1m`.
pub fn parse_size(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: usize = num
        .parse()
        .map_err(|_| format!("size `{s}`: write e.g. 512, 4k or 1m"))?;
    let mult = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1024,
        "m" | "mb" | "mib" => 1024 * 1024,
        _ => return Err(format!("size `{s}`: unknown unit `{unit}` (use k or m)")),
    };
    n.checked_mul(mult)
        .filter(|n| *n <= 64 * 1024 * 1024)
        .ok_or_else(|| format!("size `{s}` is above 64m"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn latency_models() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        assert_eq!(
            "2ms".parse::<Latency>().unwrap().sample(&mut rng),
            Duration::from_millis(2)
        );
        let u: Latency = "uniform:1ms..5ms".parse().unwrap();
        for _ in 0..100 {
            let d = u.sample(&mut rng);
            assert!(d >= Duration::from_millis(1) && d <= Duration::from_millis(5));
        }
        let l: Latency = "lognormal:p50=2ms,p99=40ms".parse().unwrap();
        let mut v: Vec<Duration> = (0..20_000).map(|_| l.sample(&mut rng)).collect();
        v.sort();
        let p50 = v[10_000].as_secs_f64() * 1e3;
        let p99 = v[19_800].as_secs_f64() * 1e3;
        assert!((1.8..2.2).contains(&p50), "p50 {p50}");
        assert!((32.0..48.0).contains(&p99), "p99 {p99}");
        assert!("lognormal:p50=2ms".parse::<Latency>().is_err());
        assert!("fast".parse::<Latency>().is_err());
    }

    #[test]
    fn status_mix_and_sizes() {
        let m: StatusMix = "200=0.9,503=0.1".parse().unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let n503 = (0..10_000).filter(|_| m.sample(&mut rng) == 503).count();
        assert!((800..1200).contains(&n503), "{n503}");
        assert_eq!("204".parse::<StatusMix>().unwrap().fixed(), Some(204));
        assert!("700".parse::<StatusMix>().is_err());
        assert_eq!(parse_size("4k").unwrap(), 4096);
        assert_eq!(parse_size("100").unwrap(), 100);
        assert!(parse_size("4q").is_err());
    }
}
