//! `retry-shim-no-method-guard`: an `error_page 502` retry that resends POSTs.

use super::model::{Model, retry_shims, walk_all};
use super::{ALL, Hit, Rule, hit};
use crate::Severity;
use crate::parse::Directive;
use std::collections::HashSet;

/// What the rule is.
pub const RULE: Rule = Rule {
    id: "retry-shim-no-method-guard",
    severity: Severity::Warning,
    title: "`error_page 502` retry shim without a method guard",
    explain: "A named location that proxies again after a 502 resends non-idempotent requests (POST, PATCH) whose first attempt may have reached the backend.",
    fix: "guard the retry location: `if ($request_method !~ ^(GET|HEAD|OPTIONS)$) { return 502; }`",
    versions: ALL,
    scenario: Some("retry-shim"),
};

/// Each retry shim whose named location has no method guard (each `error_page` once).
pub(super) fn check(m: &Model, hits: &mut Vec<Hit>) {
    let mut seen: HashSet<(usize, u32, u32)> = HashSet::new();
    for shim in retry_shims(m) {
        let (ep, target) = (shim.error_page, shim.target);
        let key = (ep.file, ep.name.span.line, ep.name.span.col);
        if !has_method_guard(shim.named.d) && seen.insert(key) {
            hits.push(hit(
                &RULE,
                &ep.name,
                ep.file,
                format!(
                    "`error_page 502` sends failed requests to `@{target}`, which proxies again without a method guard: a POST whose body already reached the backend can be sent twice"
                ),
            ));
        }
    }
}

fn has_method_guard(loc: &Directive) -> bool {
    walk_all(loc.children()).into_iter().any(|d| {
        d.name.value == "limit_except"
            || (d.name.value == "if"
                && d.args.iter().any(|a| a.value.contains("$request_method"))
                && d.children().iter().any(|c| c.name.value == "return"))
    })
}
