//! `reclaim`: after a response, close the idle keep-alive connection silently after a random
//! delay in the range; a request that arrives in that gap is never answered. This is the
//! keep-alive reclaim race of DOMAIN.md §5.

use super::hooks::Behaviour;
use resolvelab_core::dur;
use resolvelab_inject::gate::Gate;
use std::time::Duration;

/// The `reclaim` fault.
#[derive(Debug)]
pub(crate) struct Reclaim {
    /// The delay between the response and the close.
    pub(crate) delay: dur::Range,
}

impl Behaviour for Reclaim {
    fn after_response(&self, gate: &Gate) -> Option<Duration> {
        // The delay is drawn from the fault's own stream, after the toxicity draw.
        gate.roll().then(|| self.delay.at(gate.unit()))
    }
}

#[cfg(test)]
mod tests {
    use super::super::hooks::test_gate::with;
    use super::*;

    #[test]
    fn dooms_the_connection_within_the_range() {
        let f = Reclaim {
            delay: dur::Range::parse("10ms..20ms").unwrap(),
        };
        let d = f.after_response(&with(1.0)).unwrap();
        assert!(
            d >= Duration::from_millis(10) && d <= Duration::from_millis(20),
            "{d:?}"
        );
        assert_eq!(f.after_response(&with(0.0)), None);
    }
}
