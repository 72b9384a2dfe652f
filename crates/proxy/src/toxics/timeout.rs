//! `timeout:timeout=DUR` — a blackhole: data is dropped; the connection is closed `timeout`
//! after the toxic met it (0 = never, data is dropped until the toxic is removed).

use super::{Step, Toxic, ToxicConn};
use bytes::Bytes;
use rand_chacha::ChaCha8Rng;
pub use resolvelab_core::spec::toxic::Timeout;
use std::time::Instant;

impl Toxic for Timeout {
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
