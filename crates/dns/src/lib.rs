//! resolvelab-dns (work in progress).
#![deny(missing_docs)]
