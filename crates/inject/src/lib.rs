//! The fault runtime the backend and the proxy share, so that neither depends on the other:
//! a live fault's gate (toxicity rolled from its seeded stream, its `for` window, its hit
//! counter), the list of installed faults, a listener that a `refuse`/`down` fault can close and
//! reopen, and the control API's "add a fault" handler. What a fault *is* (its kinds and keys)
//! is the lab's vocabulary in `resolvelab_core::spec`; what it *does* is in the backend and the
//! proxy.
//!
//! ```
//! use resolvelab_core::spec::Spec;
//! use resolvelab_inject::gate::{Common, Gate};
//! let spec = Spec::parse("rst:toxicity=0.5,seed=7").unwrap();
//! let gate = Gate::new(Common::from_spec(&spec, &[]).unwrap());
//! let hits = (0..1000).filter(|_| gate.roll()).count();
//! assert!((400..600).contains(&hits));
//! ```

pub mod control;
pub mod gate;
pub mod net;
