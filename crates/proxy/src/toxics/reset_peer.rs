//! `reset_peer:timeout=DUR` — reset the connection (TCP RST via SO_LINGER 0) `timeout` after
//! the toxic met it; 0 resets at once.

use super::{Step, Toxic, ToxicConn};
use bytes::Bytes;
use rand_chacha::ChaCha8Rng;
pub use resolvelab_core::spec::toxic::ResetPeer;
use std::time::Instant;

impl Toxic for ResetPeer {
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

#[cfg(test)]
mod tests {
    use super::super::testing::{conn, feed, forwarded};
    use super::*;
    use std::time::Duration;

    #[test]
    fn data_flows_until_the_deadline_then_the_connection_is_reset() {
        let now = Instant::now();
        let later = ResetPeer {
            timeout: Duration::from_secs(3600),
        };
        let mut c = conn(&later, now);
        let (steps, acted) = feed(c.as_mut(), 10, now, 1);
        assert!(!acted && forwarded(&steps) == 10);
        assert_eq!(
            c.deadline(),
            Some((now + Duration::from_secs(3600), Step::Reset))
        );
        // Already past its deadline: the next chunk resets the connection.
        let at_once = ResetPeer {
            timeout: Duration::ZERO,
        };
        let (steps, acted) = feed(conn(&at_once, now).as_mut(), 10, now, 1);
        assert!(acted);
        assert_eq!(steps, [Step::Reset]);
    }
}
