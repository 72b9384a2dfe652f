//! Which upstreams of a configuration get their peers from DNS, and which locations send to
//! them: read with the linter's parser, so `verify` and `lint` see one configuration.
//!
//! Three ways a name reaches nginx's peers (DOMAIN.md §3): an `upstream` block's `server NAME`
//! line (resolved at run time with `resolve`, else once at start and at each reload), a
//! `proxy_pass http://NAME` that names no upstream (an implicit upstream, resolved at start), and
//! a variable `proxy_pass http://$v` whose `set $v NAME` the resolver answers per request.

use resolvelab_lint::facts::{host_of, pass_host, proxy_target};
use resolvelab_lint::load::Config;
use resolvelab_lint::parse::Directive;
use serde::Serialize;

/// How a target's names become peers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Via {
    /// `upstream NAME { server HOST …; }`.
    Upstream,
    /// `proxy_pass http://HOST…` where HOST names no upstream block.
    Direct,
    /// `set $v HOST; proxy_pass http://$v…` with a `resolver`.
    Variable,
}

/// One DNS name a target uses, and when nginx asks for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Name {
    /// The name, lower case.
    pub host: String,
    /// nginx asks for it while it runs (`resolve`, a variable `proxy_pass`); false: only when it
    /// starts and at each reload.
    pub at_run_time: bool,
}

/// A DNS-fed destination of the configuration, with where it is written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Target {
    /// The upstream's name, or the host of a direct or variable `proxy_pass`.
    pub name: String,
    /// How its names become peers.
    pub via: Via,
    /// `file:line` of the upstream block or the `proxy_pass`.
    pub at: String,
    /// Its DNS names, in the order written.
    pub names: Vec<Name>,
    /// The `location` arguments that send to it (`/`, `= /api`, `@fallback`), in order.
    pub locations: Vec<String>,
}

impl Target {
    /// True when some name is asked for at run time, so DNS events reach nginx while it runs.
    pub fn asks_at_run_time(&self) -> bool {
        self.names.iter().any(|n| n.at_run_time)
    }
}

/// The `http` block of a configuration.
pub fn http(cfg: &Config) -> Option<&Directive> {
    cfg.root.iter().find(|d| d.name.value == "http")
}

/// `file:line` of a directive.
pub fn at(cfg: &Config, d: &Directive) -> String {
    let file = cfg.files.get(d.file).map_or("?", |f| f.name.as_str());
    format!("{file}:{}", d.name.span.line)
}

/// Every DNS-fed target of the configuration's `http` block, in the order written.
pub fn targets(cfg: &Config) -> Vec<Target> {
    let Some(http) = http(cfg) else {
        return Vec::new();
    };
    let upstreams: Vec<&Directive> = http
        .children()
        .iter()
        .filter(|d| d.name.value == "upstream")
        .collect();
    let mut out: Vec<Target> = Vec::new();
    for u in &upstreams {
        let names = upstream_names(u);
        if !names.is_empty() {
            out.push(Target {
                name: u.arg(0).unwrap_or_default().to_string(),
                via: Via::Upstream,
                at: at(cfg, u),
                names,
                locations: Vec::new(),
            });
        }
    }
    let is_upstream = |h: &str| {
        upstreams
            .iter()
            .any(|u| u.arg(0).is_some_and(|n| n.eq_ignore_ascii_case(h)))
    };
    for srv in http.children().iter().filter(|d| d.name.value == "server") {
        for (loc, pass, sets) in passes_in(srv.children(), &[]) {
            let Some(t) = pass_target(pass, &sets, &is_upstream) else {
                continue;
            };
            let (name, via, names) = t;
            let where_ = loc.map_or_else(String::new, location_arg);
            match out.iter_mut().find(|o| o.name.eq_ignore_ascii_case(&name)) {
                Some(o) => {
                    if !where_.is_empty() && !o.locations.contains(&where_) {
                        o.locations.push(where_);
                    }
                }
                None if via == Via::Upstream => {}
                None => out.push(Target {
                    name,
                    via,
                    at: at(cfg, pass),
                    names,
                    locations: (!where_.is_empty()).then_some(where_).into_iter().collect(),
                }),
            }
        }
    }
    out
}

/// The named `server` lines of an upstream block (IP literals and sockets are not DNS-fed).
fn upstream_names(u: &Directive) -> Vec<Name> {
    let mut names: Vec<Name> = Vec::new();
    for s in u.children().iter().filter(|d| d.name.value == "server") {
        let Some(host) = s.arg(0).and_then(host_of) else {
            continue;
        };
        let at_run_time = s.args.iter().any(|a| a.value == "resolve");
        match names.iter_mut().find(|n| n.host == host) {
            Some(n) => n.at_run_time |= at_run_time,
            None => names.push(Name { host, at_run_time }),
        }
    }
    names
}

/// What a `proxy_pass` sends to: (target name, how, its names); None for an IP literal, a
/// socket, or a variable whose value is not a literal name in scope.
fn pass_target(
    pass: &Directive,
    sets: &[(String, String)],
    is_upstream: &dyn Fn(&str) -> bool,
) -> Option<(String, Via, Vec<Name>)> {
    let url = pass.arg(0)?;
    if url
        .split_once("://")
        .map_or(url, |(_, r)| r)
        .starts_with("unix:")
    {
        return None;
    }
    if let Some(up) = proxy_target(pass) {
        if is_upstream(up) {
            return Some((up.to_string(), Via::Upstream, Vec::new()));
        }
        let host = host_of(up)?;
        let name = Name {
            host: host.clone(),
            at_run_time: false,
        };
        return Some((host, Via::Direct, vec![name]));
    }
    let var = pass_host(url)?.strip_prefix('$')?;
    let value = sets.iter().rev().find(|(v, _)| v == var)?.1.as_str();
    if value.contains('$') || is_upstream(value) {
        return None;
    }
    let host = name_in(value)?;
    let name = Name {
        host: host.clone(),
        at_run_time: true,
    };
    Some((host, Via::Variable, vec![name]))
}

/// The DNS name a `set` value names: `app`, `app:8001` or a whole URL `http://app:80/x`; None
/// for an address literal or a socket.
pub fn name_in(value: &str) -> Option<String> {
    host_of(pass_host(value)?)
}

/// Every directive under `dirs`, depth first, in the order written.
pub fn all(dirs: &[Directive]) -> Vec<&Directive> {
    let mut out = Vec::new();
    for d in dirs {
        out.push(d);
        out.extend(all(d.children()));
    }
    out
}

/// A `location`'s arguments as written (`= /api`).
pub fn location_arg(loc: &Directive) -> String {
    loc.args
        .iter()
        .map(|a| a.value.as_str())
        .collect::<Vec<_>>()
        .join(" ")
}

type Pass<'a> = (Option<&'a Directive>, &'a Directive, Vec<(String, String)>);

/// Every `proxy_pass` under `dirs` with its innermost location and the `set $v VALUE` lines in
/// scope (server level, then each enclosing location).
fn passes_in<'a>(dirs: &'a [Directive], outer: &[(String, String)]) -> Vec<Pass<'a>> {
    let mut sets = outer.to_vec();
    for d in dirs.iter().filter(|d| d.name.value == "set") {
        if let (Some(v), Some(val)) = (d.arg(0).and_then(|v| v.strip_prefix('$')), d.arg(1)) {
            sets.push((v.to_string(), val.to_string()));
        }
    }
    let mut out = Vec::new();
    for d in dirs {
        match d.name.value.as_str() {
            "proxy_pass" => out.push((None, d, sets.clone())),
            "location" | "if" | "limit_except" => {
                for (loc, p, s) in passes_in(d.children(), &sets) {
                    let loc = if d.name.value == "location" {
                        loc.or(Some(d))
                    } else {
                        loc
                    };
                    out.push((loc, p, s));
                }
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Config {
        resolvelab_lint::load::load_text("nginx.conf", text.to_string(), None).unwrap()
    }

    #[test]
    fn the_three_ways_a_name_becomes_peers() {
        let cfg = load(
            "http {\n resolver 10.0.0.53 valid=5s;\n\
             upstream be { zone be 64k; server api.example.com:443 resolve; server 10.1.1.1:80 backup; }\n\
             upstream fixed { server 10.1.1.2:80; }\n\
             upstream once { server once.example.com:8080; }\n\
             server { listen 80;\n\
               location / { proxy_pass https://be; }\n\
               location /f { proxy_pass http://fixed; }\n\
               location /d { proxy_pass http://direct.example.com:8080/x; }\n\
               location /v { set $t var.example.com; proxy_pass http://$t:8080; }\n\
               location /o { location /o/in { proxy_pass http://once; } }\n\
             }\n}\n",
        );
        let t = targets(&cfg);
        let got: Vec<(&str, Via, Vec<&str>, Vec<bool>)> = t
            .iter()
            .map(|t| {
                (
                    t.name.as_str(),
                    t.via,
                    t.locations.iter().map(String::as_str).collect(),
                    t.names.iter().map(|n| n.at_run_time).collect(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("be", Via::Upstream, vec!["/"], vec![true]),
                ("once", Via::Upstream, vec!["/o/in"], vec![false]),
                ("direct.example.com", Via::Direct, vec!["/d"], vec![false]),
                ("var.example.com", Via::Variable, vec!["/v"], vec![true]),
            ]
        );
        assert_eq!(t[0].at, "nginx.conf:3");
    }

    #[test]
    fn a_variable_without_a_literal_name_is_not_guessed() {
        let cfg = load("http { server { location / { proxy_pass http://$host$request_uri; } } }");
        assert!(targets(&cfg).is_empty());
    }
}
