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

#[cfg(test)]
mod tests {
    use super::super::testing::{conn, feed, forwarded};
    use super::*;

    #[test]
    fn the_waits_add_up_to_the_rate() {
        // 100 kB/s: 50,000 bytes take 0.5 s, in pieces of ~10 ms (1,000 bytes).
        let t = Bandwidth { rate_kb: 100 };
        let now = Instant::now();
        let (steps, acted) = feed(conn(&t, now).as_mut(), 50_000, now, 1);
        assert!(acted);
        let waited: Duration = steps
            .iter()
            .map(|s| match s {
                Step::Wait(d) => *d,
                _ => Duration::ZERO,
            })
            .sum();
        assert!((waited.as_secs_f64() - 0.5).abs() < 1e-6, "{waited:?}");
        assert_eq!(forwarded(&steps), 50_000);
        assert_eq!(
            steps.iter().filter(|s| matches!(s, Step::Data(_))).count(),
            50
        );
    }
}
