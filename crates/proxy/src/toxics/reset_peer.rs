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
