//! resolvelab-lint (work in progress).
#![deny(missing_docs)]
