//! resolvelab-report (work in progress).
#![deny(missing_docs)]
