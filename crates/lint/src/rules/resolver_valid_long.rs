//! `resolver-valid-long`: `valid` of 30 s or more.

use super::model::param;
use super::{ALL, Hit, Rule, hit};
use crate::Severity;
use crate::parse::Directive;
use resolvelab_core::spec::nginx::time_ms as parse_time_ms;
use resolvelab_core::spec::nginx::time_text as fmt_ms;

/// What the rule is.
pub const RULE: Rule = Rule {
    id: "resolver-valid-long",
    severity: Severity::Info,
    title: "`valid` of 30 s or more: longer DNS outages and slower failover (a trade-off)",
    explain: "nginx requeries every valid+1 s and keeps an NXDOMAIN for the whole period: valid=30s made a 6 s NXDOMAIN a 31 s outage (5.2x) and GSLB failover 3.2x slower (12.2 s vs 3.8 s mean). A moved backend is followed only as late: its old address keeps failing until the cached answer expires (stale-address scenario, valid=5s: 1.3 s per request, 1.7 s with `resolve`; `sim predict --moves-per-day` puts the mean outage per move at 2.6 s / 3.3 s with valid=5s and 13.5 s / 12.5 s with valid=30s). It does lower the swap rate, which is why it may be a deliberate trade-off.",
    fix: "use `valid=5s` unless fewer swaps are worth longer outages; suppress with a reason if deliberate",
    versions: ALL,
    scenario: Some("nxdomain"),
};

/// A resolver line (each one once) whose `valid` is 30 s or more.
pub(super) fn check(r: &Directive, hits: &mut Vec<Hit>) {
    let valid = param(r, "valid").and_then(|(v, w)| parse_time_ms(v).map(|ms| (ms, w)));
    if let Some((ms, w)) = valid
        && ms >= 30_000
    {
        hits.push(hit(
            &RULE,
            w,
            r.file,
            format!(
                "`{}`: nginx requeries every {} and keeps an NXDOMAIN for that long, so a brief NXDOMAIN empties the upstream for about {} (6s with valid=5s); failover is slower too, and a backend that moves is followed up to {} late (its old address fails until then)",
                w.value,
                fmt_ms(ms + 1000),
                fmt_ms(ms + 1000),
                fmt_ms(ms + 1000)
            ),
        ));
    }
}
