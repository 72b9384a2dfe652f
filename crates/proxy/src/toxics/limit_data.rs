//! `limit_data:bytes=N` — close the connection once N bytes went through this direction.

use super::{Step, Toxic, ToxicConn};
use bytes::Bytes;
use rand_chacha::ChaCha8Rng;
pub use resolvelab_core::spec::toxic::LimitData;
use std::time::Instant;

impl Toxic for LimitData {
    fn connect(&self, _now: Instant) -> Box<dyn ToxicConn> {
        Box::new(LimitConn { left: self.bytes })
    }
}

struct LimitConn {
    left: u64,
}

impl ToxicConn for LimitConn {
    fn data(
        &mut self,
        mut data: Bytes,
        _arrived: Instant,
        _rng: &mut ChaCha8Rng,
        out: &mut Vec<Step>,
    ) -> bool {
        if (data.len() as u64) < self.left {
            self.left -= data.len() as u64;
            out.push(Step::Data(data));
            return false;
        }
        let keep = data.split_to(self.left as usize);
        self.left = 0;
        if !keep.is_empty() {
            out.push(Step::Data(keep));
        }
        out.push(Step::Close);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{conn, feed, forwarded};
    use super::*;

    #[test]
    fn the_connection_closes_after_exactly_n_bytes() {
        let now = Instant::now();
        let mut c = conn(&LimitData { bytes: 25 }, now);
        let (steps, acted) = feed(c.as_mut(), 10, now, 1);
        assert!(!acted && forwarded(&steps) == 10);
        let (steps, acted) = feed(c.as_mut(), 30, now, 1);
        assert!(acted);
        assert_eq!(forwarded(&steps), 15, "{steps:?}");
        assert_eq!(steps.last(), Some(&Step::Close));
    }
}
