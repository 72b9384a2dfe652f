//! resolvelab-sim (work in progress).
#![deny(missing_docs)]
