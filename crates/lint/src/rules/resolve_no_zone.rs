//! `resolve-no-zone`: `resolve` in an upstream without `zone`.

use super::model::find;
use super::{Hit, RESOLVE, Rule, hit};
use crate::Severity;
use crate::parse::Directive;

/// What the rule is.
pub const RULE: Rule = Rule {
    id: "resolve-no-zone",
    severity: Severity::Error,
    title: "`resolve` in an upstream without `zone`",
    explain: "nginx refuses the configuration: resolving names at run time requires the upstream to be in shared memory.",
    fix: "add `zone NAME 128k;` to the upstream",
    versions: RESOLVE,
    scenario: Some("swap-only"),
};

/// An upstream with `resolve` lines and no `zone`.
pub(super) fn check(up: &Directive, uname: &str, hits: &mut Vec<Hit>) {
    if find(up.children(), "zone").is_some() {
        return;
    }
    hits.push(hit(
        &RULE,
        &up.name,
        up.file,
        format!(
            "upstream `{uname}` has `resolve` servers but no `zone`: nginx refuses it (resolving names at run time requires upstream \"{uname}\" to be in shared memory)"
        ),
    ));
}
