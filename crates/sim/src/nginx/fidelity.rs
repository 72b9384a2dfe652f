//! The agreement rules of docs/FIDELITY.md, as functions: the lab and the model agree on a count
//! when each lies in the other's Poisson 95 % interval, and on a duration when they are within
//! 10 %. The bound is fixed here so nobody loosens it per scenario.
//!
//! ```
//! use resolvelab_sim::nginx::fidelity::{counts_agree, durations_agree};
//! assert!(counts_agree(41, 42));      // §8 lab vs model, generation race
//! assert!(!counts_agree(41, 120));
//! assert!(counts_agree(0, 0));
//! assert!(durations_agree(10_113.0, 10_500.0));
//! assert!(!durations_agree(6_000.0, 10_000.0));
//! ```

use super::predict::poisson_95;

/// Relative tolerance on durations.
pub const DURATION_TOLERANCE: f64 = 0.10;

/// Do two counts (lab, model) agree within the Poisson 95 % bound of each other?
pub fn counts_agree(lab: u64, model: u64) -> bool {
    let inside = |x: u64, around: u64| {
        let (lo, hi) = poisson_95(around);
        (x as f64) >= lo.floor() && (x as f64) <= hi.ceil()
    };
    inside(lab, model) && inside(model, lab)
}

/// Do two durations agree within [`DURATION_TOLERANCE`] (relative to the lab's)?
pub fn durations_agree(lab_ms: f64, model_ms: f64) -> bool {
    if lab_ms == 0.0 {
        return model_ms == 0.0;
    }
    ((model_ms - lab_ms) / lab_ms).abs() <= DURATION_TOLERANCE
}
