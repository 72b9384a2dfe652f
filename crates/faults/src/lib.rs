//! resolvelab-faults (work in progress).
#![deny(missing_docs)]
