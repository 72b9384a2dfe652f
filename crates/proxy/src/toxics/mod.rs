//! The toxics: one file per fault kind, all behind [`Toxic`].
//!
//! A toxic sees the byte stream of one direction of one connection as chunks and turns each
//! chunk into [`Step`]s (forward these bytes, wait, close, reset). A toxic's parameters and
//! spelling are the lab's vocabulary (`resolvelab_core::spec::toxic`); its file here is only
//! what it does. The common parts — name, direction, toxicity, window, seed and counters —
//! live in the wrapper ([`ToxicSpec`] and [`crate::proxy::ToxicEntry`]), not in the toxics.
//!
//! A new toxic: its parameters in `core::spec::toxic` (a struct, a [`ToxicKind`] variant, a
//! [`TOXIC_KINDS`] row), its behaviour in a file here, one line in [`behaviour`].

mod bandwidth;
mod down;
mod latency;
mod limit_data;
mod reset_peer;
mod slicer;
mod slow_close;
mod timeout;

use bytes::Bytes;
use rand_chacha::ChaCha8Rng;
pub use resolvelab_core::spec::toxic::{Direction, TOXIC_KINDS, ToxicKind, ToxicSpec};
use std::fmt;
use std::time::{Duration, Instant};

pub use bandwidth::Bandwidth;
pub use down::Down;
pub use latency::Latency;
pub use limit_data::LimitData;
pub use reset_peer::ResetPeer;
pub use slicer::Slicer;
pub use slow_close::SlowClose;
pub use timeout::Timeout;

/// One instruction for the writer of a direction.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Forward these bytes.
    Data(Bytes),
    /// Forward nothing before this instant (latency is measured from the chunk's arrival).
    Until(Instant),
    /// Wait this long before the next step (accumulates: bandwidth, slicer).
    Wait(Duration),
    /// Close the whole connection (FIN both ways).
    Close,
    /// Reset the whole connection (SO_LINGER 0 on both sockets, then close: RST).
    Reset,
}

/// What a toxic kind does: the behaviour of one of the lab's toxic values
/// ([`resolvelab_core::spec::toxic`]). Immutable; per-connection state lives in the
/// [`ToxicConn`] it creates.
pub trait Toxic: Send + Sync + fmt::Debug {
    /// Per-connection, per-direction state, created when the toxic first sees the connection.
    fn connect(&self, now: Instant) -> Box<dyn ToxicConn>;
}

/// The behaviour of a toxic value: the one table of kinds → their files.
pub fn behaviour(kind: &ToxicKind) -> std::sync::Arc<dyn Toxic> {
    use std::sync::Arc;
    match kind {
        ToxicKind::Latency(t) => Arc::new(t.clone()),
        ToxicKind::Bandwidth(t) => Arc::new(t.clone()),
        ToxicKind::Slicer(t) => Arc::new(t.clone()),
        ToxicKind::Timeout(t) => Arc::new(t.clone()),
        ToxicKind::ResetPeer(t) => Arc::new(t.clone()),
        ToxicKind::LimitData(t) => Arc::new(t.clone()),
        ToxicKind::SlowClose(t) => Arc::new(t.clone()),
        ToxicKind::Down(t) => Arc::new(t.clone()),
    }
}

/// One toxic's state on one direction of one connection.
pub trait ToxicConn: Send {
    /// Turn one chunk into steps appended to `out`; return true when the toxic changed anything
    /// (delayed, split, dropped or cut it) so the counters only count real effects.
    fn data(
        &mut self,
        data: Bytes,
        arrived: Instant,
        rng: &mut ChaCha8Rng,
        out: &mut Vec<Step>,
    ) -> bool;
    /// The source closed: steps to run before the close is forwarded; true when it acted.
    fn eof(&mut self, _out: &mut Vec<Step>) -> bool {
        false
    }
    /// A timer: at this instant apply the step (`Close` or `Reset`) even if no data flows.
    fn deadline(&self) -> Option<(Instant, Step)> {
        None
    }
}

/// What the toxics' unit tests share: one connection's direction, fed chunk by chunk.
#[cfg(test)]
pub(crate) mod testing {
    use super::{Step, Toxic, ToxicConn};
    use bytes::Bytes;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;
    use std::time::Instant;

    /// A toxic's state on a fresh connection opened at `now`.
    pub fn conn(t: &dyn Toxic, now: Instant) -> Box<dyn ToxicConn> {
        t.connect(now)
    }

    /// The steps for one chunk of `n` bytes arriving at `at`, and whether the toxic acted.
    pub fn feed(c: &mut dyn ToxicConn, n: usize, at: Instant, seed: u64) -> (Vec<Step>, bool) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut out = Vec::new();
        let acted = c.data(Bytes::from(vec![7u8; n]), at, &mut rng, &mut out);
        (out, acted)
    }

    /// The bytes the steps forward.
    pub fn forwarded(steps: &[Step]) -> usize {
        steps
            .iter()
            .map(|s| match s {
                Step::Data(d) => d.len(),
                _ => 0,
            })
            .sum()
    }
}
