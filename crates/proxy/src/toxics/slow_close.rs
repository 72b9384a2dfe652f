//! `slow_close:delay=DUR` — when the source closes, hold the close back for `delay`.

use super::{Step, Toxic, ToxicConn};
use bytes::Bytes;
use rand_chacha::ChaCha8Rng;
pub use resolvelab_core::spec::toxic::SlowClose;
use std::time::Instant;

impl Toxic for SlowClose {
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
