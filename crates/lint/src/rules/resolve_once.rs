//! `resolve-once`: a backend name resolved once, at start.

use super::model::{Model, pass_host, passes, server_line, upstream_names};
use super::{ALL, Hit, Rule, hit};
use crate::Severity;
use crate::load::Config;
use crate::parse::Directive;
use std::collections::HashSet;

/// What the rule is.
pub const RULE: Rule = Rule {
    id: "resolve-once",
    severity: Severity::Warning,
    title: "a backend hostname resolved once, at start: a pin until the next reload (stale address)",
    explain: "A name in an upstream `server` line without `resolve`, or in a `proxy_pass` without variables, is resolved when nginx starts or reloads and never again: when the backend moves (a container or pod restart, a VIP change) nginx keeps sending to the old address — connection refused or timed out, 502/504 for every request — until someone reloads it. This is the most common DNS failure reported around nginx. And while the name does not resolve (its container stopped), nginx refuses to start (`[emerg] host not found in upstream`: every vhost of the config is down) and refuses every reload (the running configuration keeps serving; lab scenarios `reload-nxdomain` and `restart-nxdomain`: a restart then leaves nginx down until the name resolves and it is started again).",
    fix: "make nginx follow the name: `server NAME:PORT resolve;` with a `zone` and a `resolver … valid=5s` (nginx >= 1.27.3), or resolve per request with a variable (`set $backend NAME; proxy_pass http://$backend:PORT;`) and a `resolver`; otherwise reload nginx whenever the backend moves",
    versions: ALL,
    scenario: Some("stale-address"),
};

/// When nginx resolves the names it sends to: once at start (static `server` lines and static
/// `*_pass` URLs: `resolve-once`), or per request through a `resolver` (a variable in the URL:
/// `variable-proxy-pass-no-resolver` when none is in scope). `localhost` comes from
/// /etc/hosts and cannot move; IP addresses, `unix:` sockets and upstream names are not
/// resolved at all.
pub(super) fn check(cfg: &Config, m: &Model, hits: &mut Vec<Hit>) {
    let upstreams = upstream_names(m);
    for &(up, _) in &m.upstreams {
        let uname = up.arg(0).unwrap_or("?");
        for s in up
            .children()
            .iter()
            .filter_map(|d| (d.name.value == "server").then(|| server_line(d)).flatten())
        {
            if let Some(name) = s
                .name
                .as_deref()
                .filter(|n| !s.resolve() && *n != "localhost")
            {
                hits.push(hit(&RULE,
                    s.addr,
                    s.d.file,
                    format!(
                        "`server {}` in upstream `{uname}` is resolved once, when nginx starts or reloads: if `{name}` moves, nginx keeps sending to the old address until the next reload; and while `{name}` does not resolve, nginx cannot start and refuses every reload (`host not found in upstream`)",
                        s.addr.value
                    ),
                ));
            }
        }
    }
    for (d, _) in passes(cfg) {
        check_pass(d, &upstreams, hits);
    }
}

/// A `*_pass` whose URL names a host without variables.
fn check_pass(d: &Directive, upstreams: &HashSet<String>, hits: &mut Vec<Hit>) {
    let Some(url) = d.args.first() else { return };
    let Some(host) = pass_host(&url.value) else {
        return;
    };
    let dir = &d.name.value;
    if host.starts_with('$') || url.value.contains('$') {
        return;
    }
    let name = host.to_ascii_lowercase();
    if name == "localhost" || name.parse::<std::net::IpAddr>().is_ok() || upstreams.contains(&name)
    {
        return;
    }
    hits.push(hit(&RULE,
        url,
        d.file,
        format!(
            "`{dir} {}` names `{host}`, which nginx resolves once, when it starts or reloads: if it moves, nginx keeps sending to the old address until the next reload; and while it does not resolve, nginx cannot start and refuses every reload (`host not found in upstream`)",
            url.value
        ),
    ));
}
