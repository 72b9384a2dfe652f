//! `retry-shim-recursive`: a retry shim with `recursive_error_pages on`.

use super::model::{Model, retry_shims};
use super::{ALL, Hit, Rule, hit};
use crate::Severity;
use std::collections::HashSet;

/// What the rule is.
pub const RULE: Rule = Rule {
    id: "retry-shim-recursive",
    severity: Severity::Warning,
    title: "`error_page 502` retry shim with `recursive_error_pages on`",
    explain: "The shim stops after exactly two passes only because recursive_error_pages is off by default; with it on, a persistent 502 is retried again and again (up to nginx's 10 internal redirects) under load.",
    fix: "remove `recursive_error_pages on` (the default off ends the shim after one retry)",
    versions: ALL,
    scenario: Some("retry-shim"),
};

/// Each `recursive_error_pages on` (once) in effect where a retry shim applies.
pub(super) fn check(m: &Model, hits: &mut Vec<Hit>) {
    let mut seen: HashSet<(usize, u32, u32)> = HashSet::new();
    for shim in retry_shims(m) {
        let target = shim.target;
        if let Some(rec) = shim.loc.inh.recursive
            && rec.arg(0) == Some("on")
        {
            let key = (rec.file, rec.name.span.line, rec.name.span.col);
            if seen.insert(key) {
                hits.push(hit(
                    &RULE,
                    &rec.args[0],
                    rec.file,
                    format!(
                        "`recursive_error_pages on` applies to the `error_page 502 … @{target}` retry shim: a 502 from the retry can be redirected again (up to nginx's 10 internal redirects) instead of ending after two passes"
                    ),
                ));
            }
        }
    }
}
