//! resolvelab-scenario (work in progress).
#![deny(missing_docs)]
