//! `resolve-max-fails`: two or more peers possible without `max_fails=0`: the max_fails wipeout.

use super::model::{ServerLine, by_name};
use super::{Hit, RESOLVE, Rule, hit};
use crate::Severity;

/// What the rule is.
pub const RULE: Rule = Rule {
    id: "resolve-max-fails",
    severity: Severity::Warning,
    title: "two or more resolve peers possible without `max_fails=0` (max_fails wipeout)",
    explain: "With one peer nginx ignores max_fails; as soon as there are two (the same name on two lines, or a GSLB name that briefly answers two records) the hidden defaults max_fails=1 fail_timeout=10s apply, and one failure per peer disables every peer for 10 s (measured: 2.1 s of resets -> 5,209 NLU over 10.4 s; with max_fails=0: 0 NLU).",
    fix: "add `max_fails=0` to the resolve line(s), or remove the duplicate line; distinct per-DC names with an explicit max_fails are the recommended design",
    versions: RESOLVE,
    scenario: Some("dual-resolve"),
};

/// Each primary `resolve` line that can have a sibling peer and lacks `max_fails=0`.
pub(super) fn check(
    uname: &str,
    lines: &[ServerLine],
    resolve_lines: &[&ServerLine],
    hits: &mut Vec<Hit>,
) {
    let (by_name, static_primary) = by_name(lines, resolve_lines);
    for (name, group) in &by_name {
        for s in group {
            if s.max_fails_zero() {
                continue;
            }
            let current = match s.params.max_fails {
                Some(n) => format!("max_fails={n}"),
                None => "the hidden default max_fails=1 fail_timeout=10s".to_string(),
            };
            let at = s.max_fails_at();
            if group.len() >= 2 {
                let where_: Vec<String> = group
                    .iter()
                    .map(|g| g.d.name.span.line.to_string())
                    .collect();
                let mut h = hit(
                    &RULE,
                    at,
                    s.d.file,
                    format!(
                        "`{name}` is on {} `resolve` lines (lines {}) of upstream `{uname}`: there are always >= 2 peers, so {current} applies and one failure per peer disables every peer (a 1-hop `no live upstreams` burst of ~fail_timeout)",
                        group.len(),
                        where_.join(", ")
                    ),
                );
                h.severity = Severity::Error;
                h.fix = "add `max_fails=0` to each of these lines, or keep only one of them".into();
                hits.push(h);
            } else if by_name.len() == 1 {
                let mut h = hit(
                    &RULE,
                    at,
                    s.d.file,
                    if static_primary > 0 {
                        format!(
                            "upstream `{uname}` has {static_primary} static server line(s) beside `{name}`, so there are always >= 2 peers and {current} applies: one failure per peer disables every peer at once (a 1-hop `no live upstreams` burst)"
                        )
                    } else if s.params.service.is_some() {
                        format!(
                            "`{name}` is an SRV lookup (`service=`): upstream `{uname}` gets one peer per SRV record, so with two or more records {current} applies and one failure per peer disables every peer at once (a 1-hop `no live upstreams` burst)"
                        )
                    } else {
                        let outage = outage_armed(s.params.fail_timeout_ms);
                        match many_records(name) {
                            Some(kind) => format!(
                                "`{name}` looks like {kind}, which answers several records all the time: upstream `{uname}` has >= 2 peers and {current} applies, so one failure per peer disables every peer at once (a 1-hop `no live upstreams` burst){outage}"
                            ),
                            None => format!(
                                "`{name}` can answer two or more records (a GSLB during a transition, or any name with several A records); then upstream `{uname}` has >= 2 peers and {current} can disable all of them at once (a 1-hop `no live upstreams` burst){outage}"
                            ),
                        }
                    },
                );
                h.fix = "add `max_fails=0` to this line (a no-op while there is one peer), or move to per-DC names with an explicit max_fails".into();
                hits.push(h);
            } else if s.params.max_fails.is_none() {
                let mut h = hit(
                    &RULE,
                    s.addr,
                    s.d.file,
                    format!(
                        "upstream `{uname}` has {} resolve names, so the hidden defaults max_fails=1 fail_timeout=10s apply to `{name}`: one failure of each peer within 10 s empties the upstream",
                        by_name.len()
                    ),
                );
                h.fix = "state the policy explicitly: `max_fails=2 fail_timeout=5s` (per-DC design) or `max_fails=0`".into();
                hits.push(h);
            }
        }
    }
}

/// What kind of name answers several records all the time, by its shape: a cloud load
/// balancer, a Consul service or a Kubernetes service (headless services answer every pod).
fn many_records(name: &str) -> Option<&'static str> {
    let n = name.to_ascii_lowercase();
    let n = n.trim_end_matches('.');
    if n.ends_with(".elb.amazonaws.com")
        || n.contains(".elb.") && n.ends_with(".amazonaws.com")
        || n.ends_with(".cloudapp.azure.com")
        || n.ends_with(".cloudapp.net")
        || n.ends_with(".azurefd.net")
    {
        Some("a cloud load balancer's name")
    } else if n.ends_with(".consul") || n.contains(".service.consul") {
        Some("a Consul service")
    } else if n.ends_with(".svc.cluster.local") || n.ends_with(".svc") {
        Some("a Kubernetes service (a headless one answers one record per pod)")
    } else {
        None
    }
}

/// The outage an explicit `fail_timeout` arms (the length of a wipeout), when it is longer
/// than the 10 s default.
fn outage_armed(fail_timeout_ms: Option<u64>) -> String {
    match fail_timeout_ms {
        Some(ms) if ms > 10_000 => format!(
            "; `fail_timeout={}s` makes that outage last {} s",
            ms / 1000,
            ms / 1000
        ),
        _ => String::new(),
    }
}
