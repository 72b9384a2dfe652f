//! `rst`: accept, then reset the connection (SO_LINGER 0), as a backend that crashed or a
//! firewall that rejects does.

use super::hooks::{AtAccept, Behaviour};
use resolvelab_inject::gate::Gate;

/// The `rst` fault.
#[derive(Debug)]
pub(crate) struct Rst;

impl Behaviour for Rst {
    fn at_accept(&self, gate: &Gate) -> AtAccept {
        if gate.roll() {
            AtAccept::Reset
        } else {
            AtAccept::Serve
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::hooks::{Headers, test_gate::with};
    use super::*;

    #[test]
    fn resets_at_accept_only() {
        assert_eq!(Rst.at_accept(&with(1.0)), AtAccept::Reset);
        assert_eq!(Rst.at_accept(&with(0.0)), AtAccept::Serve);
        assert!(!Rst.before_headers(&with(1.0), &mut Headers::default()));
        assert_eq!(Rst.after_response(&with(1.0)), None);
    }
}
