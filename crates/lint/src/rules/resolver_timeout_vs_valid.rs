//! `resolver-timeout-vs-valid`: `resolver_timeout` longer than `valid`.

use super::model::param;
use super::{Hit, RESOLVE, Rule, hit};
use crate::Severity;
use crate::parse::Directive;
use resolvelab_core::spec::nginx::time_ms as parse_time_ms;
use resolvelab_core::spec::nginx::time_text as fmt_ms;

/// What the rule is.
pub const RULE: Rule = Rule {
    id: "resolver-timeout-vs-valid",
    severity: Severity::Warning,
    title: "`resolver_timeout` longer than `valid`",
    explain: "A failed (SERVFAIL) or timed-out requery keeps the old peers and is retried only after max(resolver_timeout, 1 s) (nginx resends a silent query every 5 s until resolver_timeout); with the default 30 s a GSLB failover that coincides with a DNS hiccup is picked up 30-60 s late instead of within valid+1 s.",
    fix: "set `resolver_timeout` below `valid` (e.g. `resolver_timeout 3s;` with `valid=5s`)",
    versions: RESOLVE,
    scenario: Some("dns-silent"),
};

/// A resolver line (each one once) and the `resolver_timeout` in its scope.
pub(super) fn check(r: &Directive, timeout: Option<&Directive>, hits: &mut Vec<Hit>) {
    let valid = param(r, "valid").and_then(|(v, w)| parse_time_ms(v).map(|ms| (ms, w)));
    if let Some((valid_ms, vw)) = valid {
        let t = timeout.and_then(|t| t.arg(0).and_then(parse_time_ms).map(|ms| (ms, t)));
        let t_ms = t.map_or(30_000, |(ms, _)| ms);
        if t_ms > valid_ms {
            let (at, file, what) = match t {
                Some((_, d)) => (
                    &d.args[0],
                    d.file,
                    format!("`resolver_timeout {}`", d.args[0].value),
                ),
                None => (
                    vw,
                    r.file,
                    "`resolver_timeout` is not set (default 30s) and".into(),
                ),
            };
            hits.push(hit(&RULE,
                at,
                file,
                format!(
                    "{what} exceeds `valid={}`: after a failed (SERVFAIL) or timed-out requery nginx keeps the old peers and asks again only after max(resolver_timeout, 1s) = {}, so a GSLB failover that coincides with a DNS hiccup is picked up {}-{} late instead of within {}",
                    fmt_ms(valid_ms),
                    fmt_ms(t_ms.max(1000)),
                    fmt_ms(t_ms.max(1000)),
                    fmt_ms(t_ms + t_ms.max(1000)),
                    fmt_ms(valid_ms + 1000)
                ),
            ));
        }
    }
}
