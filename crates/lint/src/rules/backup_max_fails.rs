//! `backup-max-fails`: `backup` beside lines without `max_fails=0`.

use super::model::ServerLine;
use super::{ALL, Hit, Rule, hit};
use crate::Severity;

/// What the rule is.
pub const RULE: Rule = Rule {
    id: "backup-max-fails",
    severity: Severity::Warning,
    title: "`backup` without `max_fails=0` on every line of an upstream that resolves at run time",
    explain: "With a backup server the upstream has two peers, so max_fails=1 fail_timeout=10s applies: ordinary failures disable the primary and the backup for 10 s each — measured worse than no backup at all (904 vs 101 errors; fixed: 119). A backup does not help the generation race either.",
    fix: "add `max_fails=0` to every server line of the upstream (primary and backup)",
    versions: ALL,
    scenario: Some("backup"),
};

/// Every line of an upstream with a backup server that lacks `max_fails=0`.
pub(super) fn check(uname: &str, lines: &[ServerLine], hits: &mut Vec<Hit>) {
    if !lines.iter().any(|s| s.backup()) {
        return;
    }
    for s in lines.iter().filter(|s| !s.max_fails_zero()) {
        let at = s.max_fails_at();
        let role = if s.backup() { "backup" } else { "primary" };
        hits.push(hit(
            &RULE,
            at,
            s.d.file,
            format!(
                "upstream `{uname}` has a backup server, but this {role} line `{}` lacks `max_fails=0`: ordinary failures take it out for fail_timeout (default 10s) — measured worse than no backup",
                s.addr.value
            ),
        ));
    }
}
