//! `latency:delay=DUR,jitter=DUR` — every chunk is forwarded `delay ± jitter` after it arrived.

use super::{Step, Toxic, ToxicConn, dur_key};
use bytes::Bytes;
use rand::RngExt;
use rand_chacha::ChaCha8Rng;
use resolvelab_core::{dur, spec::Spec};
use std::time::{Duration, Instant};

/// Delay each chunk by `delay` plus a uniform jitter in `[-jitter, +jitter]`.
#[derive(Debug, Clone)]
pub struct Latency {
    /// Base delay.
    pub delay: Duration,
    /// Half-width of the uniform jitter.
    pub jitter: Duration,
}

impl Latency {
    pub(crate) const KEYS: &'static [&'static str] = &["delay", "jitter", "latency"];

    pub(crate) fn from_spec(spec: &Spec) -> Result<Latency, String> {
        // Toxiproxy calls it `latency`; accept both.
        let delay = if spec.get("latency").is_some() {
            dur_key(spec, "latency", None)?
        } else {
            dur_key(spec, "delay", None)?
        };
        Ok(Latency {
            delay,
            jitter: dur_key(spec, "jitter", Some(Duration::ZERO))?,
        })
    }
}

impl Toxic for Latency {
    fn kind(&self) -> &'static str {
        "latency"
    }
    fn params(&self) -> Vec<String> {
        let mut p = vec![format!("delay={}", dur::format(self.delay))];
        if !self.jitter.is_zero() {
            p.push(format!("jitter={}", dur::format(self.jitter)));
        }
        p
    }
    fn connect(&self, _now: Instant) -> Box<dyn ToxicConn> {
        Box::new(self.clone())
    }
}

impl ToxicConn for Latency {
    fn data(
        &mut self,
        data: Bytes,
        arrived: Instant,
        rng: &mut ChaCha8Rng,
        out: &mut Vec<Step>,
    ) -> bool {
        let mut d = self.delay;
        if !self.jitter.is_zero() {
            let j = self.jitter.as_secs_f64() * (2.0 * rng.random::<f64>() - 1.0);
            d = Duration::from_secs_f64((d.as_secs_f64() + j).max(0.0));
        }
        out.push(Step::Until(arrived + d));
        out.push(Step::Data(data));
        true
    }
}
