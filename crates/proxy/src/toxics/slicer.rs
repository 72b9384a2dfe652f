//! `slicer:average_size=N,size_variation=N,delay=DUR` — cut chunks into small pieces with a
//! delay between them (exercises partial reads).

use super::{Step, Toxic, ToxicConn};
use bytes::Bytes;
use rand::RngExt;
use rand_chacha::ChaCha8Rng;
pub use resolvelab_core::spec::toxic::Slicer;
use std::time::Instant;

impl Toxic for Slicer {
    fn connect(&self, _now: Instant) -> Box<dyn ToxicConn> {
        Box::new(self.clone())
    }
}

impl ToxicConn for Slicer {
    fn data(
        &mut self,
        mut data: Bytes,
        _arrived: Instant,
        rng: &mut ChaCha8Rng,
        out: &mut Vec<Step>,
    ) -> bool {
        let mut first = true;
        while !data.is_empty() {
            let lo = self.average_size - self.size_variation;
            let hi = self.average_size + self.size_variation;
            let size = rng.random_range(lo..=hi) as usize;
            if !first && !self.delay.is_zero() {
                out.push(Step::Wait(self.delay));
            }
            first = false;
            out.push(Step::Data(data.split_to(size.min(data.len()))));
        }
        true
    }
}
