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

// A library says what it has to say through `resolvelab_core::progress`, never on its own
// stdout/stderr, and links only what it uses (docs/ARCHITECTURE.md, "Lints").
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]
#![cfg_attr(not(test), deny(unused_crate_dependencies))]

pub mod control;
pub mod gate;
pub mod net;
