//! `down` — the proxy stops listening while the toxic is active (clients get "connection
//! refused"); with `for=DUR` it comes back by itself. Its hit counter counts the windows in
//! which the port was really closed.

use super::{Step, Toxic, ToxicConn};
use bytes::Bytes;
use rand_chacha::ChaCha8Rng;
pub use resolvelab_core::spec::toxic::Down;
use std::time::Instant;

impl Toxic for Down {
    fn connect(&self, _now: Instant) -> Box<dyn ToxicConn> {
        Box::new(Down)
    }
}

impl ToxicConn for Down {
    fn data(
        &mut self,
        data: Bytes,
        _arrived: Instant,
        _rng: &mut ChaCha8Rng,
        out: &mut Vec<Step>,
    ) -> bool {
        // Connections accepted before the proxy went down keep flowing, as in Toxiproxy.
        out.push(Step::Data(data));
        false
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{conn, feed, forwarded};
    use super::*;

    /// `down` acts on the listener (new connections are refused, `proxy.rs`); a connection
    /// accepted before keeps flowing, as in Toxiproxy.
    #[test]
    fn an_established_connection_keeps_flowing() {
        let now = Instant::now();
        let mut c = conn(&Down, now);
        let (steps, acted) = feed(c.as_mut(), 10, now, 1);
        assert!(!acted && forwarded(&steps) == 10);
        assert_eq!(c.deadline(), None);
    }
}
