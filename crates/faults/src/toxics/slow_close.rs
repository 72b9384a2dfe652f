//! `slow_close:delay=DUR` — when the source closes, hold the close back for `delay`.

use super::{Step, Toxic, ToxicConn, dur_key};
use bytes::Bytes;
use rand_chacha::ChaCha8Rng;
use resolvelab_core::{dur, spec::Spec};
use std::time::{Duration, Instant};

/// Delay the forwarded FIN by `delay`.
#[derive(Debug, Clone)]
pub struct SlowClose {
    /// How long the close is held back.
    pub delay: Duration,
}

impl SlowClose {
    pub(crate) const KEYS: &'static [&'static str] = &["delay"];

    pub(crate) fn from_spec(spec: &Spec) -> Result<SlowClose, String> {
        Ok(SlowClose {
            delay: dur_key(spec, "delay", None)?,
        })
    }
}

impl Toxic for SlowClose {
    fn kind(&self) -> &'static str {
        "slow_close"
    }
    fn params(&self) -> Vec<String> {
        vec![format!("delay={}", dur::format(self.delay))]
    }
    fn connect(&self, _now: Instant) -> Box<dyn ToxicConn> {
        Box::new(self.clone())
    }
}

impl ToxicConn for SlowClose {
    fn data(
        &mut self,
        data: Bytes,
        _arrived: Instant,
        _rng: &mut ChaCha8Rng,
        out: &mut Vec<Step>,
    ) -> bool {
        out.push(Step::Data(data));
        false
    }
    fn eof(&mut self, out: &mut Vec<Step>) -> bool {
        out.push(Step::Wait(self.delay));
        true
    }
}
