//! `resolve-unsupported-version`: `resolve` or an upstream `resolver` on nginx < 1.27.3.

use super::model::ServerLine;
use super::{Hit, Rule, hit};
use crate::Severity;
use crate::parse::Directive;
use crate::version::RESOLVE_SINCE;
use crate::version::Versions;

/// What the rule is.
pub const RULE: Rule = Rule {
    id: "resolve-unsupported-version",
    severity: Severity::Error,
    title: "`resolve`, or a `resolver` inside `upstream`, on nginx < 1.27.3",
    explain: "Open-source nginx accepts `server … resolve`, and `resolver`/`resolver_timeout` inside an upstream block, only since 1.27.3; older versions refuse the configuration (`invalid parameter \"resolve\"`, `\"resolver\" directive is not allowed here`) and have no generation check.",
    fix: "upgrade to nginx >= 1.27.3, or resolve the name at startup only (drop `resolve`)",
    versions: Versions::Below(RESOLVE_SINCE),
    scenario: Some("swap-only"),
};

/// `resolver`/`resolver_timeout` inside an upstream and `resolve` on its server lines, on an
/// nginx older than [`RESOLVE_SINCE`], which refuses them.
pub(super) fn check(
    dirs: &[Directive],
    resolve_lines: &[&ServerLine],
    uname: &str,
    v: crate::version::Version,
    hits: &mut Vec<Hit>,
) {
    for d in dirs
        .iter()
        .filter(|d| ["resolver", "resolver_timeout"].contains(&d.name.value.as_str()))
    {
        hits.push(hit(
            &RULE,
            &d.name,
            d.file,
            format!(
                "`{}` inside upstream `{uname}` needs nginx >= {RESOLVE_SINCE}; nginx {v} refuses it (\"directive is not allowed here\"): before {RESOLVE_SINCE} only http{{}}, server{{}} and location{{}} take a resolver",
                d.name.value
            ),
        ));
    }
    for s in resolve_lines {
        let w = (s.d.args.iter())
            .find(|w| w.value == "resolve")
            .unwrap_or(s.addr);
        hits.push(hit(
            &RULE,
            w,
            s.d.file,
            format!(
                "`resolve` on `{}` in upstream `{uname}` needs nginx >= {RESOLVE_SINCE}; this configuration is for nginx {v}, which refuses it",
                s.addr.value
            ),
        ));
    }
}
