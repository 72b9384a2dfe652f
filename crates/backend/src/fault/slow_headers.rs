//! `slow-headers`: wait this long before sending the response headers, as a slow dependency
//! makes a backend do (nginx's `proxy_read_timeout` meets it).

use super::hooks::{Behaviour, Headers};
use resolvelab_inject::gate::Gate;
use std::time::Duration;

/// The `slow-headers` fault.
#[derive(Debug)]
pub(crate) struct SlowHeaders {
    /// The added delay.
    pub(crate) delay: Duration,
}

impl Behaviour for SlowHeaders {
    fn before_headers(&self, gate: &Gate, h: &mut Headers) -> bool {
        if !gate.roll() {
            return false;
        }
        h.delay += self.delay;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::super::hooks::test_gate::with;
    use super::*;

    #[test]
    fn delays_add_up() {
        let f = SlowHeaders {
            delay: Duration::from_millis(40),
        };
        let mut h = Headers::default();
        assert!(f.before_headers(&with(1.0), &mut h));
        assert!(f.before_headers(&with(1.0), &mut h));
        assert_eq!(h.delay, Duration::from_millis(80));
        assert!(!f.before_headers(&with(0.0), &mut h));
    }
}
