//! Addresses of a run and the nginx configuration rendered from a scenario.
//!
//! Every run gets its own loopback /24 (`127.A.B.0/24`), so several runs (or tests) can run at
//! once without port collisions: nginx listens on `.1`, the DNS authority on `.53`, backends on
//! `.20`, `.30`, … (or the `host` the scenario gives).

use anyhow::Result;
use resolvelab_core::version::{KEEPALIVE_DEFAULT_SINCE, Version};
use resolvelab_scenario::format::{Route, Scenario};
use resolvelab_scenario::net::Net;
use std::fmt::Write as _;

/// The `http {}` body for a scenario: resolver, upstream `be`, the method map, the server with
/// its proxy settings and the optional retry shim.
pub fn http_body(sc: &Scenario, net: &Net) -> Result<String> {
    http_body_for(sc, net, None)
}

/// [`http_body`] for a given nginx version: where a default differs between versions, the
/// configuration says the scenario's value explicitly, so that the version's default never
/// leaks in unnoticed — `keepalive = 0` renders `keepalive 0;` from 1.29.7 on (which keeps 32
/// idle connections by default; older versions refuse `0` and keep none without the line).
pub fn http_body_for(sc: &Scenario, net: &Net, version: Option<Version>) -> Result<String> {
    let body = render_body(sc, net, version)?;
    // Nothing the body names may reach the network (an inline body is the author's text).
    // Names resolved at start go to the run's authority only when the lab points nginx's
    // system resolver at it.
    let names: Vec<String> = if sc.resolves_at_start() {
        sc.dns.names.keys().cloned().collect()
    } else {
        Vec::new()
    };
    crate::targets::nginx(&body, &names).map_err(|r| match &sc.nginx.inline {
        Some(_) => anyhow::anyhow!("{}: [nginx] inline, {r}", sc.at(&["nginx", "inline"])),
        None => anyhow::anyhow!("{}: the rendered nginx configuration, {r}", sc.name),
    })?;
    Ok(body)
}

/// The run's certificate authority (PEM), beside nginx.conf in the run directory when a backend
/// speaks TLS: `{tls_ca}` in an inline body. nginx reads a relative certificate path from its
/// configuration's directory, which is that directory.
pub const TLS_CA_FILE: &str = "tls-ca.pem";

/// The body, before it is checked.
fn render_body(sc: &Scenario, net: &Net, version: Option<Version>) -> Result<String> {
    let n = &sc.nginx;
    let resolver = format!(
        "resolver {} valid={}{};",
        net.dns,
        n.valid,
        if n.ipv6 { "" } else { " ipv6=off" }
    );
    if let Some(inline) = &n.inline {
        let mut t = inline
            .replace("{resolver}", &resolver)
            .replace("{dns}", &net.dns.to_string())
            .replace("{listen}", &net.nginx.to_string())
            .replace("{port}", &n.port.to_string())
            .replace("{zone}", &n.zone)
            .replace("{tls_ca}", TLS_CA_FILE);
        for (name, addr) in &net.hosts {
            t = t.replace(&format!("{{backend:{name}}}"), &addr.to_string());
        }
        return Ok(t);
    }
    let mut b = String::new();
    let w = &mut b;
    if n.route == Route::Upstream {
        upstream_block(w, sc, net, &resolver, version)?;
    }
    server_block(w, sc, net, &resolver)?;
    Ok(b)
}

/// `upstream be {…}` (and the zone filler's).
fn upstream_block(
    w: &mut String,
    sc: &Scenario,
    net: &Net,
    resolver: &str,
    version: Option<Version>,
) -> Result<()> {
    let n = &sc.nginx;
    writeln!(w, "upstream be {{")?;
    writeln!(w, "    zone be {};", n.zone)?;
    // `resolver` in an upstream block came with `resolve` (1.27.3): older releases refuse it
    // there, and their upstreams resolve nothing while running (the engine refuses `resolve`).
    if n.resolver && version.is_none_or(|v| v.has_resolve()) {
        writeln!(w, "    {resolver}")?;
        if let Some(t) = &n.resolver_timeout {
            writeln!(w, "    resolver_timeout {t};")?;
        }
    }
    for s in &n.servers {
        let u = net.upstream_server(sc, s)?;
        writeln!(w, "    server {}:{}{};", u.host, u.port, u.params)?;
    }
    if n.keepalive_default {
        // The version's own default, unsaid.
    } else if n.keepalive > 0 {
        writeln!(w, "    keepalive {};", n.keepalive)?;
        if let Some(t) = &n.keepalive_timeout {
            writeln!(w, "    keepalive_timeout {t};")?;
        }
    } else if version.is_some_and(|v| v >= KEEPALIVE_DEFAULT_SINCE) {
        writeln!(w, "    keepalive 0;")?;
    }
    writeln!(w, "}}\n")?;
    if let Some(f) = &n.zone_filler {
        // Upstream groups may share a zone (the size is given once): the filler's peers live in
        // `be`'s slab.
        writeln!(
            w,
            "upstream filler {{\n    zone be;\n    {resolver}\n    server {f}:{} resolve max_fails=0;\n}}\n",
            n.port
        )?;
    }
    Ok(())
}

/// The method map and `server {…}`: `location /` reaches the backend by the scenario's route.
fn server_block(w: &mut String, sc: &Scenario, net: &Net, resolver: &str) -> Result<()> {
    let n = &sc.nginx;
    writeln!(
        w,
        "# Only idempotent methods may be retried by the shim.\n\
         map $request_method $retry_allowed {{\n    default 0;\n    GET 1;\n    HEAD 1;\n    OPTIONS 1;\n}}\n"
    )?;
    let host = n.servers.first().map_or("", |s| s.host.as_str());
    let proxy_common = {
        let mut p = match n.route {
            Route::Upstream => "proxy_pass http://be;\n".to_string(),
            Route::Direct => format!("proxy_pass http://{host}:{};\n", n.port),
            Route::Variable => format!(
                "set $backend {host};\nproxy_pass http://$backend:{};\n",
                n.port
            ),
        };
        p.push_str("proxy_http_version 1.1;\n");
        p.push_str("proxy_set_header Connection \"\";\n");
        writeln!(p, "proxy_next_upstream {};", n.proxy_next_upstream)?;
        if n.proxy_next_upstream_tries > 0 {
            writeln!(
                p,
                "proxy_next_upstream_tries {};",
                n.proxy_next_upstream_tries
            )?;
        }
        if let Some(t) = &n.connect_timeout {
            writeln!(p, "proxy_connect_timeout {t};")?;
        }
        if let Some(t) = &n.read_timeout {
            writeln!(p, "proxy_read_timeout {t};")?;
        }
        p
    };
    let indent =
        |s: &str, by: &str| -> String { s.lines().map(|l| format!("{by}{l}\n")).collect() };
    writeln!(w, "server {{")?;
    writeln!(w, "    listen {};", net.nginx)?;
    writeln!(w, "    keepalive_requests 100000;")?;
    if n.route == Route::Variable && n.resolver {
        writeln!(w, "    {resolver}")?;
        if let Some(t) = &n.resolver_timeout {
            writeln!(w, "    resolver_timeout {t};")?;
        }
    }
    if n.recursive_error_pages {
        writeln!(w, "    recursive_error_pages on;")?;
    }
    writeln!(w, "    location / {{")?;
    w.push_str(&indent(&proxy_common, "        "));
    if n.retry_shim {
        writeln!(w, "        error_page 502 = @retry_once;")?;
    }
    writeln!(w, "    }}")?;
    if n.retry_shim {
        writeln!(w, "    location @retry_once {{")?;
        if n.method_guard {
            writeln!(
                w,
                "        if ($retry_allowed = 0) {{\n            return 502;\n        }}"
            )?;
        }
        w.push_str(&indent(&proxy_common, "        "));
        writeln!(w, "    }}")?;
    }
    writeln!(w, "}}")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sc(extra_nginx: &str) -> Scenario {
        let text = format!(
            r#"
version = 1
name = "t"
description = "d"
question = "q"
[nginx]
valid = "1s"
{extra_nginx}
[[nginx.server]]
host = "app.test.local"
[[nginx.server]]
host = "@b3"
backup = true
max_fails = 0
[dns.names]
"app.test.local" = "alternate:@b1,@b2"
[[backend]]
name = "b1"
[[backend]]
name = "b2"
[[backend]]
name = "b3"
host = 99
[load]
rate = "300"
duration = "60s"
"#
        );
        Scenario::from_toml(&text, "t").unwrap()
    }

    /// A `resolver` in an upstream block came with `resolve` in 1.27.3: 1.22's `nginx -t` says
    /// `"resolver" directive is not allowed here` (Debian's binary, by hand), so older releases
    /// get none there.
    #[test]
    fn no_upstream_resolver_before_1_27_3() {
        let s = sc("");
        let net = Net::assign(&s, 10, 2).unwrap();
        let v = |t: &str| Version::parse(t);
        for (version, there) in [(None, true), (v("1.22.1"), false), (v("1.27.3"), true)] {
            let b = http_body_for(&s, &net, version).unwrap();
            let upstream = &b[..b.find("}\n").unwrap()];
            assert_eq!(upstream.contains("resolver "), there, "{version:?}: {b}");
        }
    }

    /// `keepalive = 0` means no upstream keep-alive on every version: nothing on 1.28 (which
    /// refuses `keepalive 0` and keeps none without the line), `keepalive 0;` from 1.29.7 on
    /// (which keeps 32 without it) — checked against both binaries' `nginx -t` by hand
    /// (issue #46: the 1.31 column's "stale-address" gap was the default leaking in).
    #[test]
    fn no_keepalive_is_said_explicitly_where_the_version_defaults_to_it() {
        let s = sc("keepalive = 0");
        let net = Net::assign(&s, 10, 2).unwrap();
        let v = |t: &str| Version::parse(t);
        for (version, explicit) in [
            (None, false),
            (v("1.28.3"), false),
            (v("1.29.6"), false),
            (v("1.29.7"), true),
            (v("1.31.3"), true),
        ] {
            let b = http_body_for(&s, &net, version).unwrap();
            assert_eq!(b.contains("keepalive 0;"), explicit, "{version:?}: {b}");
            assert!(!b.contains("keepalive 16;"), "{b}");
        }
        // `keepalive_default`: no line, whatever the version (its own default applies).
        let s = sc("keepalive_default = true");
        for version in [v("1.28.3"), v("1.31.3")] {
            let b = http_body_for(&s, &net, version).unwrap();
            assert!(!b.contains("keepalive "), "{b}");
        }
        // A scenario's own keepalive is written on every version.
        let s = sc("keepalive = 8");
        let b = http_body_for(&s, &net, v("1.31.3")).unwrap();
        assert!(
            b.contains("keepalive 8;") && !b.contains("keepalive 0;"),
            "{b}"
        );
    }

    #[test]
    fn renders_the_template() {
        let s = sc("retry_shim = true\nmax_fails = 0");
        let net = Net::assign(&s, 10, 2).unwrap();
        let b = http_body(&s, &net).unwrap();
        assert!(
            b.contains("resolver 127.10.2.53:5353 valid=1s ipv6=off;"),
            "{b}"
        );
        assert!(
            b.contains("server app.test.local:8080 resolve max_fails=0;"),
            "{b}"
        );
        assert!(
            b.contains("server 127.10.2.99:8080 max_fails=0 backup;"),
            "{b}"
        );
        assert!(b.contains("error_page 502 = @retry_once;"));
        assert!(b.contains("if ($retry_allowed = 0)"));
        assert!(b.contains("listen 127.10.2.1:8080;"));
        let plain = http_body(&sc(""), &net).unwrap();
        assert!(!plain.contains("@retry_once"));
        assert!(plain.contains("server app.test.local:8080 resolve;"));
    }
}
