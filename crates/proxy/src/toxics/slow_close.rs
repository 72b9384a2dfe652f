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

#[cfg(test)]
mod tests {
    use super::super::testing::{conn, feed, forwarded};
    use super::*;
    use std::time::Duration;

    #[test]
    fn data_passes_and_the_close_waits_its_delay() {
        let now = Instant::now();
        let t = SlowClose {
            delay: Duration::from_millis(300),
        };
        let mut c = conn(&t, now);
        let (steps, acted) = feed(c.as_mut(), 10, now, 1);
        assert!(!acted && forwarded(&steps) == 10);
        let mut out = Vec::new();
        assert!(c.eof(&mut out));
        assert_eq!(out, [Step::Wait(Duration::from_millis(300))]);
    }
}
