//! `status`: answer with this status code, as a backend's own error page does.

use super::hooks::{Behaviour, Headers};
use resolvelab_inject::gate::Gate;

/// The `status` fault.
#[derive(Debug)]
pub(crate) struct Status {
    /// The status code.
    pub(crate) code: u16,
}

impl Behaviour for Status {
    fn before_headers(&self, gate: &Gate, h: &mut Headers) -> bool {
        // The first status fault that fires decides; later ones do not draw.
        if h.status.is_some() || !gate.roll() {
            return false;
        }
        h.status = Some(self.code);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::super::hooks::test_gate::with;
    use super::*;

    #[test]
    fn the_first_status_wins() {
        let mut h = Headers::default();
        assert!(Status { code: 503 }.before_headers(&with(1.0), &mut h));
        assert!(!Status { code: 500 }.before_headers(&with(1.0), &mut h));
        assert_eq!(h.status, Some(503));
        let mut h = Headers::default();
        assert!(!Status { code: 503 }.before_headers(&with(0.0), &mut h));
        assert_eq!(h, Headers::default());
    }
}
