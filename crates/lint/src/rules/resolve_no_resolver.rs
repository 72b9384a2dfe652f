//! `resolve-no-resolver`: `resolve` with no resolver in scope.

use super::model::{Model, ServerLine, find};
use super::{Hit, RESOLVE, Rule, hit};
use crate::Severity;
use crate::load::Config;

/// What the rule is.
pub const RULE: Rule = Rule {
    id: "resolve-no-resolver",
    severity: Severity::Error,
    title: "`resolve` server with no resolver declared",
    explain: "nginx refuses the configuration (`no resolver defined to resolve names at run time`): the upstream needs a `resolver` in the upstream block or at http level (a resolver inside server{} does not count).",
    fix: "add `resolver ADDRESS valid=5s ipv6=off;` to the upstream block or to http{}",
    versions: RESOLVE,
    scenario: Some("swap-only"),
};

/// Upstream `uname` resolves at run time with no resolver in scope: nginx refuses it (in a
/// fragment, unless the including context declares one).
pub(super) fn check(cfg: &Config, m: &Model, ctx: &str, uname: &str, first: &ServerLine) -> Hit {
    let mut message = format!(
        "upstream `{uname}` resolves `{}` at run time but no resolver is declared in the upstream or in {ctx}{{}}: nginx refuses it (no resolver defined to resolve names at run time)",
        first.addr.value
    );
    let in_server = m
        .servers
        .iter()
        .find_map(|s| find(s.children(), "resolver"))
        .filter(|_| ctx == "http");
    if let Some(r) = in_server {
        message.push_str(&format!(
            "; the `resolver` at {}:{} is inside server{{}} and does not apply to upstreams",
            cfg.files[r.file].name, r.name.span.line
        ));
    }
    let mut h = hit(&RULE, first.addr, first.d.file, message);
    if cfg.fragment {
        // The including http{} is not in the input: nginx refuses this only if it
        // has no resolver either.
        h.severity = Severity::Warning;
        h.message = format!(
            "upstream `{uname}` resolves `{}` at run time and no resolver is declared in the upstream or in this fragment: nginx refuses it unless the {ctx}{{}} that includes this file declares one (not in the input: lint the whole configuration, `nginx -T | resolvelab lint -`, to decide)",
            first.addr.value
        );
    }
    h
}
