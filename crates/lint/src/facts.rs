//! What a configuration makes nginx do with names at run time — the facts the checker needs to
//! rule a failure class in or out (`resolvelab diagnose --nginx-conf`), and the preconditions of
//! the rules that only apply where something resolves at run time.

use crate::load::Config;
use crate::parse::Directive;
use serde::{Deserialize, Serialize};

/// How the rules read an address, shared with what reads a configuration beside them (the lab's
/// loopback check, `resolvelab verify`): one reading of `server` addresses and `*_pass` URLs.
pub use crate::rules::model::{host_of, pass_host, proxy_target};

/// What resolves at run time in a configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct RuntimeFacts {
    /// Where it came from (a path, or `nginx -T`).
    pub source: String,
    /// Some upstream `server` line has `resolve`: peer lists change at run time.
    pub resolve: bool,
    /// Some `proxy_pass` (or `fastcgi_pass`, `grpc_pass`, …) names its target through a
    /// variable: with a `resolver`, a name is resolved per request.
    pub variable_pass: bool,
    /// A `balancer_by_lua*` picks the peers (ingress-nginx): nginx's round-robin does not.
    pub lua_balancer: bool,
    /// Some backend name is resolved only at start and at reloads (a `server` line without
    /// `resolve`, a `*_pass` URL naming a host: the `resolve-once` rule): a pin until reload.
    pub resolved_once: bool,
    /// The nginx version, when the input names it (`nginx -V` output pasted with `nginx -T`).
    pub version: Option<String>,
    /// How often nginx re-queries a name, ms: `valid=` + 1 s (nginx re-queries once the cached
    /// answer is past its validity, on the next second's timer), when every `resolver` line
    /// sets the same `valid=`; None when none does (the answer's TTL decides) or they differ.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requery_ms: Option<u64>,
}

/// The directives that send a request to an address given by name.
pub const PASSES: &[&str] = &[
    "proxy_pass",
    "fastcgi_pass",
    "grpc_pass",
    "uwsgi_pass",
    "scgi_pass",
    "memcached_pass",
];

/// The facts of a loaded configuration; `source` names it in reports.
pub fn runtime_facts(cfg: &Config, source: &str) -> RuntimeFacts {
    let mut f = RuntimeFacts {
        source: source.to_string(),
        ..RuntimeFacts::default()
    };
    let mut valid: Vec<Option<u64>> = Vec::new();
    let mut stack: Vec<(&Directive, bool)> = cfg.root.iter().map(|d| (d, false)).collect();
    while let Some((d, in_upstream)) = stack.pop() {
        let name = d.name.value.as_str();
        if name == "resolver" {
            valid.push(d.args.iter().find_map(|a| {
                let v = a.value.strip_prefix("valid=")?;
                resolvelab_core::spec::nginx::time_ms(v)
            }));
        }
        if in_upstream && name == "server" && d.args.iter().any(|a| a.value == "resolve") {
            f.resolve = true;
        }
        if PASSES.contains(&name) && d.arg(0).is_some_and(|a| a.contains('$')) {
            f.variable_pass = true;
        }
        if name.starts_with("balancer_by_lua") {
            f.lua_balancer = true;
        }
        let up = in_upstream || name == "upstream";
        stack.extend(d.children().iter().map(|c| (c, up)));
    }
    f.resolved_once = crate::rules::resolves_once(cfg);
    f.requery_ms = match valid.split_first() {
        Some((Some(v), rest)) if rest.iter().all(|r| *r == Some(*v)) => Some(v + 1000),
        _ => None,
    };
    f.version = cfg
        .files
        .iter()
        .find_map(|s| resolvelab_core::version::Version::from_nginx_v(&s.text))
        .map(|v| v.to_string());
    f
}

/// The access logs' formats a configuration defines and uses, read by the one parser of nginx
/// configurations (the checker takes its `log_format` from here, not from a second reader).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogFormats {
    /// Every `log_format NAME …`, in order, with its text: the format's strings joined as nginx
    /// joins them, `escape=` left out.
    pub defined: Vec<(String, String)>,
    /// The format names `access_log PATH NAME` lines use, in order (`off` left out).
    pub used: Vec<String>,
}

impl LogFormats {
    /// The text of `log_format name`, if the configuration defines it.
    pub fn get(&self, name: &str) -> Option<&str> {
        let found = self.defined.iter().find(|(n, _)| n == name);
        found.map(|(_, t)| t.as_str())
    }

    /// The names defined, in order.
    pub fn names(&self) -> Vec<&str> {
        self.defined.iter().map(|(n, _)| n.as_str()).collect()
    }
}

/// The `log_format`s and `access_log` formats of a loaded configuration, in file order.
pub fn log_formats(cfg: &Config) -> LogFormats {
    let mut out = LogFormats::default();
    let mut stack: Vec<&Directive> = cfg.root.iter().rev().collect();
    while let Some(d) = stack.pop() {
        let args: Vec<&str> = d.args.iter().map(|a| a.value.as_str()).collect();
        match (d.name.value.as_str(), args.as_slice()) {
            ("log_format", [name, rest @ ..]) => {
                let text = rest.iter().filter(|a| !a.starts_with("escape="));
                out.defined
                    .push((name.to_string(), text.copied().collect()));
            }
            ("access_log", [path, format, ..]) if *path != "off" => {
                out.used.push(format.to_string());
            }
            _ => {}
        }
        stack.extend(d.children().iter().rev());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(text: &str) -> RuntimeFacts {
        let cfg = crate::load::load_text("t.conf", text.to_string(), None).unwrap();
        runtime_facts(&cfg, "t.conf")
    }

    #[test]
    fn resolve_variables_and_lua_balancers_are_seen() {
        let f = facts("http { upstream be { zone be 64k; server a.example:80 resolve; } }");
        assert!(f.resolve && !f.variable_pass && !f.lua_balancer);
        let f = facts(
            "http { resolver 127.0.0.1; server { set $b app; location / { proxy_pass http://$b; } } }",
        );
        assert!(!f.resolve && f.variable_pass);
        let f = facts("http { upstream u { server 0.0.0.1; balancer_by_lua_block { x() } } }");
        assert!(f.lua_balancer && !f.resolve);
        // A name in a static proxy_pass is resolved only at start: a pin, not a resolving line.
        let f = facts("http { server { listen 80; location / { proxy_pass http://a; } } }");
        assert_eq!(
            f,
            RuntimeFacts {
                source: "t.conf".into(),
                resolved_once: true,
                ..RuntimeFacts::default()
            }
        );
        // Addresses and upstream names are not resolved at all.
        let f = facts(
            "http { upstream a { server 10.0.0.1:80; } server { location / { proxy_pass http://a; } } }",
        );
        assert!(!f.resolved_once && !f.resolve);
        let f = facts("http { upstream a { server app:80; } }");
        assert!(f.resolved_once, "a static server line with a name");
    }

    #[test]
    fn the_requery_period_is_valid_plus_a_second_when_every_resolver_agrees() {
        let f =
            facts("http { resolver 10.0.0.53 valid=5s; server { resolver 10.0.0.53 valid=5s; } }");
        assert_eq!(f.requery_ms, Some(6000));
        let f = facts("http { resolver 10.0.0.53 valid=30s ipv6=off; }");
        assert_eq!(f.requery_ms, Some(31_000));
        for ttl in [
            "http { resolver 10.0.0.53; }",
            "http { resolver 10.0.0.53 valid=5s; server { resolver 10.0.0.53; } }",
            "http { resolver 10.0.0.53 valid=5s; server { resolver 10.0.0.53 valid=10s; } }",
            "http { }",
        ] {
            assert_eq!(facts(ttl).requery_ms, None, "{ttl}");
        }
    }

    #[test]
    fn log_formats_are_read_with_the_parser() {
        let cfg = crate::load::load_text(
            "t.conf",
            "http {\n  log_format main escape=json '$remote_addr \"$request\" '\n    '$status';\n\
             # log_format fake '$x';\n  server { access_log /var/log/a.log main buffer=32k; access_log off; }\n}\n"
                .into(),
            None,
        )
        .unwrap();
        let f = log_formats(&cfg);
        assert_eq!(f.get("main"), Some("$remote_addr \"$request\" $status"));
        assert_eq!(f.names(), ["main"], "a comment defines nothing");
        assert_eq!(f.used, ["main"]);
    }
}
