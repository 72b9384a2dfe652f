//! `keepalive-ineffective`: `keepalive` that no connection can use.

use super::model::{Loc, Users, find};
use super::{ALL, Hit, Rule, hit};
use crate::LintOptions;
use crate::Severity;
use crate::parse::Directive;
use resolvelab_core::version::KEEPALIVE_DEFAULT_SINCE;

/// What the rule is.
pub const RULE: Rule = Rule {
    id: "keepalive-ineffective",
    severity: Severity::Warning,
    title: "upstream `keepalive` without `proxy_http_version 1.1` and `Connection \"\"` (or, for `fastcgi_pass`, without `fastcgi_keep_conn on`)",
    explain: "nginx talks HTTP/1.0 with `Connection: close` to upstreams by default, so the keep-alive cache stays empty and every request opens a new connection.",
    fix: "add `proxy_http_version 1.1; proxy_set_header Connection \"\";` where the upstream is proxied (`fastcgi_keep_conn on;` where it is passed to FastCGI)",
    versions: ALL,
    scenario: Some("port-exhaustion"),
};

/// Each location proxying to an upstream with `keepalive` without what keeps connections.
pub(super) fn check(
    up: &Directive,
    uname: &str,
    users: &Users,
    opts: &LintOptions,
    hits: &mut Vec<Hit>,
) {
    let Some(users) = users.get(&uname.to_ascii_lowercase()) else {
        return;
    };
    let users = users.clone();
    if find(up.children(), "keepalive").is_none() {
        return;
    }
    let defaults_keepalive = opts
        .nginx_version
        .is_some_and(|v| v >= KEEPALIVE_DEFAULT_SINCE);
    for (loc, pass) in users {
        if pass.name.value == "fastcgi_pass" {
            check_fastcgi_keep_conn(loc, pass, uname, hits);
            continue;
        }
        let mut missing = Vec::new();
        let version = loc.inh.http_version.and_then(|d| d.arg(0));
        // `2` is HTTP/2 to the upstream (nginx >= 1.29.4): it keeps connections too.
        let reuses = match version {
            Some(v) => v == "1.1" || v == "2",
            None => defaults_keepalive,
        };
        if !reuses {
            missing.push("`proxy_http_version 1.1`");
        }
        // HTTP/2 has no `Connection` header: its connections are kept whatever it says.
        let (conn, undecided) = if version == Some("2") {
            (None, None)
        } else {
            connection_header(&loc.inh.set_headers, defaults_keepalive)
        };
        if let Some(m) = conn {
            missing.push(m);
        }
        if missing.is_empty() && undecided.is_none() {
            continue;
        }
        let mut h = if missing.is_empty() {
            let var = undecided.unwrap_or_default();
            let mut h = hit(
                &RULE,
                &pass.name,
                pass.file,
                format!(
                    "upstream `{uname}` has `keepalive`, and this location sets `Connection` through `{var}`: connections are reused only while it evaluates to \"\" (a `map` that gives `close` to requests without `Upgrade` disables keep-alive for all of them)"
                ),
            );
            h.severity = Severity::Info;
            h
        } else {
            hit(
                &RULE,
                &pass.name,
                pass.file,
                format!(
                    "upstream `{uname}` has `keepalive`, but this `proxy_pass` lacks {}: nginx sends HTTP/1.0 or `Connection: close`, so no connection is ever reused",
                    missing.join(" and ")
                ),
            )
        };
        if defaults_keepalive {
            h.message
                .push_str(" (nginx >= 1.29.7 defaults to HTTP/1.1 and keep-alive)");
        }
        hits.push(h);
    }
}

/// FastCGI keeps an upstream connection only with `fastcgi_keep_conn on` (nginx's default is
/// off, whatever the version): without it `keepalive` in the upstream does nothing.
fn check_fastcgi_keep_conn(loc: &Loc<'_>, pass: &Directive, uname: &str, hits: &mut Vec<Hit>) {
    if loc.inh.keep_conn.and_then(|d| d.arg(0)) == Some("on") {
        return;
    }
    hits.push(hit(&RULE,
        &pass.name,
        pass.file,
        format!(
            "upstream `{uname}` has `keepalive`, but this `fastcgi_pass` lacks `fastcgi_keep_conn on`: the FastCGI application is told to close the connection after every request, so none is ever reused"
        ),
    ));
}

/// What the `proxy_set_header Connection` lines in effect do to keep-alive: the missing piece
/// (when a literal value closes the connection, or none clears it on an old nginx) and the
/// variable whose value decides it (a `map` such as `$connection_upgrade`). Every line is
/// sent: a variable beside `Connection ""` still goes out.
fn connection_header(
    set_headers: &[&Directive],
    defaults_keepalive: bool,
) -> (Option<&'static str>, Option<String>) {
    let values: Vec<&str> = set_headers
        .iter()
        .filter(|d| {
            d.arg(0)
                .is_some_and(|h| h.eq_ignore_ascii_case("connection"))
        })
        .filter_map(|d| d.arg(1))
        .collect();
    let clears = |v: &str| v.is_empty() || v.eq_ignore_ascii_case("keep-alive");
    if values.iter().any(|v| !v.contains('$') && !clears(v)) {
        return (Some("`proxy_set_header Connection \"\"`"), None);
    }
    if let Some(var) = values.iter().find(|v| v.contains('$')) {
        return (None, Some(var.to_string()));
    }
    if values.is_empty() && !defaults_keepalive {
        return (Some("`proxy_set_header Connection \"\"`"), None);
    }
    (None, None)
}
