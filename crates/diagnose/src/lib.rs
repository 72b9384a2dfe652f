//! resolvelab-diagnose (work in progress).
#![deny(missing_docs)]
