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

#[cfg(test)]
mod tests {
    use super::super::testing::{conn, feed, forwarded};
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_chunk_is_cut_into_pieces_of_the_given_size_with_delays_between() {
        let t = Slicer {
            average_size: 10,
            size_variation: 3,
            delay: Duration::from_millis(5),
        };
        let now = Instant::now();
        let (steps, acted) = feed(conn(&t, now).as_mut(), 1_000, now, 9);
        assert!(acted);
        let pieces: Vec<usize> = steps
            .iter()
            .filter_map(|s| match s {
                Step::Data(d) => Some(d.len()),
                _ => None,
            })
            .collect();
        assert_eq!(forwarded(&steps), 1_000);
        // Every piece but the last is 7..=13 bytes; a wait stands between each two.
        assert!(
            pieces[..pieces.len() - 1]
                .iter()
                .all(|p| (7..=13).contains(p)),
            "{pieces:?}"
        );
        let waits = steps.iter().filter(|s| matches!(s, Step::Wait(_))).count();
        assert_eq!(waits, pieces.len() - 1);
        assert!(
            matches!(steps[0], Step::Data(_)),
            "no wait before the first piece"
        );
    }
}
