//! `resolver-ipv6`: a `resolver` that also asks for AAAA records.

use super::model::param;
use super::{Hit, RESOLVE, Rule, hit};
use crate::Severity;
use crate::parse::Directive;

/// What the rule is.
pub const RULE: Rule = Rule {
    id: "resolver-ipv6",
    severity: Severity::Warning,
    title: "resolver without `ipv6=off` where AAAA is not intended",
    explain: "With ipv6 on (the default) nginx asks for A and AAAA; an unplanned AAAA answer adds a peer (often unreachable), turning one peer into two: the single-peer guard is off, max_fails=1 fail_timeout=10s applies, and a short backend hiccup becomes a wipeout.",
    fix: "add `ipv6=off` to the `resolver` line (no side effect when the backends are IPv4)",
    versions: RESOLVE,
    scenario: Some("aaaa-pollution"),
};

/// A resolver line (each one once) without `ipv6=off` (or `ipv4=off`).
pub(super) fn check(r: &Directive, hits: &mut Vec<Hit>) {
    let ipv6_off = param(r, "ipv6").is_some_and(|(v, _)| v == "off");
    let ipv4_off = param(r, "ipv4").is_some_and(|(v, _)| v == "off");
    if !ipv6_off && !ipv4_off {
        hits.push(hit(
            &RULE,
            &r.name,
            r.file,
            "`resolver` without `ipv6=off`: nginx also asks for AAAA records, and an unplanned AAAA answer adds a peer (often one nothing listens on) — the single-peer guard turns off and a short backend hiccup can become a max_fails wipeout".into(),
        ));
    }
}
