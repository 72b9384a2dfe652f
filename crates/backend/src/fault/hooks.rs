//! The hook points of the backend's server, and what a fault can decide at each. A kind's
//! behaviour is one [`Behaviour`] implementation in a file of its own; the server calls every
//! installed fault at each hook and carries out the decision (reset, hang, delay, cut, close).
//! A hook draws its fault's gate (toxicity, window, seed) only where its kind can act, so a
//! kind consumes its random stream exactly at its own decision points.

use resolvelab_inject::gate::Gate;
use std::time::Duration;

/// What a fault decides when a connection is accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AtAccept {
    /// Serve it (the fault does not act here).
    Serve,
    /// Reset it at once (SO_LINGER 0).
    Reset,
    /// Keep it open and never answer.
    Hang,
}

/// What the faults add to one response before its headers go out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Headers {
    /// Answer with this status instead (the first fault that sets it wins).
    pub status: Option<u16>,
    /// Wait this much longer before the headers.
    pub delay: Duration,
    /// Close the connection after the headers, before the body.
    pub cut: bool,
}

/// A backend fault's behaviour at the server's hook points. Every hook defaults to "does not
/// act", so a kind implements only the hooks where it does.
pub(crate) trait Behaviour: Send + Sync + std::fmt::Debug {
    /// The listener refuses new connections while this holds.
    fn refuses(&self, _gate: &Gate) -> bool {
        false
    }
    /// Installing the fault resets (RST) every established connection at once.
    fn resets_established(&self) -> bool {
        false
    }
    /// A connection was accepted.
    fn at_accept(&self, _gate: &Gate) -> AtAccept {
        AtAccept::Serve
    }
    /// A connection was accepted: close it once it has been idle this long.
    fn idle_close(&self, _gate: &Gate) -> Option<Duration> {
        None
    }
    /// A response is about to be sent: true when the fault changed `headers`.
    fn before_headers(&self, _gate: &Gate, _headers: &mut Headers) -> bool {
        false
    }
    /// A response was sent: close the connection silently after this delay.
    fn after_response(&self, _gate: &Gate) -> Option<Duration> {
        None
    }
}

#[cfg(test)]
pub(crate) mod test_gate {
    //! Gates for the kinds' unit tests: one that always fires, one that never does.
    use resolvelab_inject::gate::{Common, Gate};

    /// A gate with this toxicity (1.0 always fires, 0.0 never).
    pub(crate) fn with(toxicity: f64) -> Gate {
        Gate::new(Common {
            name: None,
            toxicity,
            window: None,
            seed: 7,
        })
    }
}
