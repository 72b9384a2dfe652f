//! resolvelab-history (work in progress).
#![deny(missing_docs)]
