//! `close-after-headers`: send the response headers, then close before the body, as a backend
//! that dies mid-response does (nginx logs `upstream prematurely closed connection`).

use super::hooks::{Behaviour, Headers};
use resolvelab_inject::gate::Gate;

/// The `close-after-headers` fault.
#[derive(Debug)]
pub(crate) struct CloseAfterHeaders;

impl Behaviour for CloseAfterHeaders {
    fn before_headers(&self, gate: &Gate, h: &mut Headers) -> bool {
        if h.cut || !gate.roll() {
            return false;
        }
        h.cut = true;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::super::hooks::test_gate::with;
    use super::*;

    #[test]
    fn cuts_once() {
        let mut h = Headers::default();
        assert!(CloseAfterHeaders.before_headers(&with(1.0), &mut h));
        assert!(!CloseAfterHeaders.before_headers(&with(1.0), &mut h));
        assert!(h.cut);
    }
}
