//! `bandwidth:rate=KB/s` — limit the throughput of a direction (Toxiproxy's unit: KB/s).

use super::{Step, Toxic, ToxicConn};
use bytes::Bytes;
use rand_chacha::ChaCha8Rng;
pub use resolvelab_core::spec::toxic::Bandwidth;
use std::time::{Duration, Instant};

impl Toxic for Bandwidth {
    fn connect(&self, _now: Instant) -> Box<dyn ToxicConn> {
        Box::new(self.clone())
    }
}

impl ToxicConn for Bandwidth {
    fn data(
        &mut self,
        mut data: Bytes,
        _arrived: Instant,
        _rng: &mut ChaCha8Rng,
        out: &mut Vec<Step>,
    ) -> bool {
        let bytes_per_sec = self.rate_kb * 1000;
        // Pieces of ~10 ms keep the pacing smooth for large chunks.
        let piece = (bytes_per_sec / 100).max(1) as usize;
        while !data.is_empty() {
            let part = data.split_to(piece.min(data.len()));
            out.push(Step::Wait(Duration::from_secs_f64(
                part.len() as f64 / bytes_per_sec as f64,
            )));
            out.push(Step::Data(part));
        }
        true
    }
}
