//! `reset_peer:timeout=DUR` — reset the connection (TCP RST via SO_LINGER 0) `timeout` after
//! the toxic met it; 0 resets at once.

use super::{Step, Toxic, ToxicConn, dur_key};
use bytes::Bytes;
use rand_chacha::ChaCha8Rng;
use resolvelab_core::{dur, spec::Spec};
use std::time::{Duration, Instant};

/// Reset both sides after `timeout`.
#[derive(Debug, Clone)]
pub struct ResetPeer {
    /// Time until the reset.
    pub timeout: Duration,
}

impl ResetPeer {
    pub(crate) const KEYS: &'static [&'static str] = &["timeout"];

    pub(crate) fn from_spec(spec: &Spec) -> Result<ResetPeer, String> {
        Ok(ResetPeer {
            timeout: dur_key(spec, "timeout", Some(Duration::ZERO))?,
        })
    }
}

impl Toxic for ResetPeer {
    fn kind(&self) -> &'static str {
        "reset_peer"
    }
    fn params(&self) -> Vec<String> {
        vec![format!("timeout={}", dur::format(self.timeout))]
    }
    fn connect(&self, now: Instant) -> Box<dyn ToxicConn> {
        Box::new(ResetConn {
            at: now + self.timeout,
        })
    }
}

struct ResetConn {
    at: Instant,
}

impl ToxicConn for ResetConn {
    fn data(
        &mut self,
        data: Bytes,
        _arrived: Instant,
        _rng: &mut ChaCha8Rng,
        out: &mut Vec<Step>,
    ) -> bool {
        if Instant::now() >= self.at {
            out.push(Step::Reset);
            return true;
        }
        out.push(Step::Data(data));
        false
    }
    fn deadline(&self) -> Option<(Instant, Step)> {
        Some((self.at, Step::Reset))
    }
}
