//! `proxy-next-upstream-off`: no retry of a failed first try.

use super::model::walk_all;
use super::{ALL, Hit, Rule, hit};
use crate::Severity;
use crate::load::Config;

/// What the rule is.
pub const RULE: Rule = Rule {
    id: "proxy-next-upstream-off",
    severity: Severity::Warning,
    title: "`proxy_next_upstream off` (or `fastcgi_`/`grpc_`/`uwsgi_`/`scgi_next_upstream off`, or `*_next_upstream_tries 1`)",
    explain: "Everyday first-try failures (keep-alive reclaim races, deploys, resets) are normally hidden by a retry; with retries off every one becomes a client 502 (measured: 1,418 first-try failures, 0 client errors with retries on).",
    fix: "remove it or use `proxy_next_upstream error timeout;`",
    versions: ALL,
    scenario: Some("generation-race-control"),
};

/// `*_next_upstream off` and `*_next_upstream_tries 1`: no retry at all.
pub(super) fn check(cfg: &Config, hits: &mut Vec<Hit>) {
    for d in walk_all(&cfg.root) {
        let name = d.name.value.as_str();
        let off = name.ends_with("_next_upstream") && d.arg(0) == Some("off");
        // One try is no retry: the same as `off`.
        let one_try = name.ends_with("_next_upstream_tries") && d.arg(0) == Some("1");
        if off || one_try {
            hits.push(hit(&RULE,
                &d.args[0],
                d.file,
                format!(
                    "`{name} {}`: every first-try failure (keep-alive reclaim race, deploy, reset) becomes a client 502 instead of being retried",
                    d.args[0].value
                ),
            ));
        }
    }
}
