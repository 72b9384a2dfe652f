//! resolvelab-load (work in progress).
#![deny(missing_docs)]
