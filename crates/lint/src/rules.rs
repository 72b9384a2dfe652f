//! The rules: what each one knows, and the checks over a loaded configuration.
//!
//! Every rule has a stable id used in output, suppressions and docs, and names the lab scenario
//! that reproduces the failure it warns about.

use crate::load::Config;
use crate::parse::{Directive, Span, Word};
use crate::version::{RESOLVE_SINCE, Versions};
use crate::{LintOptions, Severity};
use std::collections::{BTreeMap, BTreeSet, HashSet};

/// What a rule is: id, default severity, one-line title, explanation, fix, versions, scenario.
#[derive(Debug, Clone, Copy)]
pub struct Rule {
    /// Stable id (`resolve-single-name`).
    pub id: &'static str,
    /// Default severity (a finding may be raised or lowered with a reason in its message).
    pub severity: Severity,
    /// One line.
    pub title: &'static str,
    /// Why it matters, from the lab's measurements.
    pub explain: &'static str,
    /// The general fix.
    pub fix: &'static str,
    /// The nginx versions the rule applies to.
    pub versions: Versions,
    /// The scenario that reproduces it: `resolvelab run <scenario>`.
    pub scenario: Option<&'static str>,
}

impl Rule {
    /// `resolvelab run <scenario>`, if the rule has a scenario.
    pub fn reproduce(&self) -> Option<String> {
        self.scenario.map(|s| format!("resolvelab run {s}"))
    }
}

const ALL: Versions = Versions::All;
const RESOLVE: Versions = Versions::AtLeast(RESOLVE_SINCE);

/// Every rule, in the order of the docs.
pub static RULES: &[Rule] = &[
    Rule {
        id: "resolve-single-name",
        severity: Severity::Warning,
        title: "one `resolve` name without a fixed per-DC alternative (generation-race exposure)",
        explain: "Every change of the name's answer swaps the peer and bumps the upstream's generation; a request whose retry (or first pick) crosses the swap is refused with `no live upstreams` (measured 101 of 36,001 requests, all within 12-486 ms after a swap). max_fails=0 and backup servers do not help this path.",
        fix: "point the upstream at fixed per-DC names (`server dc1.internal:443 resolve max_fails=2 fail_timeout=5s; server dc2.internal:443 resolve max_fails=2 fail_timeout=5s;`, see `resolvelab run per-dc`), or retry once with `error_page 502 = @retry_once` plus a GET/HEAD/OPTIONS guard",
        versions: RESOLVE,
        scenario: Some("generation-race"),
    },
    Rule {
        id: "resolve-max-fails",
        severity: Severity::Warning,
        title: "two or more resolve peers possible without `max_fails=0` (max_fails wipeout)",
        explain: "With one peer nginx ignores max_fails; as soon as there are two (the same name on two lines, or a GSLB name that briefly answers two records) the hidden defaults max_fails=1 fail_timeout=10s apply, and one failure per peer disables every peer for 10 s (measured: 2.1 s of resets -> 5,209 NLU over 10.4 s; with max_fails=0: 0 NLU).",
        fix: "add `max_fails=0` to the resolve line(s), or remove the duplicate line; distinct per-DC names with an explicit max_fails are the recommended design",
        versions: RESOLVE,
        scenario: Some("dual-resolve"),
    },
    Rule {
        id: "resolver-valid-long",
        severity: Severity::Info,
        title: "`valid` of 30 s or more: longer DNS outages and slower failover (a trade-off)",
        explain: "nginx requeries every valid+1 s and keeps an NXDOMAIN for the whole period: valid=30s made a 6 s NXDOMAIN a 31 s outage (5.2x) and GSLB failover 3.2x slower (12.2 s vs 3.8 s mean). A moved backend is followed only as late: its old address keeps failing until the cached answer expires (stale-address scenario, valid=5s: 1.3 s per request, 1.7 s with `resolve`; `sim predict --moves-per-day` puts the mean outage per move at 2.6 s / 3.3 s with valid=5s and 13.5 s / 12.5 s with valid=30s). It does lower the swap rate, which is why it may be a deliberate trade-off.",
        fix: "use `valid=5s` unless fewer swaps are worth longer outages; suppress with a reason if deliberate",
        versions: ALL,
        scenario: Some("nxdomain"),
    },
    Rule {
        id: "resolver-ipv6",
        severity: Severity::Warning,
        title: "resolver without `ipv6=off` where AAAA is not intended",
        explain: "With ipv6 on (the default) nginx asks for A and AAAA; an unplanned AAAA answer adds a peer (often unreachable), turning one peer into two: the single-peer guard is off, max_fails=1 fail_timeout=10s applies, and a short backend hiccup becomes a wipeout.",
        fix: "add `ipv6=off` to the `resolver` line (no side effect when the backends are IPv4)",
        versions: RESOLVE,
        scenario: Some("aaaa-pollution"),
    },
    Rule {
        id: "backup-max-fails",
        severity: Severity::Warning,
        title: "`backup` without `max_fails=0` on every line of an upstream that resolves at run time",
        explain: "With a backup server the upstream has two peers, so max_fails=1 fail_timeout=10s applies: ordinary failures disable the primary and the backup for 10 s each — measured worse than no backup at all (904 vs 101 errors; fixed: 119). A backup does not help the generation race either.",
        fix: "add `max_fails=0` to every server line of the upstream (primary and backup)",
        versions: ALL,
        scenario: Some("backup"),
    },
    Rule {
        id: "proxy-next-upstream-off",
        severity: Severity::Warning,
        title: "`proxy_next_upstream off` (or `fastcgi_`/`grpc_`/`uwsgi_`/`scgi_next_upstream off`, or `*_next_upstream_tries 1`)",
        explain: "Everyday first-try failures (keep-alive reclaim races, deploys, resets) are normally hidden by a retry; with retries off every one becomes a client 502 (measured: 1,418 first-try failures, 0 client errors with retries on).",
        fix: "remove it or use `proxy_next_upstream error timeout;`",
        versions: ALL,
        scenario: Some("generation-race-control"),
    },
    Rule {
        id: "retry-shim-no-method-guard",
        severity: Severity::Warning,
        title: "`error_page 502` retry shim without a method guard",
        explain: "A named location that proxies again after a 502 resends non-idempotent requests (POST, PATCH) whose first attempt may have reached the backend.",
        fix: "guard the retry location: `if ($request_method !~ ^(GET|HEAD|OPTIONS)$) { return 502; }`",
        versions: ALL,
        scenario: Some("retry-shim"),
    },
    Rule {
        id: "retry-shim-recursive",
        severity: Severity::Warning,
        title: "`error_page 502` retry shim with `recursive_error_pages on`",
        explain: "The shim stops after exactly two passes only because recursive_error_pages is off by default; with it on, a persistent 502 is retried again and again (up to nginx's 10 internal redirects) under load.",
        fix: "remove `recursive_error_pages on` (the default off ends the shim after one retry)",
        versions: ALL,
        scenario: Some("retry-shim"),
    },
    Rule {
        id: "zone-too-small",
        severity: Severity::Warning,
        title: "upstream zone too small for the peers it may hold",
        explain: "When the zone's slab allocator runs out while a requery adds peers, nginx logs `memory exhausted` and gives up the additions after the removals already happened: partial or total loss of peers.",
        fix: "enlarge the zone (e.g. `zone NAME 128k;`)",
        versions: ALL,
        scenario: Some("zone-churn"),
    },
    Rule {
        id: "resolve-no-zone",
        severity: Severity::Error,
        title: "`resolve` in an upstream without `zone`",
        explain: "nginx refuses the configuration: resolving names at run time requires the upstream to be in shared memory.",
        fix: "add `zone NAME 128k;` to the upstream",
        versions: RESOLVE,
        scenario: Some("swap-only"),
    },
    Rule {
        id: "error-log-split",
        severity: Severity::Warning,
        title: "error_log split across files where names resolve at run time (diagnosis hazard)",
        explain: "`could not be resolved` lines come from the resolver timer and go to the main error_log, while a request's `no live upstreams` and first-try errors go to the error_log of its http/server/location; reading one file makes a DNS outage look like a lone race.",
        fix: "log to one file, or always grep every file from `nginx -T | grep error_log` (resolvelab diagnose accepts several --error files)",
        versions: ALL,
        scenario: Some("nxdomain"),
    },
    Rule {
        id: "upstream-no-keepalive",
        severity: Severity::Info,
        title: "upstream without `keepalive` (port exhaustion at high rate)",
        explain: "Without upstream keep-alive every request opens a new connection; at a few hundred requests per second to one address the ephemeral ports run out (`connect() failed (99: Cannot assign requested address)`, bursts with a ~56 s period). nginx 1.29.7 and later keep 32 idle connections per worker by default (measured: `resolvelab compare port-exhaustion --variant netns` fails 20,000 of 21,000 requests on 1.28.3 and none on 1.31.3, docs/COMPARISON.md).",
        fix: "add `keepalive 64;` to the upstream with `proxy_http_version 1.1; proxy_set_header Connection \"\";` in the location (or upgrade to nginx >= 1.29.7, where keep-alive is the default)",
        versions: Versions::BeforeDefault(KEEPALIVE_DEFAULT_SINCE),
        scenario: Some("port-exhaustion"),
    },
    Rule {
        id: "keepalive-ineffective",
        severity: Severity::Warning,
        title: "upstream `keepalive` without `proxy_http_version 1.1` and `Connection \"\"` (or, for `fastcgi_pass`, without `fastcgi_keep_conn on`)",
        explain: "nginx talks HTTP/1.0 with `Connection: close` to upstreams by default, so the keep-alive cache stays empty and every request opens a new connection.",
        fix: "add `proxy_http_version 1.1; proxy_set_header Connection \"\";` where the upstream is proxied (`fastcgi_keep_conn on;` where it is passed to FastCGI)",
        versions: ALL,
        scenario: Some("port-exhaustion"),
    },
    Rule {
        id: "resolve-unsupported-version",
        severity: Severity::Error,
        title: "`resolve`, or a `resolver` inside `upstream`, on nginx < 1.27.3",
        explain: "Open-source nginx accepts `server … resolve`, and `resolver`/`resolver_timeout` inside an upstream block, only since 1.27.3; older versions refuse the configuration (`invalid parameter \"resolve\"`, `\"resolver\" directive is not allowed here`) and have no generation check.",
        fix: "upgrade to nginx >= 1.27.3, or resolve the name at startup only (drop `resolve`)",
        versions: Versions::Below(RESOLVE_SINCE),
        scenario: Some("swap-only"),
    },
    Rule {
        id: "resolver-timeout-vs-valid",
        severity: Severity::Warning,
        title: "`resolver_timeout` longer than `valid`",
        explain: "A failed (SERVFAIL) or timed-out requery keeps the old peers and is retried only after max(resolver_timeout, 1 s) (nginx resends a silent query every 5 s until resolver_timeout); with the default 30 s a GSLB failover that coincides with a DNS hiccup is picked up 30-60 s late instead of within valid+1 s.",
        fix: "set `resolver_timeout` below `valid` (e.g. `resolver_timeout 3s;` with `valid=5s`)",
        versions: RESOLVE,
        scenario: Some("dns-silent"),
    },
    Rule {
        id: "resolve-no-resolver",
        severity: Severity::Error,
        title: "`resolve` server with no resolver declared",
        explain: "nginx refuses the configuration (`no resolver defined to resolve names at run time`): the upstream needs a `resolver` in the upstream block or at http level (a resolver inside server{} does not count).",
        fix: "add `resolver ADDRESS valid=5s ipv6=off;` to the upstream block or to http{}",
        versions: RESOLVE,
        scenario: Some("swap-only"),
    },
    Rule {
        id: "resolve-once",
        severity: Severity::Warning,
        title: "a backend hostname resolved once, at start: a pin until the next reload (stale address)",
        explain: "A name in an upstream `server` line without `resolve`, or in a `proxy_pass` without variables, is resolved when nginx starts or reloads and never again: when the backend moves (a container or pod restart, a VIP change) nginx keeps sending to the old address — connection refused or timed out, 502/504 for every request — until someone reloads it. This is the most common DNS failure reported around nginx.",
        fix: "make nginx follow the name: `server NAME:PORT resolve;` with a `zone` and a `resolver … valid=5s` (nginx >= 1.27.3), or resolve per request with a variable (`set $backend NAME; proxy_pass http://$backend:PORT;`) and a `resolver`; otherwise reload nginx whenever the backend moves",
        versions: ALL,
        scenario: Some("stale-address"),
    },
    Rule {
        id: "variable-proxy-pass-no-resolver",
        severity: Severity::Error,
        title: "a `*_pass` resolved per request (a variable in its URL) with no `resolver` in scope",
        explain: "When the URL of `proxy_pass` (or fastcgi/grpc/uwsgi/scgi/memcached_pass) has a variable and its host is neither an IP address nor an upstream block, nginx resolves the host for every request through `resolver` — and with no resolver in the enclosing location, server or http block every such request fails with 502 and `no resolver defined to resolve NAME` in the error log.",
        fix: "add `resolver ADDRESS valid=5s ipv6=off;` (Docker: `resolver 127.0.0.11 valid=5s;`; Kubernetes: the cluster DNS service) in the http, server or location block, or point the URL at an upstream block",
        versions: ALL,
        scenario: Some("stale-address"),
    },
    Rule {
        id: "suppression-invalid",
        severity: Severity::Error,
        title: "malformed `# resolvelab: ignore` comment",
        explain: "A suppression must name a known rule and give a reason: `# resolvelab: ignore RULE reason`.",
        fix: "write `# resolvelab: ignore RULE why this is deliberate`",
        versions: ALL,
        scenario: None,
    },
    Rule {
        id: "suppression-unused",
        severity: Severity::Info,
        title: "suppression that matches no finding",
        explain: "The suppressed finding is gone (or the comment is not next to it); a stale suppression would hide a future finding silently.",
        fix: "remove the comment, or move it onto the line of the finding (or the line just above)",
        versions: ALL,
        scenario: None,
    },
];

/// The rule with this id.
pub fn rule(id: &str) -> Option<&'static Rule> {
    RULES.iter().find(|r| r.id == id)
}

/// A finding before file names are attached.
#[derive(Debug, Clone)]
pub(crate) struct Hit {
    pub rule: &'static Rule,
    pub severity: Severity,
    pub file: usize,
    pub span: Span,
    pub message: String,
    pub fix: String,
}

fn hit(id: &str, at: &Word, file: usize, message: String) -> Hit {
    let rule = rule(id).expect("rule ids used by checks are in RULES");
    Hit {
        rule,
        severity: rule.severity,
        file,
        span: at.span,
        message,
        fix: rule.fix.to_string(),
    }
}

/// nginx's size and time values (one parser for the linter and the model).
pub use resolvelab_core::spec::nginx::{size as parse_size, time_ms as parse_time_ms};

use resolvelab_core::spec::nginx::{ServerParams, time_text as fmt_ms};

/// One `server` line of an upstream block, with the words a finding points at.
struct ServerLine<'a> {
    d: &'a Directive,
    /// The address word.
    addr: &'a Word,
    /// Host part when the address is a DNS name (not an IP literal or unix socket).
    name: Option<String>,
    /// The parameters, as nginx reads them (a word nginx would refuse is left out: `nginx -t`
    /// says so, and the rules judge what the line says).
    params: ServerParams,
    /// The `max_fails=` word, when the line has one.
    max_fails_word: Option<&'a Word>,
}

impl ServerLine<'_> {
    fn max_fails_zero(&self) -> bool {
        self.params.max_fails == Some(0)
    }

    fn resolve(&self) -> bool {
        self.params.resolve
    }

    fn backup(&self) -> bool {
        self.params.backup
    }

    /// Where a finding about `max_fails` points: its word, else the address.
    fn max_fails_at(&self) -> &Word {
        self.max_fails_word.unwrap_or(self.addr)
    }
}

fn host_of(addr: &str) -> Option<String> {
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

fn server_line(d: &Directive) -> Option<ServerLine<'_>> {
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

fn find<'a>(dirs: &'a [Directive], name: &str) -> Option<&'a Directive> {
    dirs.iter().rev().find(|d| d.name.value == name)
}

fn param<'a>(d: &'a Directive, key: &str) -> Option<(&'a str, &'a Word)> {
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
struct Inherited<'a> {
    next_upstream: Option<&'a Directive>,
    http_version: Option<&'a Directive>,
    keep_conn: Option<&'a Directive>,
    set_headers: Vec<&'a Directive>,
    error_pages: Vec<&'a Directive>,
    recursive: Option<&'a Directive>,
}

impl<'a> Inherited<'a> {
    fn child(&self, dirs: &'a [Directive]) -> Inherited<'a> {
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
struct Loc<'a> {
    d: &'a Directive,
    server: usize,
    named: Option<&'a str>,
    inh: Inherited<'a>,
}

struct Model<'a> {
    http: Option<&'a Directive>,
    stream: Option<&'a Directive>,
    /// Upstream blocks with their context: `http` or `stream`.
    upstreams: Vec<(&'a Directive, &'static str)>,
    servers: Vec<&'a Directive>,
    locs: Vec<Loc<'a>>,
    error_logs: Vec<(&'a Directive, bool)>,
}

fn model(cfg: &Config) -> Model<'_> {
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

fn collect_error_logs<'a>(dirs: &'a [Directive], out: &mut Vec<(&'a Directive, bool)>) {
    for d in dirs {
        if d.name.value == "error_log" {
            out.push((d, false));
        } else if matches!(d.name.value.as_str(), "location" | "if") {
            collect_error_logs(d.children(), out);
        }
    }
}

fn collect_locs<'a>(
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
fn proxy_target(d: &Directive) -> Option<&str> {
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
fn proxy_passes<'a>(loc: &Loc<'a>) -> impl Iterator<Item = &'a Directive> {
    loc.d
        .children()
        .iter()
        .filter(|c| c.name.value == "proxy_pass" || c.name.value == "fastcgi_pass")
}

/// Runs every check. `version` is the nginx version the configuration is for (None: unknown).
pub(crate) fn check(cfg: &Config, opts: &LintOptions) -> Vec<Hit> {
    let m = model(cfg);
    let mut hits = Vec::new();
    let version = opts.nginx_version;
    let ctx_dirs = |ctx: &str| {
        let block = if ctx == "http" { m.http } else { m.stream };
        block.map(|b| b.children()).unwrap_or(&[])
    };
    // The context's resolver, found once: looked up per upstream it made the lint quadratic.
    let ctx_resolvers = |ctx: &str| {
        let d = ctx_dirs(ctx);
        (find(d, "resolver"), find(d, "resolver_timeout"))
    };
    let (http_res, stream_res) = (ctx_resolvers("http"), ctx_resolvers("stream"));
    let mut seen_resolver: HashSet<(usize, u32, u32, &str)> = HashSet::new();
    let users = users_by_upstream(&m);

    for &(up, ctx) in &m.upstreams {
        let uname = up.arg(0).unwrap_or("?");
        let dirs = up.children();
        let lines: Vec<ServerLine> = dirs
            .iter()
            .filter(|d| d.name.value == "server")
            .filter_map(server_line)
            .collect();
        let resolve_lines: Vec<&ServerLine> = lines
            .iter()
            .filter(|s| s.resolve() && s.name.is_some())
            .collect();

        check_zone(up, uname, &lines, opts, &mut hits);
        // The lab's evidence (`resolvelab run backup`) is about upstreams that resolve at run
        // time; a static upstream with a backup is the textbook setup, not that hazard.
        if !resolve_lines.is_empty() {
            check_backup(uname, &lines, &mut hits);
        }
        if ctx == "http" {
            check_keepalive(up, uname, &users, opts, &mut hits);
        }

        let too_old = version.filter(|v| *v < RESOLVE_SINCE);
        if let Some(v) = too_old {
            unsupported_in_upstream(dirs, &resolve_lines, uname, v, &mut hits);
        }
        if resolve_lines.is_empty() || too_old.is_some() {
            continue;
        }
        if find(dirs, "zone").is_none() {
            hits.push(hit(
                "resolve-no-zone",
                &up.name,
                up.file,
                format!(
                    "upstream `{uname}` has `resolve` servers but no `zone`: nginx refuses it (resolving names at run time requires upstream \"{uname}\" to be in shared memory)"
                ),
            ));
        }
        let (ctx_resolver, ctx_timeout) = if ctx == "http" { http_res } else { stream_res };
        let resolver = find(dirs, "resolver").or(ctx_resolver);
        let timeout = find(dirs, "resolver_timeout").or(ctx_timeout);
        match resolver {
            None => hits.push(no_resolver(cfg, &m, ctx, uname, resolve_lines[0])),
            Some(r) => {
                let key = (r.file, r.name.span.line, r.name.span.col, "");
                if seen_resolver.insert(key) {
                    check_resolver(r, timeout, &mut hits);
                }
            }
        }
        check_resolve_lines(uname, &lines, &resolve_lines, &mut hits);
    }

    check_locations(&m, &mut hits);
    check_name_resolution(cfg, &m, &mut hits);
    // Only where a name is resolved at run time is there a resolver line to lose.
    let facts = crate::facts::runtime_facts(cfg, "");
    if facts.variable_pass {
        // A resolver that serves per-request resolution (a variable `*_pass`): a long `valid`
        // keeps a bad answer as long (the other resolver rules are about `resolve` upstreams).
        for r in walk_all(&cfg.root)
            .into_iter()
            .filter(|d| d.name.value == "resolver")
        {
            if seen_resolver.insert((r.file, r.name.span.line, r.name.span.col, "")) {
                check_valid_long(r, &mut hits);
            }
        }
    }
    if facts.resolve || facts.variable_pass {
        check_error_logs(cfg, &m, &mut hits);
    }
    check_next_upstream_off(cfg, &mut hits);
    hits.retain(|h| h.rule.versions.contains(version));
    hits
}

/// `resolver`/`resolver_timeout` inside an upstream and `resolve` on its server lines, on an
/// nginx older than [`RESOLVE_SINCE`], which refuses them.
fn unsupported_in_upstream(
    dirs: &[Directive],
    resolve_lines: &[&ServerLine],
    uname: &str,
    v: crate::version::Version,
    hits: &mut Vec<Hit>,
) {
    for d in dirs
        .iter()
        .filter(|d| ["resolver", "resolver_timeout"].contains(&d.name.value.as_str()))
    {
        hits.push(hit(
            "resolve-unsupported-version",
            &d.name,
            d.file,
            format!(
                "`{}` inside upstream `{uname}` needs nginx >= {RESOLVE_SINCE}; nginx {v} refuses it (\"directive is not allowed here\"): before {RESOLVE_SINCE} only http{{}}, server{{}} and location{{}} take a resolver",
                d.name.value
            ),
        ));
    }
    for s in resolve_lines {
        let w = (s.d.args.iter())
            .find(|w| w.value == "resolve")
            .unwrap_or(s.addr);
        hits.push(hit(
            "resolve-unsupported-version",
            w,
            s.d.file,
            format!(
                "`resolve` on `{}` in upstream `{uname}` needs nginx >= {RESOLVE_SINCE}; this configuration is for nginx {v}, which refuses it",
                s.addr.value
            ),
        ));
    }
}

/// Upstream `uname` resolves at run time with no resolver in scope: nginx refuses it (in a
/// fragment, unless the including context declares one).
fn no_resolver(cfg: &Config, m: &Model, ctx: &str, uname: &str, first: &ServerLine) -> Hit {
    let mut message = format!(
        "upstream `{uname}` resolves `{}` at run time but no resolver is declared in the upstream or in {ctx}{{}}: nginx refuses it (no resolver defined to resolve names at run time)",
        first.addr.value
    );
    let in_server = m
        .servers
        .iter()
        .find_map(|s| find(s.children(), "resolver"))
        .filter(|_| ctx == "http");
    if let Some(r) = in_server {
        message.push_str(&format!(
            "; the `resolver` at {}:{} is inside server{{}} and does not apply to upstreams",
            cfg.files[r.file].name, r.name.span.line
        ));
    }
    let mut h = hit("resolve-no-resolver", first.addr, first.d.file, message);
    if cfg.fragment {
        // The including http{} is not in the input: nginx refuses this only if it
        // has no resolver either.
        h.severity = Severity::Warning;
        h.message = format!(
            "upstream `{uname}` resolves `{}` at run time and no resolver is declared in the upstream or in this fragment: nginx refuses it unless the {ctx}{{}} that includes this file declares one (not in the input: lint the whole configuration, `nginx -T | resolvelab lint -`, to decide)",
            first.addr.value
        );
    }
    h
}

/// `*_next_upstream off` and `*_next_upstream_tries 1`: no retry at all.
fn check_next_upstream_off(cfg: &Config, hits: &mut Vec<Hit>) {
    for d in walk_all(&cfg.root) {
        let name = d.name.value.as_str();
        let off = name.ends_with("_next_upstream") && d.arg(0) == Some("off");
        // One try is no retry: the same as `off`.
        let one_try = name.ends_with("_next_upstream_tries") && d.arg(0) == Some("1");
        if off || one_try {
            hits.push(hit(
                "proxy-next-upstream-off",
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

/// Rules proven on real configurations (`tests/lint-corpus/real/`) whose lab scenario does not
/// exist yet (none today: every rule but the suppression checks has one).
pub const NO_SCENARIO_YET: &[&str] = &[];

use crate::facts::PASSES;

/// When nginx resolves the names it sends to: once at start (static `server` lines and static
/// `*_pass` URLs: `resolve-once`), or per request through a `resolver` (a variable in the URL:
/// `variable-proxy-pass-no-resolver` when none is in scope). `localhost` comes from
/// /etc/hosts and cannot move; IP addresses, `unix:` sockets and upstream names are not
/// resolved at all.
fn check_name_resolution(cfg: &Config, m: &Model, hits: &mut Vec<Hit>) {
    let upstreams: HashSet<String> = m
        .upstreams
        .iter()
        .filter_map(|(u, _)| u.arg(0).map(str::to_ascii_lowercase))
        .collect();
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
                hits.push(hit(
                    "resolve-once",
                    s.addr,
                    s.d.file,
                    format!(
                        "`server {}` in upstream `{uname}` is resolved once, when nginx starts or reloads: if `{name}` moves, nginx keeps sending to the old address until the next reload",
                        s.addr.value
                    ),
                ));
            }
        }
    }
    // Only where nginx reads them: inside http{} and stream{} (a conf.d fragment is wrapped
    // first), and in the locations of a server-body snippet (an include inside server{}).
    let root_resolver = cfg.root.iter().any(|d| d.name.value == "resolver");
    for block in &cfg.root {
        match block.name.value.as_str() {
            "http" | "stream" => walk_passes(block.children(), false, &upstreams, hits),
            "location" => walk_passes(block.children(), root_resolver, &upstreams, hits),
            _ => {}
        }
    }
}

/// Does the configuration resolve some backend name only at start (a `resolve-once` finding)?
pub(crate) fn resolves_once(cfg: &Config) -> bool {
    let mut hits = Vec::new();
    check_name_resolution(cfg, &model(cfg), &mut hits);
    hits.iter().any(|h| h.rule.id == "resolve-once")
}

fn walk_passes(dirs: &[Directive], scoped: bool, upstreams: &HashSet<String>, hits: &mut Vec<Hit>) {
    let scoped = scoped || dirs.iter().any(|d| d.name.value == "resolver");
    for d in dirs {
        if d.name.value == "upstream" {
            continue;
        }
        if PASSES.contains(&d.name.value.as_str()) {
            check_pass(d, scoped, upstreams, hits);
        }
        if d.block.is_some() {
            walk_passes(d.children(), scoped, upstreams, hits);
        }
    }
}

fn check_pass(d: &Directive, scoped: bool, upstreams: &HashSet<String>, hits: &mut Vec<Hit>) {
    let Some(url) = d.args.first() else { return };
    let Some(host) = pass_host(&url.value) else {
        return;
    };
    let dir = &d.name.value;
    if host.starts_with('$') || url.value.contains('$') {
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
            "variable-proxy-pass-no-resolver",
            url,
            d.file,
            format!(
                "`{dir} {}` has a variable, so nginx resolves {what} for every request — and no `resolver` is in scope: every request here fails with 502 (`no resolver defined to resolve …`)",
                url.value
            ),
        ));
        return;
    }
    let name = host.to_ascii_lowercase();
    if name == "localhost" || name.parse::<std::net::IpAddr>().is_ok() || upstreams.contains(&name)
    {
        return;
    }
    hits.push(hit(
        "resolve-once",
        url,
        d.file,
        format!(
            "`{dir} {}` names `{host}`, which nginx resolves once, when it starts or reloads: if it moves, nginx keeps sending to the old address until the next reload",
            url.value
        ),
    ));
}

/// The host a `*_pass` URL names (`http://app:8080/x` → `app`, `app:9000` → `app`,
/// `http://$backend` → `$backend`); `None` for a unix socket.
fn pass_host(url: &str) -> Option<&str> {
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

fn walk_all(dirs: &[Directive]) -> Vec<&Directive> {
    let mut out = Vec::new();
    let mut stack: Vec<&Directive> = dirs.iter().rev().collect();
    while let Some(d) = stack.pop() {
        out.push(d);
        stack.extend(d.children().iter().rev());
    }
    out
}

fn check_resolver(r: &Directive, timeout: Option<&Directive>, hits: &mut Vec<Hit>) {
    let ipv6_off = param(r, "ipv6").is_some_and(|(v, _)| v == "off");
    let ipv4_off = param(r, "ipv4").is_some_and(|(v, _)| v == "off");
    if !ipv6_off && !ipv4_off {
        hits.push(hit(
            "resolver-ipv6",
            &r.name,
            r.file,
            "`resolver` without `ipv6=off`: nginx also asks for AAAA records, and an unplanned AAAA answer adds a peer (often one nothing listens on) — the single-peer guard turns off and a short backend hiccup can become a max_fails wipeout".into(),
        ));
    }
    check_valid_long(r, hits);
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
            hits.push(hit(
                "resolver-timeout-vs-valid",
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

fn check_valid_long(r: &Directive, hits: &mut Vec<Hit>) {
    let valid = param(r, "valid").and_then(|(v, w)| parse_time_ms(v).map(|ms| (ms, w)));
    if let Some((ms, w)) = valid
        && ms >= 30_000
    {
        hits.push(hit(
            "resolver-valid-long",
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

fn check_resolve_lines(
    uname: &str,
    lines: &[ServerLine],
    resolve_lines: &[&ServerLine],
    hits: &mut Vec<Hit>,
) {
    let primary: Vec<&&ServerLine> = resolve_lines.iter().filter(|s| !s.backup()).collect();
    let mut by_name: BTreeMap<&str, Vec<&ServerLine>> = BTreeMap::new();
    for s in &primary {
        by_name
            .entry(s.name.as_deref().unwrap_or(""))
            .or_default()
            .push(s);
    }
    let static_primary = lines.iter().filter(|s| !s.resolve() && !s.backup()).count();
    if by_name.len() == 1 {
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
            "resolve-single-name",
            first.addr,
            first.d.file,
            format!(
                "upstream `{uname}` follows one DNS name `{name}` with `resolve`{extra}: every answer change swaps the peer and bumps the generation, and a request whose retry (or first pick) crosses the swap fails with `no live upstreams`"
            ),
        ));
    }
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
                    "resolve-max-fails",
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
                    "resolve-max-fails",
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
                    "resolve-max-fails",
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

fn check_backup(uname: &str, lines: &[ServerLine], hits: &mut Vec<Hit>) {
    if !lines.iter().any(|s| s.backup()) {
        return;
    }
    for s in lines.iter().filter(|s| !s.max_fails_zero()) {
        let at = s.max_fails_at();
        let role = if s.backup() { "backup" } else { "primary" };
        hits.push(hit(
            "backup-max-fails",
            at,
            s.d.file,
            format!(
                "upstream `{uname}` has a backup server, but this {role} line `{}` lacks `max_fails=0`: ordinary failures take it out for fail_timeout (default 10s) — measured worse than no backup",
                s.addr.value
            ),
        ));
    }
}

/// Slab pages (4 KiB) an upstream zone needs for `peers` peers; a model of nginx's slab allocator
/// with 64-bit structure sizes rounded up to their slab size class.
fn pages_needed(peers: u64, resolve_names: u64) -> u64 {
    let per_class = |count: u64, size: u64| -> u64 {
        if count == 0 {
            0
        } else {
            (count * size).div_ceil(4096)
        }
    };
    // Peer structs (256), sockaddrs (32), "ip:port" names (32), server names (64), the
    // per-upstream peers header (128), per resolve name a host struct (256) and name (64).
    1 + per_class(peers, 256)
        + per_class(peers, 32)
        + per_class(peers, 32)
        + per_class(peers, 64)
        + per_class(resolve_names, 256)
        + per_class(resolve_names, 64)
}

fn pages_available(size: u64) -> u64 {
    // The slab pool header and per-page descriptors (24 bytes each) come out of the zone.
    size.saturating_sub(2048) / (4096 + 24)
}

fn check_zone(
    up: &Directive,
    uname: &str,
    lines: &[ServerLine],
    opts: &LintOptions,
    hits: &mut Vec<Hit>,
) {
    let Some(zone) = find(up.children(), "zone") else {
        return;
    };
    let Some(size_word) = zone.args.get(1) else {
        return;
    };
    let Some(size) = parse_size(&size_word.value) else {
        return;
    };
    if size < 32 * 1024 {
        let mut h = hit(
            "zone-too-small",
            size_word,
            zone.file,
            format!(
                "zone `{}` of upstream `{uname}` is {} bytes; nginx refuses zones below 8 pages (32k)",
                zone.arg(0).unwrap_or("?"),
                size
            ),
        );
        h.severity = Severity::Error;
        hits.push(h);
        return;
    }
    let per_name = u64::from(opts.max_addresses_per_name.max(1));
    let mut peers = 0u64;
    let mut names = 0u64;
    for s in lines {
        if s.resolve() && s.name.is_some() {
            names += 1;
            peers += per_name;
        } else {
            peers += 1;
        }
    }
    let need = pages_needed(peers, names);
    let have = pages_available(size);
    if need > have {
        let suggest = ((need * 2 * 4096 + 2048) / 1024)
            .next_power_of_two()
            .max(64);
        let mut h = hit(
            "zone-too-small",
            size_word,
            zone.file,
            format!(
                "zone `{}` ({}) of upstream `{uname}` holds about {have} slab pages, but up to {peers} peers ({names} resolve name(s) x {per_name} addresses, --max-addresses) need about {need}: a requery can end in `memory exhausted` and lost peers",
                zone.arg(0).unwrap_or("?"),
                size_word.value
            ),
        );
        h.fix = format!(
            "enlarge the zone: `zone {} {suggest}k;`",
            zone.arg(0).unwrap_or("NAME")
        );
        hits.push(h);
    }
}

/// The `proxy_pass` lines of every location by the upstream name they point at (lower case:
/// nginx matches upstream names case-insensitively). Built once, so the lint stays linear in the
/// number of upstreams and locations.
type Users<'m, 'a> = std::collections::HashMap<String, Vec<(&'m Loc<'a>, &'a Directive)>>;

fn users_by_upstream<'m, 'a>(m: &'m Model<'a>) -> Users<'m, 'a> {
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

fn check_keepalive(
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
        let mut h = hit(
            "upstream-no-keepalive",
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
                "keepalive-ineffective",
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
                "keepalive-ineffective",
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
    hits.push(hit(
        "keepalive-ineffective",
        &pass.name,
        pass.file,
        format!(
            "upstream `{uname}` has `keepalive`, but this `fastcgi_pass` lacks `fastcgi_keep_conn on`: the FastCGI application is told to close the connection after every request, so none is ever reused"
        ),
    ));
}

/// nginx 1.29.7 made upstream keep-alive and `proxy_http_version 1.1` the defaults.
use resolvelab_core::version::KEEPALIVE_DEFAULT_SINCE;

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

fn has_method_guard(loc: &Directive) -> bool {
    walk_all(loc.children()).into_iter().any(|d| {
        d.name.value == "limit_except"
            || (d.name.value == "if"
                && d.args.iter().any(|a| a.value.contains("$request_method"))
                && d.children().iter().any(|c| c.name.value == "return"))
    })
}

fn check_locations(m: &Model, hits: &mut Vec<Hit>) {
    let mut seen: HashSet<(usize, u32, u32)> = HashSet::new();
    let mut seen_rec: HashSet<(usize, u32, u32)> = HashSet::new();
    for loc in &m.locs {
        for ep in &loc.inh.error_pages {
            let codes: Vec<&str> = ep.args.iter().map(|a| a.value.as_str()).collect();
            if !codes.contains(&"502") {
                continue;
            }
            let Some(target) = codes.last().and_then(|t| t.strip_prefix('@')) else {
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
            if !retries {
                continue;
            }
            let key = (ep.file, ep.name.span.line, ep.name.span.col);
            if !has_method_guard(named.d) && seen.insert(key) {
                hits.push(hit(
                    "retry-shim-no-method-guard",
                    &ep.name,
                    ep.file,
                    format!(
                        "`error_page 502` sends failed requests to `@{target}`, which proxies again without a method guard: a POST whose body already reached the backend can be sent twice"
                    ),
                ));
            }
            if let Some(rec) = loc.inh.recursive
                && rec.arg(0) == Some("on")
            {
                let key = (rec.file, rec.name.span.line, rec.name.span.col);
                if seen_rec.insert(key) {
                    hits.push(hit(
                        "retry-shim-recursive",
                        &rec.args[0],
                        rec.file,
                        format!(
                            "`recursive_error_pages on` applies to the `error_page 502 … @{target}` retry shim: a 502 from the retry can be redirected again (up to nginx's 10 internal redirects) instead of ending after two passes"
                        ),
                    ));
                }
            }
        }
    }
}

fn log_target(d: &Directive) -> Option<&str> {
    let t = d.arg(0)?;
    if t == "stderr" || t.starts_with("syslog:") || t.starts_with("memory:") || t == "/dev/null" {
        return None;
    }
    Some(t)
}

fn check_error_logs(cfg: &Config, m: &Model, hits: &mut Vec<Hit>) {
    let main: BTreeSet<&str> = m
        .error_logs
        .iter()
        .filter(|(_, top)| *top)
        .filter_map(|(d, _)| d.arg(0))
        .collect();
    let main_desc = if main.is_empty() {
        "the compiled-in default (logs/error.log)".to_string()
    } else {
        main.iter()
            .map(|t| format!("`{t}`"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    for (d, top) in &m.error_logs {
        if *top {
            continue;
        }
        let Some(t) = log_target(d) else { continue };
        if main.contains(t) {
            continue;
        }
        hits.push(hit(
            "error-log-split",
            &d.args[0],
            d.file,
            format!(
                "requests here log to `{t}`, but the resolver's `could not be resolved` lines go to the main error_log ({main_desc}): a DNS outage shows up as lone `no live upstreams` lines in this file (see {}:{})",
                cfg.files[d.file].name, d.name.span.line
            ),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zone_model_matches_the_seed_measurement() {
        // Seed 000 P7a: 25 peers churned through a 64k zone without `memory exhausted`.
        assert!(pages_needed(25, 1) <= pages_available(64 * 1024));
        // 32k holds one name with a handful of addresses...
        assert!(pages_needed(8, 1) <= pages_available(32 * 1024));
        // ...but not four dual-stack names of 16 addresses each.
        assert!(pages_needed(64, 4) > pages_available(32 * 1024));
    }

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

    #[test]
    fn every_rule_id_is_unique_and_has_a_scenario_or_is_about_suppressions() {
        // The scenario ids of the lab's library, read from its files (the first `name = ` of
        // each), so a renamed or deleted scenario fails here.
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
        let scenarios: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "toml"))
            .map(|e| {
                let text = std::fs::read_to_string(e.path()).unwrap();
                let line = text.lines().find(|l| l.starts_with("name = ")).unwrap();
                line["name = ".len()..].trim_matches('"').to_string()
            })
            .collect();
        assert!(
            scenarios.len() >= 16,
            "scenario library not found: {scenarios:?}"
        );
        let mut ids = HashSet::new();
        for r in RULES {
            assert!(ids.insert(r.id), "{} twice", r.id);
            match r.scenario {
                Some(s) => assert!(
                    scenarios.iter().any(|x| x == s),
                    "{}: unknown scenario {s}",
                    r.id
                ),
                None => assert!(
                    r.id.starts_with("suppression-") || NO_SCENARIO_YET.contains(&r.id),
                    "{} has no scenario",
                    r.id
                ),
            }
        }
    }
}
