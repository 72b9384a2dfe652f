//! What the rules read a configuration as: its upstreams' server lines, its locations with the
//! settings they inherit, its error logs and `*_pass` lines. Built once per lint
//! ([`model`]); every rule file reads it and none writes it.

use crate::load::Config;
use crate::parse::{Directive, Word};
use resolvelab_core::spec::nginx::ServerParams;
use std::collections::{BTreeMap, HashSet};

/// One `server` line of an upstream block, with the words a finding points at.
pub(super) struct ServerLine<'a> {
    pub(super) d: &'a Directive,
    /// The address word.
    pub(super) addr: &'a Word,
    /// Host part when the address is a DNS name (not an IP literal or unix socket).
    pub(super) name: Option<String>,
    /// The parameters, as nginx reads them (a word nginx would refuse is left out: `nginx -t`
    /// says so, and the rules judge what the line says).
    pub(super) params: ServerParams,
    /// The `max_fails=` word, when the line has one.
    pub(super) max_fails_word: Option<&'a Word>,
}

impl ServerLine<'_> {
    pub(super) fn max_fails_zero(&self) -> bool {
        self.params.max_fails == Some(0)
    }

    pub(super) fn resolve(&self) -> bool {
        self.params.resolve
    }

    pub(super) fn backup(&self) -> bool {
        self.params.backup
    }

    /// Where a finding about `max_fails` points: its word, else the address.
    pub(super) fn max_fails_at(&self) -> &Word {
        self.max_fails_word.unwrap_or(self.addr)
    }
}

/// The host of an upstream `server` address when it is a DNS name, lower case
/// (`api.example.com:443` → `api.example.com`); `None` for an IP literal or a unix socket.
pub fn host_of(addr: &str) -> Option<String> {
    if addr.starts_with("unix:") || addr.starts_with('[') {
        return None;
    }
    let host = match addr.rsplit_once(':') {
        Some((h, p)) if p.chars().all(|c| c.is_ascii_digit()) => h,
        _ => addr,
    };
    if host.is_empty() || host.parse::<std::net::IpAddr>().is_ok() {
        return None;
    }
    Some(host.to_ascii_lowercase())
}

pub(super) fn server_line(d: &Directive) -> Option<ServerLine<'_>> {
    let addr = d.args.first()?;
    let mut params = ServerParams::default();
    let mut max_fails_word = None;
    for w in &d.args[1..] {
        if params.read(&w.value).is_ok() && w.value.starts_with("max_fails=") {
            max_fails_word = Some(w);
        }
    }
    Some(ServerLine {
        d,
        addr,
        name: host_of(&addr.value),
        params,
        max_fails_word,
    })
}

pub(super) fn find<'a>(dirs: &'a [Directive], name: &str) -> Option<&'a Directive> {
    dirs.iter().rev().find(|d| d.name.value == name)
}

pub(super) fn param<'a>(d: &'a Directive, key: &str) -> Option<(&'a str, &'a Word)> {
    d.args.iter().find_map(|w| {
        w.value
            .strip_prefix(key)
            .and_then(|v| v.strip_prefix('='))
            .map(|v| (v, w))
    })
}

/// Directives inherited from http to server to location (and `if`), with nginx's rule that
/// array-like directives (`error_page`, `proxy_set_header`) are inherited only when the level
/// defines none of its own.
#[derive(Clone, Default)]
pub(super) struct Inherited<'a> {
    pub(super) next_upstream: Option<&'a Directive>,
    pub(super) http_version: Option<&'a Directive>,
    pub(super) keep_conn: Option<&'a Directive>,
    pub(super) set_headers: Vec<&'a Directive>,
    pub(super) error_pages: Vec<&'a Directive>,
    pub(super) recursive: Option<&'a Directive>,
}

impl<'a> Inherited<'a> {
    pub(super) fn child(&self, dirs: &'a [Directive]) -> Inherited<'a> {
        let mut out = self.clone();
        let own = |name: &str| -> Vec<&'a Directive> {
            dirs.iter().filter(|d| d.name.value == name).collect()
        };
        if let Some(d) = find(dirs, "proxy_next_upstream") {
            out.next_upstream = Some(d);
        }
        if let Some(d) = find(dirs, "proxy_http_version") {
            out.http_version = Some(d);
        }
        if let Some(d) = find(dirs, "fastcgi_keep_conn") {
            out.keep_conn = Some(d);
        }
        if let Some(d) = find(dirs, "recursive_error_pages") {
            out.recursive = Some(d);
        }
        let headers = own("proxy_set_header");
        if !headers.is_empty() {
            out.set_headers = headers;
        }
        let pages = own("error_page");
        if !pages.is_empty() {
            out.error_pages = pages;
        }
        out
    }
}

/// A location (or `if` inside one) with its effective inherited settings.
pub(super) struct Loc<'a> {
    pub(super) d: &'a Directive,
    pub(super) server: usize,
    pub(super) named: Option<&'a str>,
    pub(super) inh: Inherited<'a>,
}

pub(super) struct Model<'a> {
    pub(super) http: Option<&'a Directive>,
    pub(super) stream: Option<&'a Directive>,
    /// Upstream blocks with their context: `http` or `stream`.
    pub(super) upstreams: Vec<(&'a Directive, &'static str)>,
    pub(super) servers: Vec<&'a Directive>,
    pub(super) locs: Vec<Loc<'a>>,
    pub(super) error_logs: Vec<(&'a Directive, bool)>,
}

pub(super) fn model(cfg: &Config) -> Model<'_> {
    let mut m = Model {
        http: None,
        stream: None,
        upstreams: Vec::new(),
        servers: Vec::new(),
        locs: Vec::new(),
        error_logs: Vec::new(),
    };
    for d in &cfg.root {
        match d.name.value.as_str() {
            "error_log" => m.error_logs.push((d, true)),
            "http" if m.http.is_none() => m.http = Some(d),
            "stream" if m.stream.is_none() => m.stream = Some(d),
            _ => {}
        }
    }
    if let Some(stream) = m.stream {
        for d in stream.children() {
            if d.name.value == "upstream" {
                m.upstreams.push((d, "stream"));
            }
        }
    }
    let Some(http) = m.http else {
        return m;
    };
    let base = Inherited::default().child(http.children());
    for d in http.children() {
        match d.name.value.as_str() {
            "upstream" => m.upstreams.push((d, "http")),
            "server" => m.servers.push(d),
            "error_log" => m.error_logs.push((d, false)),
            _ => {}
        }
    }
    for (si, srv) in m.servers.clone().into_iter().enumerate() {
        let inh = base.child(srv.children());
        collect_error_logs(srv.children(), &mut m.error_logs);
        collect_locs(srv.children(), si, &inh, &mut m.locs);
    }
    m
}

pub(super) fn collect_error_logs<'a>(dirs: &'a [Directive], out: &mut Vec<(&'a Directive, bool)>) {
    for d in dirs {
        if d.name.value == "error_log" {
            out.push((d, false));
        } else if matches!(d.name.value.as_str(), "location" | "if") {
            collect_error_logs(d.children(), out);
        }
    }
}

pub(super) fn collect_locs<'a>(
    dirs: &'a [Directive],
    server: usize,
    parent: &Inherited<'a>,
    out: &mut Vec<Loc<'a>>,
) {
    for d in dirs {
        if !matches!(d.name.value.as_str(), "location" | "if" | "limit_except") {
            continue;
        }
        let inh = parent.child(d.children());
        let named = if d.name.value == "location" {
            d.arg(0).and_then(|a| a.strip_prefix('@'))
        } else {
            None
        };
        collect_locs(d.children(), server, &inh, out);
        out.push(Loc {
            d,
            server,
            named,
            inh,
        });
    }
}

/// The upstream name a `proxy_pass` points at (`http://be/x` -> `be`), unless it has variables.
pub fn proxy_target(d: &Directive) -> Option<&str> {
    let url = d.arg(0)?;
    if url.contains('$') {
        return None;
    }
    // `fastcgi_pass NAME[:PORT]` names its upstream without a scheme.
    if d.name.value == "fastcgi_pass" {
        return (!url.starts_with("unix:")).then(|| url.split(':').next().unwrap_or(url));
    }
    let rest = url.split_once("://")?.1;
    let host = rest.split('/').next()?;
    Some(host.split(':').next().unwrap_or(host))
}

/// The `proxy_pass` and `fastcgi_pass` lines of a location (the passes whose upstream
/// keep-alive the configuration decides).
pub(super) fn proxy_passes<'a>(loc: &Loc<'a>) -> impl Iterator<Item = &'a Directive> {
    loc.d
        .children()
        .iter()
        .filter(|c| c.name.value == "proxy_pass" || c.name.value == "fastcgi_pass")
}

pub(super) fn walk_all(dirs: &[Directive]) -> Vec<&Directive> {
    let mut out = Vec::new();
    let mut stack: Vec<&Directive> = dirs.iter().rev().collect();
    while let Some(d) = stack.pop() {
        out.push(d);
        stack.extend(d.children().iter().rev());
    }
    out
}

/// The `proxy_pass` lines of every location by the upstream name they point at (lower case:
/// nginx matches upstream names case-insensitively). Built once, so the lint stays linear in the
/// number of upstreams and locations.
pub(super) type Users<'m, 'a> =
    std::collections::HashMap<String, Vec<(&'m Loc<'a>, &'a Directive)>>;

pub(super) fn users_by_upstream<'m, 'a>(m: &'m Model<'a>) -> Users<'m, 'a> {
    let mut out: Users = Default::default();
    for l in &m.locs {
        for p in proxy_passes(l) {
            if let Some(t) = proxy_target(p) {
                out.entry(t.to_ascii_lowercase()).or_default().push((l, p));
            }
        }
    }
    out
}

/// The host a `*_pass` URL names (`http://app:8080/x` → `app`, `app:9000` → `app`,
/// `http://$backend` → `$backend`); `None` for a unix socket.
pub fn pass_host(url: &str) -> Option<&str> {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    if rest.starts_with("unix:") || url.starts_with("unix:") {
        return None;
    }
    let authority = rest.split(['/', '?']).next().unwrap_or(rest);
    if let Some(v) = authority.strip_prefix('$') {
        // `http://$host$request_uri`: the host is the first variable.
        let end = v
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .map_or(authority.len(), |i| i + 1);
        return Some(&authority[..end]);
    }
    // A literal host, maybe followed by variables (`127.0.0.1:11000$request_uri`).
    let authority = authority.split('$').next().unwrap_or(authority);
    if let Some(v6) = authority.strip_prefix('[') {
        return v6.split(']').next();
    }
    let host = match authority.rsplit_once(':') {
        Some((h, p)) if p.chars().all(|c| c.is_ascii_digit()) => h,
        _ => authority,
    };
    (!host.is_empty()).then_some(host)
}

/// Every `*_pass` line nginx reads (inside http{} and stream{}, and the locations of a
/// server-body snippet), with whether a `resolver` is in scope for it.
pub(super) fn passes(cfg: &Config) -> Vec<(&Directive, bool)> {
    let mut out = Vec::new();
    let root_resolver = cfg.root.iter().any(|d| d.name.value == "resolver");
    for block in &cfg.root {
        match block.name.value.as_str() {
            "http" | "stream" => walk_passes(block.children(), false, &mut out),
            "location" => walk_passes(block.children(), root_resolver, &mut out),
            _ => {}
        }
    }
    out
}

fn walk_passes<'a>(dirs: &'a [Directive], scoped: bool, out: &mut Vec<(&'a Directive, bool)>) {
    let scoped = scoped || dirs.iter().any(|d| d.name.value == "resolver");
    for d in dirs {
        if d.name.value == "upstream" {
            continue;
        }
        if crate::facts::PASSES.contains(&d.name.value.as_str()) {
            out.push((d, scoped));
        }
        if d.block.is_some() {
            walk_passes(d.children(), scoped, out);
        }
    }
}

/// The upstream names of the configuration, lower case (nginx matches them so).
pub(super) fn upstream_names(m: &Model) -> HashSet<String> {
    m.upstreams
        .iter()
        .filter_map(|(u, _)| u.arg(0).map(str::to_ascii_lowercase))
        .collect()
}

/// An upstream's primary `resolve` lines grouped by name, and how many static primary lines
/// sit beside them.
pub(super) fn by_name<'l, 'a>(
    lines: &'l [ServerLine<'a>],
    resolve_lines: &[&'l ServerLine<'a>],
) -> (BTreeMap<&'l str, Vec<&'l ServerLine<'a>>>, usize) {
    let mut by_name: BTreeMap<&str, Vec<&ServerLine>> = BTreeMap::new();
    for s in resolve_lines.iter().filter(|s| !s.backup()) {
        by_name
            .entry(s.name.as_deref().unwrap_or(""))
            .or_default()
            .push(s);
    }
    let static_primary = lines.iter().filter(|s| !s.resolve() && !s.backup()).count();
    (by_name, static_primary)
}

/// An `error_page 502 … @name` whose named location proxies again: a retry shim.
pub(super) struct Shim<'m, 'a> {
    /// The location the `error_page` applies in.
    pub(super) loc: &'m Loc<'a>,
    /// The `error_page` line.
    pub(super) error_page: &'a Directive,
    /// The named location it sends to.
    pub(super) named: &'m Loc<'a>,
    /// Its name, without `@`.
    pub(super) target: &'a str,
}

/// Every retry shim, per location.
pub(super) fn retry_shims<'m, 'a>(m: &'m Model<'a>) -> Vec<Shim<'m, 'a>> {
    let mut out = Vec::new();
    for loc in &m.locs {
        for ep in &loc.inh.error_pages {
            let codes: Vec<&str> = ep.args.iter().map(|a| a.value.as_str()).collect();
            if !codes.contains(&"502") {
                continue;
            }
            let Some(target) = (ep.args.last()).and_then(|t| t.value.strip_prefix('@')) else {
                continue;
            };
            let Some(named) = m
                .locs
                .iter()
                .find(|l| l.server == loc.server && l.named == Some(target))
            else {
                continue;
            };
            let retries = walk_all(named.d.children())
                .into_iter()
                .any(|d| d.name.value == "proxy_pass");
            if retries {
                out.push(Shim {
                    loc,
                    error_page: ep,
                    named,
                    target,
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts() {
        assert_eq!(
            host_of("api.example.com:443").as_deref(),
            Some("api.example.com")
        );
        assert_eq!(host_of("10.0.0.1:80"), None);
        assert_eq!(host_of("[::1]:80"), None);
        assert_eq!(host_of("unix:/tmp/s"), None);
        assert_eq!(host_of("Backend").as_deref(), Some("backend"));
    }
}
