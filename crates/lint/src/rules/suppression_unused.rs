//! `suppression-unused`: a suppression that matches no finding (checked in `crate::suppress`).

use super::{ALL, Rule};
use crate::Severity;

/// What the rule is.
pub const RULE: Rule = Rule {
    id: "suppression-unused",
    severity: Severity::Info,
    title: "suppression that matches no finding",
    explain: "The suppressed finding is gone (or the comment is not next to it); a stale suppression would hide a future finding silently.",
    fix: "remove the comment, or move it onto the line of the finding (or the line just above)",
    versions: ALL,
    scenario: None,
};
