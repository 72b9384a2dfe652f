//! `resolve-single-name`: one `resolve` name in an upstream: every answer change is a generation race.

use super::model::{ServerLine, by_name};
use super::{Hit, RESOLVE, Rule, hit};
use crate::Severity;

/// What the rule is.
pub const RULE: Rule = Rule {
    id: "resolve-single-name",
    severity: Severity::Warning,
    title: "one `resolve` name without a fixed per-DC alternative (generation-race exposure)",
    explain: "Every change of the name's answer swaps the peer and bumps the upstream's generation; a request whose retry (or first pick) crosses the swap is refused with `no live upstreams` (measured 101 of 36,001 requests, all within 12-486 ms after a swap). max_fails=0 and backup servers do not help this path.",
    fix: "point the upstream at fixed per-DC names (`server dc1.internal:443 resolve max_fails=2 fail_timeout=5s; server dc2.internal:443 resolve max_fails=2 fail_timeout=5s;`, see `resolvelab run per-dc`), or retry once with `error_page 502 = @retry_once` plus a GET/HEAD/OPTIONS guard",
    versions: RESOLVE,
    scenario: Some("generation-race"),
};

/// An upstream whose primary `resolve` lines follow one name.
pub(super) fn check(
    uname: &str,
    lines: &[ServerLine],
    resolve_lines: &[&ServerLine],
    hits: &mut Vec<Hit>,
) {
    let (by_name, static_primary) = by_name(lines, resolve_lines);
    if by_name.len() != 1 {
        return;
    }
    let (name, group) = by_name.iter().next().expect("one entry");
    let first = group[0];
    let extra = if static_primary > 0 {
        format!(
            " (the {static_primary} static server line(s) beside it share its peer list and generation)"
        )
    } else {
        String::new()
    };
    hits.push(hit(
        &RULE,
        first.addr,
        first.d.file,
        format!(
            "upstream `{uname}` follows one DNS name `{name}` with `resolve`{extra}: every answer change swaps the peer and bumps the generation, and a request whose retry (or first pick) crosses the swap fails with `no live upstreams`"
        ),
    ));
}
