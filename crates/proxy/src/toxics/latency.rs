//! `latency:delay=DUR,jitter=DUR` — every chunk is forwarded `delay ± jitter` after it arrived.

use super::{Step, Toxic, ToxicConn};
use bytes::Bytes;
use rand::RngExt;
use rand_chacha::ChaCha8Rng;
pub use resolvelab_core::spec::toxic::Latency;
use std::time::{Duration, Instant};

impl Toxic for Latency {
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

#[cfg(test)]
mod tests {
    use super::super::testing::{conn, feed, forwarded};
    use super::*;
    use std::time::Duration;

    #[test]
    fn every_chunk_waits_its_delay_within_the_jitter() {
        let t = Latency {
            delay: Duration::from_millis(100),
            jitter: Duration::from_millis(20),
        };
        let now = Instant::now();
        let mut c = conn(&t, now);
        for seed in 0..50 {
            let (steps, acted) = feed(c.as_mut(), 10, now, seed);
            assert!(acted);
            let Step::Until(at) = steps[0] else {
                panic!("{steps:?}")
            };
            let d = at - now;
            assert!(
                d >= Duration::from_millis(80) && d <= Duration::from_millis(120),
                "{d:?}"
            );
            assert_eq!(forwarded(&steps), 10);
        }
    }
}
