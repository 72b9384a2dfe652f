//! `verify --quick`: a target read as the model's template (`[nginx]` variables and
//! `[[nginx.server]]` lines), so that the same events play on the deterministic model in
//! seconds. The model plays nginx's upstream/resolve logic — round-robin, `max_fails`,
//! `resolve`, the retries of `proxy_next_upstream`, keep-alive — not a whole configuration:
//! what it does not model is refused by name, never approximated in silence. One exception,
//! stated in docs/verify.md: `keepalive_timeout` is left out (the model keeps idle connections
//! until a backend closes them).

use crate::find::{self, Target, Via};
use resolvelab_core::spec::nginx::ServerParams;
use resolvelab_lint::facts::{host_of, proxy_target};
use resolvelab_lint::load::Config;
use resolvelab_lint::parse::Directive;
use toml::{Table, Value};

/// Upstream directives that change how peers are picked: the model plays round-robin only.
const BALANCERS: [&str; 6] = [
    "hash",
    "ip_hash",
    "least_conn",
    "least_time",
    "random",
    "sticky",
];

/// The model's `[nginx]` table for a target and the backends its static peers need (`s1`, …);
/// or why the model cannot play it.
pub fn nginx_table(cfg: &Config, target: &Target) -> Result<(Table, Vec<String>), String> {
    let http = find::http(cfg).ok_or("the configuration has no http {} block")?;
    let mut t = Table::new();
    let mut statics = Vec::new();
    let upstream = http.children().iter().find(|d| {
        d.name.value == "upstream"
            && d.arg(0)
                .is_some_and(|n| n.eq_ignore_ascii_case(&target.name))
    });
    let mut resolvers: Vec<&Directive> = Vec::new();
    match (target.via, upstream) {
        (Via::Upstream, Some(u)) => {
            let servers = upstream_lines(u, &mut t, &mut statics)?;
            t.insert("server".into(), Value::Array(servers));
            resolvers.extend(u.children().iter().filter(|d| d.name.value == "resolver"));
        }
        (Via::Direct | Via::Variable, _) => {
            let route = if target.via == Via::Direct {
                "direct"
            } else {
                "variable"
            };
            t.insert("route".into(), string(route));
            let mut s = Table::new();
            s.insert("host".into(), string(&target.name));
            if target.via == Via::Direct {
                s.insert("resolve".into(), Value::Boolean(false));
            }
            t.insert("server".into(), Value::Array(vec![Value::Table(s)]));
        }
        (Via::Upstream, None) => return Err(format!("no upstream `{}`", target.name)),
    }
    // `keepalive N` without HTTP/1.1 and an empty `Connection` where the upstream is proxied
    // keeps no connection (lint's keepalive-ineffective): the model then keeps none either.
    if crate::fixes::on_target(cfg, target)
        .iter()
        .any(|f| f.rule == "keepalive-ineffective")
    {
        t.insert("keepalive".into(), Value::Integer(0));
    }
    resolvers.extend(
        http.children()
            .iter()
            .filter(|d| d.name.value == "resolver"),
    );
    if let Some(r) = resolvers.first() {
        for a in &r.args {
            if let Some(v) = a.value.strip_prefix("valid=") {
                t.insert("valid".into(), string(v));
            }
        }
        let ipv6 = !r.args.iter().any(|a| a.value == "ipv6=off");
        t.insert("ipv6".into(), Value::Boolean(ipv6));
    }
    let at_location =
        location_settings(http.children(), &target.name, Vec::new()).unwrap_or_default();
    if let Some(guarded) = retry_shim(http, &at_location) {
        t.insert("retry_shim".into(), Value::Boolean(true));
        t.insert("method_guard".into(), Value::Boolean(guarded));
    }
    for (key, directive) in [
        ("proxy_next_upstream", "proxy_next_upstream"),
        ("proxy_next_upstream_tries", "proxy_next_upstream_tries"),
        ("connect_timeout", "proxy_connect_timeout"),
        ("read_timeout", "proxy_read_timeout"),
        ("resolver_timeout", "resolver_timeout"),
    ] {
        let in_upstream = upstream.and_then(|u| last(u.children(), directive));
        let value = in_upstream.or_else(|| {
            at_location
                .iter()
                .rev()
                .find(|d| d.name.value == directive)
                .copied()
        });
        if let Some(d) = value {
            let words: Vec<&str> = d.args.iter().map(|a| a.value.as_str()).collect();
            let v = if key == "proxy_next_upstream_tries" {
                Value::Integer(words.first().and_then(|w| w.parse().ok()).unwrap_or(0))
            } else {
                string(&words.join(" "))
            };
            t.insert(key.into(), v);
        }
    }
    Ok((t, statics))
}

/// An upstream block's lines as the template's: `[[nginx.server]]`, zone, keepalive.
fn upstream_lines(
    u: &Directive,
    t: &mut Table,
    statics: &mut Vec<String>,
) -> Result<Vec<Value>, String> {
    let mut servers = Vec::new();
    let mut keepalive = 0;
    for d in u.children() {
        let name = d.name.value.as_str();
        match name {
            "server" => servers.push(Value::Table(server_line(d, statics)?)),
            "zone" => {
                if let Some(size) = d.arg(1) {
                    t.insert("zone".into(), string(size));
                }
            }
            "keepalive" => keepalive = d.arg(0).and_then(|v| v.parse().ok()).unwrap_or(0),
            // The model does not expire idle connections (its reclaim fault stands for it):
            // `keepalive_timeout` is left out of the model's reading.
            _ if BALANCERS.contains(&name) => {
                return Err(format!(
                    "`{name}`: the model plays round-robin only — play it on real nginx (without --quick)"
                ));
            }
            _ => {}
        }
    }
    t.insert("keepalive".into(), Value::Integer(keepalive));
    Ok(servers)
}

fn server_line(d: &Directive, statics: &mut Vec<String>) -> Result<Table, String> {
    let addr = d.arg(0).unwrap_or_default();
    let mut p = ServerParams::default();
    for w in &d.args[1..] {
        p.read(&w.value)?;
    }
    if p.service.is_some() || p.down {
        return Err(format!("`{}`: `service=`/`down` are not modelled", addr));
    }
    let mut s = Table::new();
    match host_of(addr) {
        Some(h) => {
            s.insert("host".into(), string(&h));
            s.insert("resolve".into(), Value::Boolean(p.resolve));
        }
        None => {
            let name = format!("s{}", statics.len() + 1);
            s.insert("host".into(), string(&format!("@{name}")));
            statics.push(name);
        }
    }
    if let Some(m) = p.max_fails {
        s.insert("max_fails".into(), Value::Integer(i64::from(m)));
    }
    if let Some(ms) = p.fail_timeout_ms {
        s.insert("fail_timeout".into(), string(&format!("{ms}ms")));
    }
    if p.backup {
        s.insert("backup".into(), Value::Boolean(true));
    }
    Ok(s)
}

/// A retry shim in scope of the target's location (`error_page 502 … = @NAME` whose named
/// location proxies again): Some(whether it guards the method).
fn retry_shim(http: &Directive, scope: &[&Directive]) -> Option<bool> {
    let page = scope.iter().rev().find(|d| {
        d.name.value == "error_page"
            && d.args.iter().any(|a| a.value == "502")
            && d.args.last().is_some_and(|a| a.value.starts_with('@'))
    })?;
    let name = page.args.last()?.value.as_str();
    let named = find::all(http.children())
        .into_iter()
        .find(|d| d.name.value == "location" && d.arg(0) == Some(name))?;
    let inner = find::all(named.children());
    if !inner.iter().any(|d| d.name.value == "proxy_pass") {
        return None;
    }
    Some(inner.iter().any(|d| {
        d.name.value == "if" && d.args.iter().any(|a| a.value.contains("$request_method"))
    }))
}

fn last<'a>(dirs: &'a [Directive], name: &str) -> Option<&'a Directive> {
    dirs.iter().rev().find(|d| d.name.value == name)
}

/// The directives in scope where a `proxy_pass` sends to `name` (outer to inner), for the first
/// such pass.
fn location_settings<'a>(
    dirs: &'a [Directive],
    name: &str,
    outer: Vec<&'a Directive>,
) -> Option<Vec<&'a Directive>> {
    let mut scope = outer;
    scope.extend(dirs.iter().filter(|d| d.block.is_none()));
    for d in dirs {
        if d.name.value == "proxy_pass" {
            let to = proxy_target(d).map(str::to_string).or_else(|| {
                scope
                    .iter()
                    .rev()
                    .filter(|s| s.name.value == "set")
                    .find_map(|s| s.arg(1).and_then(find::name_in))
            });
            if to.is_some_and(|t| t.eq_ignore_ascii_case(name)) {
                return Some(scope);
            }
        }
        if matches!(d.name.value.as_str(), "server" | "location" | "if")
            && let Some(found) = location_settings(d.children(), name, scope.clone())
        {
            return Some(found);
        }
    }
    None
}

fn string(s: &str) -> Value {
    Value::String(s.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seed_upstream_as_the_models_template() {
        let text = "http {\n proxy_next_upstream error timeout;\n upstream be {\n  resolver 10.0.0.53 valid=5s;\n  zone be 128k;\n  server api.example.com:443 resolve;\n  server 10.1.1.1:80 backup max_fails=0;\n  keepalive 1024;\n }\n server { location / { proxy_pass https://be; proxy_connect_timeout 2s; proxy_http_version 1.1; proxy_set_header Connection \"\"; } }\n}\n";
        let cfg = resolvelab_lint::load::load_text("nginx.conf", text.into(), None).unwrap();
        let t = &find::targets(&cfg)[0];
        let (table, statics) = nginx_table(&cfg, t).unwrap();
        assert_eq!(statics, vec!["s1"]);
        assert_eq!(table["valid"].as_str(), Some("5s"));
        assert_eq!(table["ipv6"].as_bool(), Some(true));
        assert_eq!(table["zone"].as_str(), Some("128k"));
        assert_eq!(table["keepalive"].as_integer(), Some(1024));
        assert_eq!(table["proxy_next_upstream"].as_str(), Some("error timeout"));
        assert_eq!(table["connect_timeout"].as_str(), Some("2s"));
        let servers = table["server"].as_array().unwrap();
        assert_eq!(servers[0]["host"].as_str(), Some("api.example.com"));
        assert_eq!(servers[1]["host"].as_str(), Some("@s1"));
        assert_eq!(servers[1]["max_fails"].as_integer(), Some(0));
    }

    #[test]
    fn what_the_model_does_not_play_is_named() {
        let text = "http { upstream be { least_conn; zone be 64k; server a.example resolve; }\n server { location / { proxy_pass http://be; } } }";
        let cfg = resolvelab_lint::load::load_text("nginx.conf", text.into(), None).unwrap();
        let t = &find::targets(&cfg)[0];
        assert!(nginx_table(&cfg, t).unwrap_err().contains("least_conn"));
    }

    #[test]
    fn keepalive_without_http11_is_no_keepalive_for_the_model() {
        let text = "http { upstream be { zone be 64k; server a.example resolve; keepalive 64; }\n server { location / { proxy_pass http://be; } } }";
        let cfg = resolvelab_lint::load::load_text("nginx.conf", text.into(), None).unwrap();
        let t = &find::targets(&cfg)[0];
        assert_eq!(
            nginx_table(&cfg, t).unwrap().0["keepalive"].as_integer(),
            Some(0)
        );
    }
}
