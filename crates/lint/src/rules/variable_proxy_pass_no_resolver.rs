//! `variable-proxy-pass-no-resolver`: a per-request resolution with no `resolver`.

use super::model::{Model, pass_host, passes, upstream_names};
use super::{ALL, Hit, Rule, hit};
use crate::Severity;
use crate::load::Config;
use crate::parse::Directive;
use std::collections::HashSet;

/// What the rule is.
pub const RULE: Rule = Rule {
    id: "variable-proxy-pass-no-resolver",
    severity: Severity::Error,
    title: "a `*_pass` resolved per request (a variable in its URL) with no `resolver` in scope",
    explain: "When the URL of `proxy_pass` (or fastcgi/grpc/uwsgi/scgi/memcached_pass) has a variable and its host is neither an IP address nor an upstream block, nginx resolves the host for every request through `resolver` — and with no resolver in the enclosing location, server or http block every such request fails with 502 and `no resolver defined to resolve NAME` in the error log.",
    fix: "add `resolver ADDRESS valid=5s ipv6=off;` (Docker: `resolver 127.0.0.11 valid=5s;`; Kubernetes: the cluster DNS service) in the http, server or location block, or point the URL at an upstream block",
    versions: ALL,
    scenario: Some("stale-address"),
};

/// Every `*_pass` with a variable in its URL, resolved per request, outside any resolver.
pub(super) fn check(cfg: &Config, m: &Model, hits: &mut Vec<Hit>) {
    let upstreams = upstream_names(m);
    for (d, scoped) in passes(cfg) {
        check_pass(d, scoped, &upstreams, hits);
    }
}

fn check_pass(d: &Directive, scoped: bool, upstreams: &HashSet<String>, hits: &mut Vec<Hit>) {
    let Some(url) = d.args.first() else { return };
    let Some(host) = pass_host(&url.value) else {
        return;
    };
    let dir = &d.name.value;
    if !(host.starts_with('$') || url.value.contains('$')) {
        return;
    }
    let literal = !host.starts_with('$');
    if scoped
        || literal
            && (host.parse::<std::net::IpAddr>().is_ok()
                || upstreams.contains(&host.to_ascii_lowercase()))
    {
        return;
    }
    let what = if literal {
        format!("the host `{host}`")
    } else {
        format!("the host in `{host}`")
    };
    hits.push(hit(
        &RULE,
        url,
        d.file,
        format!(
            "`{dir} {}` has a variable, so nginx resolves {what} for every request — and no `resolver` is in scope: every request here fails with 502 (`no resolver defined to resolve …`)",
            url.value
        ),
    ));
}
