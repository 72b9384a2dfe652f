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

/// The central 95 % range of a Poisson count with mean `mu`: the smallest `lo` with
/// P(X ≤ lo) ≥ 2.5 % and the smallest `hi` with P(X ≤ hi) ≥ 97.5 %. This is the bound on a
/// *pooled* rare count (first-pick races over every run) against the model's expectation.
pub fn expected_count_95(mu: f64) -> (u64, u64) {
    let mu = if mu.is_finite() { mu.max(0.0) } else { 0.0 };
    if mu > 500.0 {
        // e^-mu underflows past ~745; the normal approximation is exact enough this far out.
        let s = 1.96 * mu.sqrt();
        return ((mu - s).floor() as u64, (mu + s).ceil() as u64);
    }
    let (mut p, mut k) = ((-mu).exp(), 0u64);
    let mut cdf = p;
    let mut lo = None;
    // Bounded: far past the mean the tail is below 2.5 % (and `p` underflows harmlessly).
    while k < 10_000_000 {
        if lo.is_none() && cdf >= 0.025 {
            lo = Some(k);
        }
        if cdf >= 0.975 {
            break;
        }
        k += 1;
        p *= mu / k as f64;
        cdf += p;
    }
    (lo.unwrap_or(k), k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pooled_interval_matches_the_poisson_quantiles() {
        assert_eq!(expected_count_95(0.0), (0, 0));
        // Poisson(1): P(0)=.368 → lo 0; P(≤3)=.981 → hi 3.
        assert_eq!(expected_count_95(1.0), (0, 3));
        // Poisson(10): 2.5 % at 4 (P(≤4)=.029), 97.5 % at 17 (P(≤17)=.986, P(≤16)=.973).
        assert_eq!(expected_count_95(10.0), (4, 17));
    }
}
