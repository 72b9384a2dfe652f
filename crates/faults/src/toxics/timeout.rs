//! `timeout:timeout=DUR` — a blackhole: data is dropped; the connection is closed `timeout`
//! after the toxic met it (0 = never, data is dropped until the toxic is removed).

use super::{Step, Toxic, ToxicConn, dur_key};
use bytes::Bytes;
use rand_chacha::ChaCha8Rng;
use resolvelab_core::{dur, spec::Spec};
use std::time::{Duration, Instant};

/// Drop all data; close after `timeout` unless it is zero.
#[derive(Debug, Clone)]
pub struct Timeout {
    /// Time until the connection is closed (zero = never).
    pub timeout: Duration,
}

impl Timeout {
    pub(crate) const KEYS: &'static [&'static str] = &["timeout"];

    pub(crate) fn from_spec(spec: &Spec) -> Result<Timeout, String> {
        Ok(Timeout {
            timeout: dur_key(spec, "timeout", Some(Duration::ZERO))?,
        })
    }
}

impl Toxic for Timeout {
    fn kind(&self) -> &'static str {
        "timeout"
    }
    fn params(&self) -> Vec<String> {
        vec![format!("timeout={}", dur::format(self.timeout))]
    }
    fn connect(&self, now: Instant) -> Box<dyn ToxicConn> {
        Box::new(TimeoutConn {
            close_at: (!self.timeout.is_zero()).then(|| now + self.timeout),
        })
    }
}

struct TimeoutConn {
    close_at: Option<Instant>,
}

impl ToxicConn for TimeoutConn {
    fn data(
        &mut self,
        _data: Bytes,
        _arrived: Instant,
        _rng: &mut ChaCha8Rng,
        _out: &mut Vec<Step>,
    ) -> bool {
        true
    }
    fn deadline(&self) -> Option<(Instant, Step)> {
        self.close_at.map(|t| (t, Step::Close))
    }
}
