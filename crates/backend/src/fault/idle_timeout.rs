//! `idle-timeout`: close keep-alive connections that stay idle this long, as a backend with a
//! short keep-alive timeout does (the close nginx may race with its next request).

use super::hooks::Behaviour;
use resolvelab_inject::gate::Gate;
use std::time::Duration;

/// The `idle-timeout` fault.
#[derive(Debug)]
pub(crate) struct IdleTimeout {
    /// Idle time before the close.
    pub(crate) after: Duration,
}

impl Behaviour for IdleTimeout {
    fn idle_close(&self, gate: &Gate) -> Option<Duration> {
        gate.roll().then_some(self.after)
    }
}

#[cfg(test)]
mod tests {
    use super::super::hooks::test_gate::with;
    use super::*;

    #[test]
    fn arms_an_idle_close_per_connection() {
        let f = IdleTimeout {
            after: Duration::from_millis(300),
        };
        assert_eq!(f.idle_close(&with(1.0)), Some(Duration::from_millis(300)));
        assert_eq!(f.idle_close(&with(0.0)), None);
    }
}
