//! `upstream-no-keepalive`: an upstream without `keepalive`.

use super::model::{Users, find};
use super::{Hit, Rule, hit};
use crate::LintOptions;
use crate::Severity;
use crate::parse::Directive;
use crate::version::Versions;
use resolvelab_core::version::KEEPALIVE_DEFAULT_SINCE;

/// What the rule is.
pub const RULE: Rule = Rule {
    id: "upstream-no-keepalive",
    severity: Severity::Info,
    title: "upstream without `keepalive` (port exhaustion at high rate)",
    explain: "Without upstream keep-alive every request opens a new connection; at a few hundred requests per second to one address the ephemeral ports run out (`connect() failed (99: Cannot assign requested address)`, bursts with a ~56 s period). nginx 1.29.7 and later keep 32 idle connections per worker by default (measured: `resolvelab compare port-exhaustion --variant netns` fails 20,000 of 21,000 requests on 1.28.3 and none on 1.31.3, docs/COMPARISON.md).",
    fix: "add `keepalive 64;` to the upstream with `proxy_http_version 1.1; proxy_set_header Connection \"\";` in the location (or upgrade to nginx >= 1.29.7, where keep-alive is the default)",
    versions: Versions::BeforeDefault(KEEPALIVE_DEFAULT_SINCE),
    scenario: Some("port-exhaustion"),
};

/// A proxied upstream without `keepalive` (a warning at `--rps` 100 or more, nothing below).
pub(super) fn check(
    up: &Directive,
    uname: &str,
    users: &Users,
    opts: &LintOptions,
    hits: &mut Vec<Hit>,
) {
    if !users.contains_key(&uname.to_ascii_lowercase()) {
        return;
    }
    if find(up.children(), "keepalive").is_none() {
        let mut h = hit(
            &RULE,
            &up.name,
            up.file,
            format!(
                "upstream `{uname}` has no `keepalive`: every proxied request opens a new connection, and at a few hundred requests per second the ephemeral ports run out (`connect() failed (99: Cannot assign requested address)`)"
            ),
        );
        match opts.rps {
            Some(r) if r >= 100 => {
                h.severity = Severity::Warning;
                h.message.push_str(&format!(" — expected rate {r} rps"));
            }
            Some(_) => return,
            None => {}
        }
        hits.push(h);
    }
}
