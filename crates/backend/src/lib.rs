//! resolvelab-backend (work in progress).
#![deny(missing_docs)]
