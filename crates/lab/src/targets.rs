//! Nothing a rendered configuration names can reach the network. Every address the lab's own
//! parts use is on the run's loopback /24, but a scenario's `[nginx] inline` body is the
//! author's text: `proxy_pass http://10.0.0.1:8080;` in it would have nginx connect to
//! 10.0.0.1. So every configuration a run renders is read before the proxy starts (nginx's
//! with the linter's parser, directive by directive; the other proxies' by every address
//! literal in them) and one that names a target off the machine is refused, naming the line.
//!
//! ```
//! use resolvelab_lab::targets::nginx;
//! assert!(nginx("upstream be { server 127.0.0.20:8080; }", &[]).is_ok());
//! let e = nginx("server { location / { proxy_pass http://10.0.0.1:8080; } }", &[]).unwrap_err();
//! assert_eq!(e.line, 1);
//! ```

use resolvelab_core::policy::is_loopback;
use resolvelab_lint::facts::PASSES;
use resolvelab_lint::parse::{Directive, parse};
use std::net::IpAddr;

/// A configuration line that would reach the network, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The line in the rendered text (1-based).
    pub line: u32,
    /// What it says and what to write instead.
    pub why: String,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}", self.line, self.why)
    }
}

/// Check an nginx `http {}` body: upstream `server`s, `*_pass` targets, `resolver`s, `listen`
/// addresses, syslog destinations, OCSP responders and `include`s. A name nginx resolves with
/// its `resolver` (a `server … resolve`, a variable `*_pass`) asks the resolver, which must be
/// on loopback; a name it resolves when it starts asks the system's resolver, so it passes only
/// when `names` holds it — the names the run's DNS authority serves, given only when the lab
/// points nginx's system resolver at that authority (else empty).
pub fn nginx(body: &str, names: &[String]) -> Result<(), Refusal> {
    let parsed = parse(body, 0, "inline").map_err(|e| Refusal {
        line: e.line,
        why: format!("the configuration does not parse: {}", e.message),
    })?;
    let mut upstreams = Vec::new();
    collect_upstreams(&parsed.directives, &mut upstreams);
    let ctx = Ctx { names, upstreams };
    walk(&parsed.directives, false, &ctx)
}

struct Ctx<'a> {
    names: &'a [String],
    upstreams: Vec<String>,
}

fn collect_upstreams(ds: &[Directive], out: &mut Vec<String>) {
    for d in ds {
        if d.name.value == "upstream"
            && let Some(n) = d.arg(0)
        {
            out.push(n.to_string());
        }
        collect_upstreams(d.children(), out);
    }
}

fn walk(ds: &[Directive], in_upstream: bool, ctx: &Ctx) -> Result<(), Refusal> {
    for d in ds {
        let refuse = |why: String| Refusal {
            line: d.name.span.line,
            why,
        };
        let name = d.name.value.as_str();
        let arg0 = d.arg(0).unwrap_or("");
        match name {
            "server" if in_upstream => {
                let by_resolver = d.args.iter().any(|a| a.value == "resolve");
                host_port(arg0, ctx, false, by_resolver).map_err(refuse)?
            }
            _ if PASSES.contains(&name) => pass(arg0, ctx).map_err(refuse)?,
            "resolver" => {
                for a in d.args.iter().map(|w| w.value.as_str()) {
                    if !a.contains('=') {
                        literal_loopback(a, "a resolver").map_err(refuse)?;
                    }
                }
            }
            "listen" => listen(arg0).map_err(refuse)?,
            "set" => set_value(d.arg(1).unwrap_or("")).map_err(refuse)?,
            "access_log" | "error_log" => syslog(arg0).map_err(refuse)?,
            "ssl_stapling_responder" | "ssl_ocsp_responder" => pass(arg0, ctx).map_err(refuse)?,
            "include" => {
                return Err(refuse(format!(
                    "`include {arg0}` reads a file outside the run: write its directives inline"
                )));
            }
            _ => {}
        }
        walk(d.children(), name == "upstream", ctx)?;
    }
    Ok(())
}

/// `HOST[:PORT]` or `unix:PATH`: a loopback literal, `localhost`, (for a `*_pass`) an upstream
/// block's name, a name resolved by the `resolver` (`by_resolver`), or a name resolved at start
/// that the run's authority serves.
fn host_port(addr: &str, ctx: &Ctx, upstream_ok: bool, by_resolver: bool) -> Result<(), String> {
    if addr.starts_with("unix:") {
        return Ok(());
    }
    let host = split_host(addr);
    if host.eq_ignore_ascii_case("localhost") {
        return Ok(());
    }
    if let Ok(ip) = host.parse::<IpAddr>() {
        return if is_loopback(ip) {
            Ok(())
        } else {
            Err(format!(
                "`{addr}` is off this machine: the lab only sends to loopback (write {{backend:NAME}} for a scenario backend)"
            ))
        };
    }
    if by_resolver
        || ctx.names.iter().any(|n| n.eq_ignore_ascii_case(host))
        || (upstream_ok && ctx.upstreams.iter().any(|u| u == host))
    {
        return Ok(());
    }
    Err(format!(
        "`{host}` would be resolved when nginx starts, by this machine's resolver: write a loopback address, `server {host} … resolve` with `{{resolver}}`, or a name of [dns.names] in a server line the lab renders"
    ))
}

/// A `*_pass` URL: its host checked as [`host_port`]; a variable one resolves at request time
/// through the `resolver`, which is checked on its own line.
fn pass(url: &str, ctx: &Ctx) -> Result<(), String> {
    if url.contains('$') {
        return Ok(());
    }
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let hostport = rest.split('/').next().unwrap_or(rest);
    host_port(hostport, ctx, true, false)
}

/// The host of `HOST:PORT`, `[V6]:PORT`, `HOST` or `V6`.
fn split_host(addr: &str) -> &str {
    if let Some(rest) = addr.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    if addr.parse::<IpAddr>().is_ok() {
        return addr;
    }
    addr.rsplit_once(':').map_or(addr, |(h, _)| h)
}

/// An address that must be a loopback literal (a resolver, a syslog server).
fn literal_loopback(addr: &str, what: &str) -> Result<(), String> {
    match split_host(addr).parse::<IpAddr>() {
        Ok(ip) if is_loopback(ip) => Ok(()),
        _ => Err(format!(
            "{what} at `{addr}` is off this machine: write {{resolver}} (the run's DNS authority) or a loopback address"
        )),
    }
}

/// `set $v ADDRESS`: a variable `*_pass` connects to an address literal as written, without
/// the resolver, so a literal that is off the machine is refused wherever it is set.
fn set_value(v: &str) -> Result<(), String> {
    let host = split_host(v);
    match host.parse::<IpAddr>() {
        Ok(ip) if !is_loopback(ip) => Err(format!(
            "`set … {v}`: a variable proxy_pass would connect to {ip}, off this machine: write a loopback address or a name the run's authority serves"
        )),
        _ => Ok(()),
    }
}

/// `listen`: a loopback address (a bare port or `*` listens on every interface).
fn listen(arg: &str) -> Result<(), String> {
    if arg.starts_with("unix:") {
        return Ok(());
    }
    let host = split_host(arg);
    let on_loopback =
        host.eq_ignore_ascii_case("localhost") || host.parse::<IpAddr>().is_ok_and(is_loopback);
    if on_loopback && host != arg {
        return Ok(());
    }
    Err(format!(
        "`listen {arg}` listens beyond loopback: write `listen {{listen}};` (the run's address)"
    ))
}

/// `syslog:server=ADDR,…` destinations must be on loopback.
fn syslog(arg: &str) -> Result<(), String> {
    let Some(opts) = arg.strip_prefix("syslog:") else {
        return Ok(());
    };
    for o in opts.split(',') {
        if let Some(server) = o.strip_prefix("server=") {
            if server.starts_with("unix:") {
                continue;
            }
            literal_loopback(server, "a syslog server")?;
        }
    }
    Ok(())
}

/// Check the text of another proxy's configuration (HAProxy, Envoy, Caddy), rendered by the
/// lab from the run's addresses: every IPv4 literal in it is on loopback.
pub fn text(config: &str) -> Result<(), Refusal> {
    for (k, line) in config.lines().enumerate() {
        for word in line.split(|c: char| !(c.is_ascii_digit() || c == '.')) {
            let Ok(ip) = word.parse::<std::net::Ipv4Addr>() else {
                continue;
            };
            if !ip.is_loopback() {
                return Err(Refusal {
                    line: k as u32 + 1,
                    why: format!("{ip} is off this machine: the lab only sends to loopback"),
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Vec<String> {
        vec!["app.test.local".into()]
    }

    #[test]
    fn loopback_and_served_names_pass() {
        let body = "resolver 127.0.0.53:53 valid=5s ipv6=off;\n\
            upstream be { zone be 64k; server app.test.local:8080 resolve; server 127.0.0.20:8080 backup; }\n\
            upstream other { zone be; server anything.test:80 resolve; server app.test.local:80; }\n\
            server { listen 127.0.0.1:8080; access_log syslog:server=127.0.0.1:514 combined;\n\
              location / { proxy_pass http://be; }\n\
              location /v { set $t app.test.local; proxy_pass http://$t:8080; }\n\
              location /u { proxy_pass http://unix:/tmp/x.sock; } }";
        assert_eq!(nginx(body, &names()), Ok(()));
    }

    #[test]
    fn every_way_off_the_machine_is_refused_at_its_line() {
        for (body, line, says) in [
            (
                "server {\n location / { proxy_pass http://10.0.0.1:8080; } }",
                2,
                "10.0.0.1",
            ),
            ("upstream be {\n server 192.0.2.7:80; }", 2, "192.0.2.7"), // network-safe: refused text
            ("upstream be { server example.com:80; }", 1, "example.com"),
            ("upstream be { server other.test:80; }", 1, "other.test"),
            ("resolver 8.8.8.8 valid=5s;", 1, "8.8.8.8"), // network-safe: refused text
            ("server { listen 8080; }", 1, "listens beyond loopback"),
            (
                "server { listen 0.0.0.0:8080; }",
                1,
                "listens beyond loopback",
            ),
            ("access_log syslog:server=10.1.1.1:514;", 1, "syslog"),
            ("include /etc/nginx/conf.d/*.conf;", 1, "include"),
            (
                "server { location / {\n set $b 10.9.8.7:80; proxy_pass http://$b; } }",
                2,
                "10.9.8.7",
            ),
            (
                "server { location / { grpc_pass grpc://[2001:db8::1]:50051; } }",
                1,
                "2001:db8::1",
            ),
        ] {
            let e = nginx(body, &names()).unwrap_err();
            assert_eq!(e.line, line, "{body}");
            assert!(e.why.contains(says), "{body}: {}", e.why);
        }
    }

    #[test]
    fn another_proxys_text_is_scanned_for_addresses() {
        assert!(text("server s1 127.0.0.20:8080 check\nbind 127.0.0.1:8080").is_ok());
        let e = text("bind 127.0.0.1:8080\nserver s1 10.2.3.4:80").unwrap_err();
        assert_eq!(e.line, 2);
    }
}

#[cfg(test)]
mod library {
    use resolvelab_core::spec::engine::ProxyKind;

    /// Every configuration the library renders passes: the nginx body of every scenario and
    /// variant, and each other proxy's configuration where it plays the scenario.
    #[test]
    fn every_library_configuration_stays_on_loopback() {
        for sc in resolvelab_scenario::library::all().unwrap() {
            for v in crate::judge::expand_variants(&sc, None).unwrap() {
                crate::judge::check_targets(&v).unwrap_or_else(|e| panic!("{e:#}"));
                let net = resolvelab_scenario::net::Net::assign(&v, 255, 255).unwrap();
                for k in ProxyKind::ALL {
                    if let Ok(text) = resolvelab_thirdparty::lab::config(k, &v, &net) {
                        super::text(&text).unwrap_or_else(|r| panic!("{} on {k}: {r}", v.name));
                    }
                }
            }
        }
    }
}
