//! The user's configuration made playable in the lab, for one target: what shapes a failure is
//! kept as the user wrote it, and only what must change is changed — each change listed
//! ([`Change`]), never a silent pass.
//!
//! Kept: the `http` level (`map`, `proxy_*` defaults, timeouts), the upstream blocks the path
//! uses, the first `server` that sends to the target with the locations on that path (and the
//! named locations their `error_page`s go to). Rewritten: resolver addresses → the run's DNS
//! authority (`{dns}`), upstream ports → the lab backends' (`{port}`), IP literals → lab
//! backends, `listen` → the run's address. `https://` upstreams are played over TLS when the
//! nginx has the SSL module ([`Tls::Play`]: the lab's backends present a certificate of the
//! run's own authority, `proxy_ssl_trusted_certificate` → that authority, `proxy_ssl_*` kept
//! as written, client certificates dropped), else rewritten to `http://`, saying why.
//! Dropped: logs (the lab writes its own), TLS toward clients (the load speaks HTTP), caches and
//! temp paths (they would write outside the run), auth subrequests, non-balancer Lua/njs,
//! other servers and locations.
//! Refused: a Lua balancer, SRV `service=` lines, unix sockets, a location the load cannot reach
//! without `--path`.

use crate::edit::{line, word};
use crate::find::{self, Name, Target};
use resolvelab_lint::facts::{host_of, pass_host};
use resolvelab_lint::load::Config;
use resolvelab_lint::parse::Directive;
use serde::Serialize;
use std::fmt::Write as _;

/// What happened to one line of the user's configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Change {
    /// `file:line` in the user's configuration.
    pub at: String,
    /// `rewritten` or `dropped`.
    pub kind: ChangeKind,
    /// The line as the user wrote it (one line, as parsed).
    pub was: String,
    /// What the lab runs instead (rewritten only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub now: Option<String>,
    /// Why.
    pub why: String,
}

/// A rewrite or a drop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ChangeKind {
    /// Changed to run in the lab.
    Rewritten,
    /// Left out of the lab's configuration.
    Dropped,
}

/// A DNS name the lab's authority serves, and the lab backend its answer points at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Served {
    /// The name and when nginx asks for it.
    pub name: Name,
    /// The lab backend (`b1`, …).
    pub backend: String,
}

/// One target's configuration as the lab runs it.
#[derive(Debug, Clone, Serialize)]
pub struct LabConfig {
    /// The `http {}` body with the lab's placeholders (`{dns}`, `{listen}`, `{port}`,
    /// `{backend:NAME}`), substituted per run by the lab.
    pub body: String,
    /// Every rewrite and drop, in the order of the user's file.
    pub changes: Vec<Change>,
    /// The names the lab's authority serves.
    pub served: Vec<Served>,
    /// Lab backends standing in for IP literals (`s1`, …).
    pub statics: Vec<String>,
    /// The request path the load sends (reaches the target's location).
    pub path: String,
    /// The `valid=` of the resolver in effect, as written; None: the answers' TTL decides.
    pub valid: Option<String>,
    /// Some kept name is resolved only when nginx starts or reloads.
    pub resolves_at_start: bool,
    /// `worker_processes` (each worker resolves on its own): yours, `auto` as the lab's 2 cores.
    pub workers: u32,
    /// TLS to the backends is played: the names their certificate must cover besides the
    /// served ones (`proxy_pass` hosts, `proxy_ssl_name`s). None: plain HTTP.
    pub tls: Option<Vec<String>>,
    /// Why TLS would not be played on this configuration (when [`Tls::Play`] was asked).
    #[serde(skip)]
    plain_why: Tls,
}

/// Whether `https://` upstreams are played over TLS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tls {
    /// Played: `https://` kept, the backends speak TLS with the run's authority.
    Play,
    /// Not played, and why: `https://` rewritten to `http://`.
    Off(&'static str),
}

impl Tls {
    /// The nginx that plays it has no SSL module.
    pub const NO_SSL: Tls = Tls::Off(
        "this nginx has no SSL module (the lab's 1.28.3 build has none): `--engine nginx-1.31`, or `--nginx` a binary built with it, plays TLS",
    );
    /// The model plays it.
    pub const MODEL: Tls = Tls::Off("the model (--quick) has no TLS");
    /// Some kept pass is `http://`: the lab's backends speak one protocol.
    const MIXED: Tls = Tls::Off(
        "the path under test also reaches backends over plain HTTP, and the lab's backends speak one protocol",
    );
    /// No kept pass is `https://`.
    const PLAIN: Tls = Tls::Off("every backend on the path under test is reached over plain HTTP");

    fn plays(self) -> bool {
        self == Tls::Play
    }
}

impl Default for Tls {
    fn default() -> Tls {
        Tls::NO_SSL
    }
}

/// What the caller decides about the rewrite.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The request path (default: from the first location that sends to the target).
    pub path: Option<String>,
    /// Directives to leave out (`--drop NAME`), e.g. a third-party module's.
    pub drop: Vec<String>,
    /// Play `https://` upstreams over TLS (the engine has the SSL module).
    pub tls: Tls,
}

/// Rewrite `cfg` (in its `http` context) for `target`; an error names the user's line and
/// what to do.
pub fn lab_config(cfg: &Config, target: &Target, opts: &Options) -> anyhow::Result<LabConfig> {
    let lab = lab_config_with(cfg, target, opts, opts.tls)?;
    match (opts.tls, &lab.tls) {
        // Played only when every kept pass is `https://`: else again, plain, saying why.
        (Tls::Play, Some(_)) | (Tls::Off(_), _) => Ok(lab),
        (Tls::Play, None) => lab_config_with(cfg, target, opts, lab.plain_why),
    }
}

/// [`lab_config`] with TLS decided.
fn lab_config_with(
    cfg: &Config,
    target: &Target,
    opts: &Options,
    tls: Tls,
) -> anyhow::Result<LabConfig> {
    let Some(http) = find::http(cfg) else {
        anyhow::bail!("the configuration has no http {{}} block: nothing to verify");
    };
    // Includes this machine could not read were left out when loading: listed first.
    let unread = cfg.unread.iter().map(|(at, file, why)| Change {
        at: at.clone(),
        kind: ChangeKind::Dropped,
        was: format!("include {file};"),
        now: None,
        why: format!(
            "not readable here ({why}): what it holds is not played — pass `nginx -T` output, or --sysroot with a copy of the machine's files"
        ),
    });
    let mut rw = Rw {
        cfg,
        target,
        opts,
        changes: unread.collect(),
        served: Vec::new(),
        statics: Vec::new(),
        kept_upstreams: Vec::new(),
        resolvers: Vec::new(),
        tls,
        https: false,
        plain: false,
        tls_names: Vec::new(),
    };
    let server = chosen_server(http, target).ok_or_else(|| {
        anyhow::anyhow!("{}: no server block sends to `{}`", target.at, target.name)
    })?;
    let (kept_server, path) = rw.server(server)?;
    let mut body = Vec::new();
    for d in http.children() {
        match d.name.value.as_str() {
            "server" if std::ptr::eq(d, server) => body.push(kept_server.clone()),
            "server" => rw.drop(
                d,
                "another virtual server: the load reaches the one that sends to the target",
            ),
            "upstream" => {
                let name = d.arg(0).unwrap_or_default().to_ascii_lowercase();
                if rw.kept_upstreams.contains(&name) {
                    let u = rw.upstream(d)?;
                    body.push(u);
                } else {
                    rw.drop(d, "an upstream the path under test does not use");
                }
            }
            _ => {
                if let Some(k) = rw.common(d)? {
                    body.push(k);
                }
            }
        }
    }
    let path = match (&opts.path, path) {
        (Some(p), _) => p.clone(),
        (None, Some(p)) => p,
        (None, None) => anyhow::bail!(
            "{}: the locations that send to `{}` are regular expressions or named: pass --path with a request path that reaches one",
            target.at,
            target.name
        ),
    };
    let valid = rw.resolvers.iter().find_map(|r| {
        r.args
            .iter()
            .find_map(|a| a.value.strip_prefix("valid=").map(str::to_string))
    });
    let resolves_at_start = rw.served.iter().any(|s| !s.name.at_run_time);
    let workers = rw.main_context();
    rw.changes.sort_by_key(|c| line_key(&c.at));
    let mut text = String::new();
    print(&body, 0, &mut text);
    let (tls, plain_why) = match (rw.https, rw.plain) {
        (true, false) if tls.plays() => {
            rw.tls_names.sort();
            rw.tls_names.dedup();
            (Some(rw.tls_names), tls)
        }
        (true, true) => (None, Tls::MIXED),
        _ => (None, Tls::PLAIN),
    };
    Ok(LabConfig {
        tls,
        plain_why,
        body: text,
        changes: rw.changes,
        served: rw.served,
        statics: rw.statics,
        path,
        valid,
        resolves_at_start,
        workers,
    })
}

/// `file:line` sorted by file, then line as a number.
fn line_key(at: &str) -> (String, u32) {
    match at.rsplit_once(':') {
        Some((f, l)) => (f.to_string(), l.parse().unwrap_or(0)),
        None => (at.to_string(), 0),
    }
}

/// The first `server` with a location that sends to the target.
fn chosen_server<'a>(http: &'a Directive, target: &Target) -> Option<&'a Directive> {
    http.children()
        .iter()
        .filter(|d| d.name.value == "server")
        .find(|s| reaches(s.children(), target, &[]))
}

/// Some `proxy_pass` under `dirs` sends to the target.
fn reaches(dirs: &[Directive], target: &Target, sets: &[(String, String)]) -> bool {
    let sets = with_sets(dirs, sets);
    dirs.iter().any(|d| match d.name.value.as_str() {
        "proxy_pass" => pass_goes_to(d, target, &sets),
        "location" | "if" | "limit_except" => reaches(d.children(), target, &sets),
        _ => false,
    })
}

fn with_sets(dirs: &[Directive], outer: &[(String, String)]) -> Vec<(String, String)> {
    let mut sets = outer.to_vec();
    for d in dirs.iter().filter(|d| d.name.value == "set") {
        if let (Some(v), Some(val)) = (d.arg(0).and_then(|v| v.strip_prefix('$')), d.arg(1)) {
            sets.push((v.to_string(), val.to_string()));
        }
    }
    sets
}

fn pass_goes_to(pass: &Directive, target: &Target, sets: &[(String, String)]) -> bool {
    let Some(url) = pass.arg(0) else {
        return false;
    };
    let host = match pass_host(url) {
        Some(h) => h,
        None => return false,
    };
    let host = match host.strip_prefix('$') {
        Some(var) => match sets.iter().rev().find(|(v, _)| v == var) {
            Some((_, val)) => val.as_str(),
            None => return false,
        },
        None => host,
    };
    find::name_in(host).is_some_and(|h| h.eq_ignore_ascii_case(&target.name))
        || host.eq_ignore_ascii_case(&target.name)
}

/// Directive names whose value is a path nginx writes to or reads certificates from.
fn writes_outside(name: &str) -> bool {
    name.ends_with("_cache_path")
        || name.ends_with("_temp_path")
        || matches!(name, "proxy_cache" | "proxy_store" | "pid" | "lock_file")
}

fn is_tls(name: &str) -> bool {
    name == "ssl"
        || name == "http2"
        || name.starts_with("ssl_")
        || name.starts_with("proxy_ssl_")
        || name.starts_with("grpc_ssl_")
}

struct Rw<'a> {
    cfg: &'a Config,
    target: &'a Target,
    opts: &'a Options,
    changes: Vec<Change>,
    served: Vec<Served>,
    statics: Vec<String>,
    kept_upstreams: Vec<String>,
    resolvers: Vec<Directive>,
    tls: Tls,
    /// Some kept pass is `https://` (played over TLS).
    https: bool,
    /// Some kept pass is `http://`.
    plain: bool,
    /// Names the backends' certificate must cover (hosts of `https://` passes,
    /// `proxy_ssl_name`s).
    tls_names: Vec<String>,
}

impl Rw<'_> {
    /// The main context is the lab's (its pid, logs, events), but for `worker_processes`: each
    /// worker keeps its own peers and asks on its own, so the count shapes a failure.
    fn main_context(&mut self) -> u32 {
        let mut workers = 2;
        for d in &self.cfg.root {
            match d.name.value.as_str() {
                "http" => {}
                "worker_processes" => {
                    let v = d.arg(0).unwrap_or("1");
                    workers = match v.parse::<u32>() {
                        Ok(n) => n.clamp(1, 8),
                        Err(_) => 2,
                    };
                    if v != workers.to_string() {
                        let now = Directive {
                            args: vec![word(&workers.to_string())],
                            ..d.clone()
                        };
                        self.rewrite(d, &now, "the lab's machine: 2 cores (at most 8 workers)");
                    }
                }
                _ if self.cfg.fragment => {}
                _ => self.drop(
                    d,
                    "the main context is the lab's: its pid, logs, user and events",
                ),
            }
        }
        workers
    }

    fn change(&mut self, d: &Directive, kind: ChangeKind, now: Option<String>, why: &str) {
        self.changes.push(Change {
            at: find::at(self.cfg, d),
            kind,
            was: one_line(d),
            now,
            why: why.to_string(),
        });
    }

    fn drop(&mut self, d: &Directive, why: &str) {
        self.change(d, ChangeKind::Dropped, None, why);
    }

    fn rewrite(&mut self, was: &Directive, now: &Directive, why: &str) {
        let line = one_line(now);
        self.change(was, ChangeKind::Rewritten, Some(line), why);
    }

    /// What every context shares: the user's drops, logs, TLS, paths, Lua/njs, resolvers.
    fn common(&mut self, d: &Directive) -> anyhow::Result<Option<Directive>> {
        let name = d.name.value.as_str();
        let at = || find::at(self.cfg, d);
        if self.opts.drop.iter().any(|x| x == name) {
            self.drop(d, "left out as asked (--drop)");
            return Ok(None);
        }
        if name.starts_with("balancer_by_lua") {
            anyhow::bail!(
                "{}: `{name}` picks the peers in Lua: the lab's nginx has no Lua, and without it the upstream under test would not be yours — nothing was run",
                at()
            );
        }
        if name == "include" {
            anyhow::bail!(
                "{}: `include` could not be read: give `nginx -T` output, which carries every included file",
                at()
            );
        }
        let why = match name {
            "access_log" | "error_log" => {
                Some("the lab writes its own logs into the run directory, in its format")
            }
            "log_format" if d.arg(0) == Some("lab") => {
                Some("the lab's own log format is named `lab`")
            }
            "auth_request" | "auth_request_set" => {
                Some("an auth subrequest: the lab plays the proxied path, not your auth service")
            }
            _ if name.starts_with("proxy_ssl_") => match self.tls {
                Tls::Play => return Ok(self.proxy_ssl(d)),
                Tls::Off(why) => Some(why),
            },
            _ if is_tls(name) => {
                Some("TLS toward clients is not played: the lab's load speaks plain HTTP to nginx")
            }
            _ if writes_outside(name) => Some("it would write outside the run directory"),
            _ if name.contains("_by_lua")
                || name.starts_with("lua_")
                || name.starts_with("js_") =>
            {
                Some("Lua/njs: the lab's nginx has neither module")
            }
            _ => None,
        };
        if let Some(why) = why {
            self.drop(d, why);
            return Ok(None);
        }
        if name == "resolver" {
            return Ok(Some(self.resolver(d)));
        }
        if name == "set"
            && let Some(v) = d.arg(1)
            && let Some((now_value, scheme)) = set_value(v, self.tls.plays())
        {
            let mut now = d.clone();
            now.args[1] = word(&now_value);
            let why = match scheme {
                Some("https") if self.tls.plays() => {
                    self.https = true;
                    if let Some(h) = set_host(v) {
                        self.tls_names.push(h);
                    }
                    "the lab backends' port (TLS kept)"
                }
                Some("https") => "the lab backends' port, and plain HTTP",
                _ => {
                    self.plain |= scheme.is_some();
                    "the lab backends' port"
                }
            };
            self.rewrite(d, &now, why);
            return Ok(Some(now));
        }
        Ok(Some(d.clone()))
    }

    /// A `proxy_ssl_*` line when TLS is played: kept as written, but what names your
    /// authority's files or a client certificate.
    fn proxy_ssl(&mut self, d: &Directive) -> Option<Directive> {
        match d.name.value.as_str() {
            "proxy_ssl_trusted_certificate" => {
                let now = Directive {
                    args: vec![word("{tls_ca}")],
                    ..d.clone()
                };
                self.rewrite(
                    d,
                    &now,
                    "the run's certificate authority, which signed the lab backends' certificate",
                );
                Some(now)
            }
            "proxy_ssl_certificate"
            | "proxy_ssl_certificate_key"
            | "proxy_ssl_password_file"
            | "proxy_ssl_certificate_cache" => {
                self.drop(d, "a client certificate: the lab's backends ask for none");
                None
            }
            "proxy_ssl_crl" => {
                self.drop(
                    d,
                    "your authority's revocation list: the run's authority revokes nothing",
                );
                None
            }
            "proxy_ssl_name" => {
                if let Some(n) = d.arg(0).filter(|n| !n.contains('$')) {
                    self.tls_names.push(n.to_ascii_lowercase());
                }
                Some(d.clone())
            }
            _ => Some(d.clone()),
        }
    }

    /// `resolver A B valid=…` → `resolver {dns} valid=…`.
    fn resolver(&mut self, d: &Directive) -> Directive {
        let mut now = d.clone();
        now.args.retain(|a| a.value.contains('='));
        now.args.insert(0, word("{dns}"));
        self.rewrite(
            d,
            &now,
            "the run's DNS authority serves your names as they are",
        );
        self.resolvers.push(d.clone());
        now
    }

    /// The chosen server: one `listen` on the run's address, the locations on the path.
    fn server(&mut self, srv: &Directive) -> anyhow::Result<(Directive, Option<String>)> {
        let kids = srv.children();
        let named = named_targets(kids);
        let mut out = Vec::new();
        let mut path = None;
        let mut listened = false;
        for d in kids {
            match d.name.value.as_str() {
                "listen" if !listened => {
                    listened = true;
                    let now = Directive {
                        args: vec![word("{listen}")],
                        block: None,
                        ..d.clone()
                    };
                    self.rewrite(d, &now, "the run's loopback address");
                    out.push(now);
                }
                "listen" => self.drop(d, "one listen on the run's address"),
                "location" => {
                    let arg = find::location_arg(d);
                    let is_named = arg.starts_with('@');
                    if reaches(d.children(), self.target, &with_sets(kids, &[])) {
                        if path.is_none() && !is_named {
                            path = request_path(d);
                        }
                        out.push(self.location(d, &with_sets(kids, &[]))?);
                    } else if is_named && named.contains(&arg) {
                        out.push(self.location(d, &with_sets(kids, &[]))?);
                    } else {
                        self.drop(d, "a location off the path under test");
                    }
                }
                _ => {
                    if let Some(k) = self.common(d)? {
                        out.push(k);
                    }
                }
            }
        }
        if !listened {
            out.insert(0, line(srv, "listen", &["{listen}"]));
        }
        Ok((
            Directive {
                block: Some(out),
                ..srv.clone()
            },
            path,
        ))
    }

    /// A kept location, its passes rewritten.
    fn location(
        &mut self,
        loc: &Directive,
        outer: &[(String, String)],
    ) -> anyhow::Result<Directive> {
        let sets = with_sets(loc.children(), outer);
        let mut out = Vec::new();
        for d in loc.children() {
            match d.name.value.as_str() {
                "proxy_pass" => out.push(self.pass(d, &sets)?),
                n if resolvelab_lint::facts::PASSES.contains(&n) => anyhow::bail!(
                    "{}: `{n}`: the lab's backends speak HTTP only — nothing was run",
                    find::at(self.cfg, d)
                ),
                "location" | "if" | "limit_except" => out.push(self.location(d, &sets)?),
                _ => {
                    if let Some(k) = self.common(d)? {
                        out.push(k);
                    }
                }
            }
        }
        Ok(Directive {
            block: Some(out),
            ..loc.clone()
        })
    }

    /// `proxy_pass`: the scheme to `http`, an upstream kept, a host's port to the lab's, an
    /// IP literal to a lab backend.
    fn pass(&mut self, d: &Directive, sets: &[(String, String)]) -> anyhow::Result<Directive> {
        let url = d.arg(0).unwrap_or_default();
        let (scheme, rest) = url.split_once("://").unwrap_or(("http", url));
        let mut whys = Vec::new();
        let keep_tls = scheme == "https" && self.tls.plays();
        let host = pass_host(url).unwrap_or_default().to_string();
        match self.tls {
            _ if url.starts_with('$') => {} // the scheme is in the `set` line
            Tls::Off(why) if scheme == "https" => whys.push(why),
            _ if keep_tls => {
                self.https = true;
                if !host.starts_with('$') {
                    self.tls_names.push(host.to_ascii_lowercase());
                }
            }
            _ => self.plain = true,
        }
        let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(authority_end);
        let new_authority = if let Some(var) = host.strip_prefix('$') {
            let value = sets
                .iter()
                .rev()
                .find(|(v, _)| v == var)
                .map(|(_, v)| v.clone());
            match value.as_deref() {
                Some(v) if find::name_in(v).is_some() => {
                    self.serve(find::name_in(v).unwrap_or_default(), true)
                }
                Some(v) if !v.contains('$') => anyhow::bail!(
                    "{}: `${var}` is the address `{v}`: nginx would connect to it as written, and the lab sends only to loopback — nothing was run",
                    find::at(self.cfg, d)
                ),
                _ => {}
            }
            if url.starts_with('$') || value.as_deref().is_some_and(|v| v.contains(':')) {
                // `set $v name:8001`: the `set` line carries the port (rewritten there).
                authority.to_string()
            } else {
                // `$v`, `$v:8443` or `$v$uri`: the port becomes the lab's.
                let after = &authority[host.len()..];
                let after = after
                    .strip_prefix(':')
                    .map(|p| p.trim_start_matches(|c: char| c.is_ascii_digit()))
                    .unwrap_or(after);
                whys.push("the lab backends' port");
                format!("{host}:{{port}}{after}")
            }
        } else if self.is_upstream(&host) {
            self.keep_upstream(&host);
            authority.to_string()
        } else if let Some(h) = host_of(authority) {
            self.serve(h.clone(), false);
            whys.push("the lab backends' port");
            format!("{h}:{{port}}")
        } else if authority.starts_with("unix:") {
            anyhow::bail!(
                "{}: a unix socket upstream: the lab's backends listen on loopback TCP — nothing was run",
                find::at(self.cfg, d)
            );
        } else {
            whys.push("an IP literal: a lab backend stands in for it");
            format!("{{backend:{}}}:{{port}}", self.add_static())
        };
        let now_url = if url.starts_with('$') {
            // `proxy_pass $v`: the whole URL is in the `set` line (rewritten there).
            url.to_string()
        } else {
            let scheme = if keep_tls { "https" } else { "http" };
            format!("{scheme}://{new_authority}{tail}")
        };
        let mut now = d.clone();
        now.args[0] = word(&now_url);
        if now_url != url {
            self.rewrite(d, &now, &whys.join("; "));
        }
        Ok(now)
    }

    fn is_upstream(&self, name: &str) -> bool {
        find::http(self.cfg).is_some_and(|h| {
            h.children().iter().any(|u| {
                u.name.value == "upstream" && u.arg(0).is_some_and(|n| n.eq_ignore_ascii_case(name))
            })
        })
    }

    fn keep_upstream(&mut self, name: &str) {
        let name = name.to_ascii_lowercase();
        if !self.kept_upstreams.contains(&name) {
            self.kept_upstreams.push(name);
        }
    }

    /// A name the authority serves, with a backend of its own.
    fn serve(&mut self, host: String, at_run_time: bool) {
        match self.served.iter_mut().find(|s| s.name.host == host) {
            Some(s) => s.name.at_run_time |= at_run_time,
            None => {
                let backend = format!("b{}", self.served.len() + 1);
                self.served.push(Served {
                    name: Name { host, at_run_time },
                    backend,
                });
            }
        }
    }

    fn add_static(&mut self) -> String {
        let s = format!("s{}", self.statics.len() + 1);
        self.statics.push(s.clone());
        s
    }

    /// A kept upstream block: its servers' ports to the lab's, IP literals to lab backends.
    fn upstream(&mut self, u: &Directive) -> anyhow::Result<Directive> {
        let mut out = Vec::new();
        for d in u.children() {
            if d.name.value != "server" {
                if let Some(k) = self.common(d)? {
                    out.push(k);
                }
                continue;
            }
            out.push(self.server_line(d)?);
        }
        Ok(Directive {
            block: Some(out),
            ..u.clone()
        })
    }

    fn server_line(&mut self, d: &Directive) -> anyhow::Result<Directive> {
        let addr = d.arg(0).unwrap_or_default();
        let at = find::at(self.cfg, d);
        if addr.starts_with("unix:") {
            anyhow::bail!(
                "{at}: a unix socket peer: the lab's backends listen on loopback TCP — nothing was run"
            );
        }
        if d.args.iter().any(|a| a.value.starts_with("service=")) {
            anyhow::bail!(
                "{at}: `service=` asks for SRV records: the lab's authority serves A records only — nothing was run"
            );
        }
        let resolve = d.args.iter().any(|a| a.value == "resolve");
        let (now_addr, why) = match host_of(addr) {
            Some(h) => {
                self.serve(h.clone(), resolve);
                (format!("{h}:{{port}}"), "the lab backends' port")
            }
            None => (
                format!("{{backend:{}}}:{{port}}", self.add_static()),
                "an IP literal: a lab backend stands in for it",
            ),
        };
        let mut now = d.clone();
        now.args[0] = word(&now_addr);
        self.rewrite(d, &now, why);
        Ok(now)
    }
}

/// A `set` value that names a backend with a port or a scheme (`app:8001`,
/// `https://app:443/x`), with the lab's port (and `https` kept only if `keep_tls`), and the
/// scheme it had; None for anything else.
fn set_value(v: &str, keep_tls: bool) -> Option<(String, Option<&str>)> {
    let (scheme, rest) = match v.split_once("://") {
        Some((s, r)) if s == "http" || s == "https" => (Some(s), r),
        Some(_) => return None,
        None => (None, v),
    };
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let (h, port) = match authority.rsplit_once(':') {
        Some((h, p)) if !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()) => (h, Some(p)),
        _ => (authority, None),
    };
    let host = host_of(h)?;
    if scheme.is_none() && port.is_none() {
        return None;
    }
    let prefix = match scheme {
        Some("https") if keep_tls => "https://",
        Some(_) => "http://",
        None => "",
    };
    Some((format!("{prefix}{host}:{{port}}{tail}"), scheme))
}

/// The host of a `set` value's URL (`https://api.example.com:443/x` → `api.example.com`).
fn set_host(v: &str) -> Option<String> {
    let rest = v.split_once("://")?.1;
    let authority = &rest[..rest.find(['/', '?']).unwrap_or(rest.len())];
    let h = authority.rsplit_once(':').map_or(authority, |(h, _)| h);
    host_of(h).map(|h| h.to_ascii_lowercase())
}

/// The named locations the server's `error_page`s send to (`@retry`).
fn named_targets(dirs: &[Directive]) -> Vec<String> {
    let mut out = Vec::new();
    for d in find::all(dirs) {
        if d.name.value == "error_page"
            && let Some(t) = d.args.last().filter(|t| t.value.starts_with('@'))
        {
            out.push(t.value.clone());
        }
    }
    out
}

/// A path that reaches a prefix or exact location; None for a regex or named one.
fn request_path(loc: &Directive) -> Option<String> {
    let args: Vec<&str> = loc.args.iter().map(|a| a.value.as_str()).collect();
    match args.as_slice() {
        [p] if p.starts_with('/') => Some((*p).to_string()),
        ["=" | "^~", p] if p.starts_with('/') => Some((*p).to_string()),
        _ => None,
    }
}

/// A directive on one line (a block as `name args { … }`).
pub fn one_line(d: &Directive) -> String {
    let mut s = d.name.value.clone();
    for a in &d.args {
        s.push(' ');
        s.push_str(&quote(&a.value));
    }
    s.push_str(if d.block.is_some() { " { … }" } else { ";" });
    s
}

/// Print directives as nginx reads them, indented by four spaces a level.
pub fn print(dirs: &[Directive], depth: usize, out: &mut String) {
    let pad = "    ".repeat(depth);
    for d in dirs {
        let _ = write!(out, "{pad}{}", d.name.value);
        for a in &d.args {
            let _ = write!(out, " {}", quote(&a.value));
        }
        match &d.block {
            Some(kids) => {
                out.push_str(" {\n");
                print(kids, depth + 1, out);
                let _ = writeln!(out, "{pad}}}");
            }
            None => out.push_str(";\n"),
        }
    }
}

/// A word as nginx reads it back: quoted when it holds what ends or opens a word, with the
/// escapes nginx applies inside (and outside) quotes doubled.
fn quote(v: &str) -> String {
    let mut esc = String::with_capacity(v.len());
    let mut chars = v.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' && matches!(chars.peek(), Some('"' | '\'' | '\\' | 't' | 'r' | 'n')) {
            esc.push('\\');
        }
        esc.push(c);
    }
    let needs = v.is_empty()
        || v.chars()
            .any(|c| c.is_whitespace() || matches!(c, ';' | '"' | '\'' | '#' | '{' | '}'));
    if needs {
        format!("\"{}\"", esc.replace('"', "\\\""))
    } else {
        esc
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::find::Via;

    fn cfg(text: &str) -> Config {
        resolvelab_lint::load::load_text("nginx.conf", text.to_string(), None).unwrap()
    }

    const SEED: &str = "http {\n\
        upstream be {\n\
            resolver 10.0.0.53 valid=5s;\n\
            resolver_timeout 3s;\n\
            zone be 128k;\n\
            server api.example.com:443 resolve;\n\
            keepalive 1024;\n\
        }\n\
        access_log /var/log/nginx/access.log;\n\
        server {\n\
            listen 443 ssl;\n\
            ssl_certificate /etc/ssl/a.pem;\n\
            location / { proxy_pass https://be; proxy_next_upstream error timeout; }\n\
            location /static/ { root /srv; }\n\
        }\n\
        server { listen 80; return 301 https://$host$request_uri; }\n\
    }\n";

    #[test]
    fn the_seed_config_keeps_its_upstream_and_lists_every_change() {
        let c = cfg(SEED);
        let t = &find::targets(&c)[0];
        let lab = lab_config(&c, t, &Options::default()).unwrap();
        assert!(
            lab.body.contains("resolver \"{dns}\" valid=5s;"),
            "{}",
            lab.body
        );
        assert!(
            lab.body
                .contains("server \"api.example.com:{port}\" resolve;")
        );
        assert!(lab.body.contains("keepalive 1024;"));
        assert!(lab.body.contains("proxy_pass http://be;"));
        assert!(lab.body.contains("proxy_next_upstream error timeout;"));
        assert!(lab.body.contains("listen \"{listen}\";"));
        assert!(!lab.body.contains("ssl"));
        assert!(!lab.body.contains("/static/"));
        assert!(!lab.body.contains("return 301"));
        assert_eq!(lab.path, "/");
        assert_eq!(lab.valid.as_deref(), Some("5s"));
        assert!(!lab.resolves_at_start);
        assert_eq!(lab.served.len(), 1);
        let at: Vec<(&str, ChangeKind)> = lab
            .changes
            .iter()
            .map(|c| (c.at.as_str(), c.kind))
            .collect();
        for want in [
            ("nginx.conf:3", ChangeKind::Rewritten),
            ("nginx.conf:6", ChangeKind::Rewritten),
            ("nginx.conf:9", ChangeKind::Dropped),
            ("nginx.conf:11", ChangeKind::Rewritten),
            ("nginx.conf:12", ChangeKind::Dropped),
            ("nginx.conf:13", ChangeKind::Rewritten),
            ("nginx.conf:14", ChangeKind::Dropped),
            ("nginx.conf:16", ChangeKind::Dropped),
        ] {
            assert!(at.contains(&want), "{want:?} in {at:?}");
        }
        // What the lab runs reads back with the linter's parser.
        resolvelab_lint::parse::parse(&lab.body, 0, "lab").unwrap();
    }

    #[test]
    fn a_lua_balancer_srv_and_sockets_are_refused_at_their_line() {
        for (text, line, says) in [
            (
                "http { upstream be { server 0.0.0.1; balancer_by_lua_block { x(); } }\n server { location / { proxy_pass http://be; } } }",
                1,
                "Lua",
            ),
            (
                "http {\nupstream be { zone z 64k; server a.example resolve service=http; }\n server { location / { proxy_pass http://be; } } }",
                2,
                "SRV",
            ),
        ] {
            let c = cfg(text);
            let t = find::targets(&c);
            let t = t.first().cloned().unwrap_or(Target {
                name: "be".into(),
                via: Via::Upstream,
                at: "nginx.conf:1".into(),
                names: vec![],
                locations: vec![],
            });
            let e = lab_config(&c, &t, &Options::default())
                .unwrap_err()
                .to_string();
            assert!(e.starts_with(&format!("nginx.conf:{line}:")), "{e}");
            assert!(e.contains(says), "{e}");
        }
    }

    #[test]
    fn https_is_played_only_when_asked_and_every_kept_pass_is_tls() {
        let play = Options {
            tls: Tls::Play,
            ..Options::default()
        };
        // A variable pass whose `set` carries the scheme, and a `proxy_ssl_name`.
        let text = "http {\n resolver 10.0.0.53;\n server { location / {\n set $u https://api.example.com:8443;\n proxy_pass $u;\n proxy_ssl_name edge.example.com;\n proxy_ssl_crl /etc/ssl/crl.pem;\n } } }";
        let c = cfg(text);
        let t = &find::targets(&c)[0];
        let lab = lab_config(&c, t, &play).unwrap();
        assert!(
            lab.body.contains("https://api.example.com:{port}"),
            "{}",
            lab.body
        );
        assert_eq!(
            lab.tls.as_deref(),
            Some(
                &[
                    "api.example.com".to_string(),
                    "edge.example.com".to_string()
                ][..]
            )
        );
        assert!(
            lab.changes
                .iter()
                .any(|c| c.was.starts_with("proxy_ssl_crl") && c.kind == ChangeKind::Dropped)
        );
        // Without the SSL module: plain HTTP, each line saying why.
        let off = lab_config(&c, t, &Options::default()).unwrap();
        assert!(
            off.tls.is_none() && off.body.contains("http://api.example.com:{port}"),
            "{}",
            off.body
        );
        assert!(!off.body.contains("proxy_ssl_name"), "{}", off.body);
        // One kept location over plain HTTP: the backends speak one protocol, so none is TLS.
        let mixed = "http {\n resolver 10.0.0.53;\n upstream be { zone z 64k; server api.example.com resolve; }\n server {\n location / { proxy_pass https://be; error_page 502 = @r; }\n location @r { proxy_pass http://be; }\n } }";
        let c = cfg(mixed);
        let t = &find::targets(&c)[0];
        let lab = lab_config(&c, t, &play).unwrap();
        assert!(lab.tls.is_none(), "{}", lab.body);
        let why = &lab
            .changes
            .iter()
            .find(|c| c.was == "proxy_pass https://be;")
            .unwrap()
            .why;
        assert!(why.contains("one protocol"), "{why}");
    }

    #[test]
    fn quoting_round_trips_through_the_parser() {
        for v in ["~ ^/a{2}$", "a b", "", "x\"y", "$host", "^/(\\d+)$"] {
            let text = format!("x {};\n", quote(v));
            let p = resolvelab_lint::parse::parse(&text, 0, "t").unwrap();
            assert_eq!(p.directives[0].args[0].value, v, "{text}");
        }
    }
}
