//! The open-loop schedule of a rate plan: [`RatePlan`] and its [`Schedule`], the lab's
//! vocabulary in `resolvelab_core::spec` (a scenario counts its planned requests before the load
//! generator runs).

pub use resolvelab_core::spec::rate::{RatePlan, Stage};
pub use resolvelab_core::spec::schedule::Schedule;
