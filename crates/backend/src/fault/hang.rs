//! `hang`: accept and never answer, as an overloaded or stopped process whose socket the kernel
//! still accepts on.

use super::hooks::{AtAccept, Behaviour};
use resolvelab_inject::gate::Gate;

/// The `hang` fault.
#[derive(Debug)]
pub(crate) struct Hang;

impl Behaviour for Hang {
    fn at_accept(&self, gate: &Gate) -> AtAccept {
        if gate.roll() {
            AtAccept::Hang
        } else {
            AtAccept::Serve
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::hooks::test_gate::with;
    use super::*;

    #[test]
    fn hangs_at_accept() {
        assert_eq!(Hang.at_accept(&with(1.0)), AtAccept::Hang);
        assert_eq!(Hang.at_accept(&with(0.0)), AtAccept::Serve);
    }
}
