//! `restart`: a backend that restarts, or a pod that is deleted: new connections are refused
//! for the window, as with `refuse`, and every connection established before it is reset
//! (RST) when the window opens — what the clients of a killed process see, and what `refuse`
//! alone leaves out (a proxy's pooled connections keep working through a `refuse`). Like
//! `refuse` it has no toxicity. Its hits: one per window, plus one per connection it reset.

use super::hooks::Behaviour;
use resolvelab_inject::gate::Gate;

/// The `restart` fault.
#[derive(Debug)]
pub(crate) struct Restart;

impl Behaviour for Restart {
    fn refuses(&self, gate: &Gate) -> bool {
        gate.in_window()
    }
    fn resets_established(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::super::hooks::{AtAccept, test_gate::with};
    use super::*;

    #[test]
    fn refuses_for_its_window_and_resets_what_was_established() {
        assert!(Restart.refuses(&with(0.0)));
        assert!(Restart.resets_established());
        assert_eq!(Restart.at_accept(&with(1.0)), AtAccept::Serve);
        // `refuse` stays the listener-only case.
        assert!(!super::super::refuse::Refuse.resets_established());
    }
}
