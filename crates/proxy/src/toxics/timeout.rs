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

#[cfg(test)]
mod tests {
    use super::super::testing::{conn, feed, forwarded};
    use super::*;
    use std::time::Duration;

    #[test]
    fn data_is_swallowed_and_the_connection_closes_at_the_timeout() {
        let now = Instant::now();
        let t = Timeout {
            timeout: Duration::from_secs(2),
        };
        let mut c = conn(&t, now);
        let (steps, acted) = feed(c.as_mut(), 100, now, 1);
        assert!(acted && forwarded(&steps) == 0, "{steps:?}");
        assert_eq!(
            c.deadline(),
            Some((now + Duration::from_secs(2), Step::Close))
        );
        // timeout=0: held forever, never closed.
        let t = Timeout {
            timeout: Duration::ZERO,
        };
        assert_eq!(conn(&t, now).deadline(), None);
    }
}
