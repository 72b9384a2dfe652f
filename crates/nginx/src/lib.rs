//! resolvelab-nginx (work in progress).
#![deny(missing_docs)]

/// One line describing the nginx the tool would use.
pub fn describe(_explicit: Option<&std::path::Path>) -> String {
    "not built yet".into()
}
