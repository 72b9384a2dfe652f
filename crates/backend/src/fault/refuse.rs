//! `refuse`: stop listening while the fault is in its window (connection refused), as a backend
//! that is down. It acts on the listener, so it has no toxicity: it holds for its whole window.

use super::hooks::Behaviour;
use resolvelab_inject::gate::Gate;

/// The `refuse` fault.
#[derive(Debug)]
pub(crate) struct Refuse;

impl Behaviour for Refuse {
    fn refuses(&self, gate: &Gate) -> bool {
        gate.in_window()
    }
}

#[cfg(test)]
mod tests {
    use super::super::hooks::{AtAccept, test_gate::with};
    use super::*;

    #[test]
    fn refuses_for_its_window_whatever_the_toxicity() {
        assert!(Refuse.refuses(&with(0.0)));
        assert_eq!(Refuse.at_accept(&with(1.0)), AtAccept::Serve);
    }
}
