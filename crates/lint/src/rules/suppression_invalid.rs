//! `suppression-invalid`: a malformed `# resolvelab: ignore` comment (checked in `crate::suppress`).

use super::{ALL, Rule};
use crate::Severity;

/// What the rule is.
pub const RULE: Rule = Rule {
    id: "suppression-invalid",
    severity: Severity::Error,
    title: "malformed `# resolvelab: ignore` comment",
    explain: "A suppression must name a known rule and give a reason: `# resolvelab: ignore RULE reason`.",
    fix: "write `# resolvelab: ignore RULE why this is deliberate`",
    versions: ALL,
    scenario: None,
};
