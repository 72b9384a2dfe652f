//! The `caddy` engine's `caddy.json`: one server whose only route is a `reverse_proxy` with
//! dynamic `a` upstreams (every resolved server line a source; several under `multi`) looked
//! up through the run's authority, with Caddy 2.11's defaults written out: an answer cached
//! for `refresh` (1 min) whatever its TTL and looked up again *inside a request* once older,
//! random selection, retries from nginx's `proxy_next_upstream`. Caddy logs every request
//! (JSON, with the upstream it used and its retries, appended by `log_append`) and its lookups
//! to its stderr, the run's `caddy.log`; its admin endpoint is off and its state stays in the
//! run directory.
//!
//! ```
//! use resolvelab_thirdparty::caddy::config::config;
//! use resolvelab_scenario::{library, net::Net};
//! let sc = library::get("swap-only").unwrap();
//! let cfg = config(&sc, &Net::assign(&sc, 10, 1).unwrap()).unwrap();
//! assert!(cfg.contains("\"refresh\": \"1m\""));
//! ```

use crate::Kind;
use crate::shared::{knobs, merge, retries, text_or, unsupported};
use anyhow::Result;
use resolvelab_scenario::Scenario;
use resolvelab_scenario::net::Net;
use serde_json::{Value, json};

/// Caddy has no backup tier, and its static upstreams serve only when the dynamic lookup fails:
/// backup lines and a mix of names and fixed addresses have no faithful rendering.
pub(crate) fn refuse(sc: &Scenario) -> Result<()> {
    let servers = &sc.nginx.servers;
    if let Some(i) = servers.iter().position(|s| s.backup) {
        return Err(unsupported(
            Kind::Caddy,
            sc,
            &["nginx", "server", &i.to_string(), "backup"],
            &format!("nginx.server[{i}] backup"),
            "Caddy has no backup servers",
        ));
    }
    let fixed = servers.iter().position(|s| s.host.starts_with('@'));
    let named = servers.iter().any(|s| !s.host.starts_with('@'));
    if let (Some(i), true) = (fixed, named) {
        return Err(unsupported(
            Kind::Caddy,
            sc,
            &["nginx", "server", &i.to_string()],
            &format!(
                "nginx.server[{i}] {} beside resolved names",
                servers[i].host
            ),
            "Caddy uses its static upstreams only when every dynamic lookup fails",
        ));
    }
    Ok(())
}

fn source(sc: &Scenario, net: &Net, name: &str) -> Value {
    let n = &sc.nginx;
    let mut s = json!({
        "source": "a",
        "name": name,
        "port": n.port.to_string(),
        "refresh": "1m",
        "resolver": {"addresses": [net.dns.to_string()]},
    });
    if !n.ipv6 {
        s["versions"] = json!({"ipv4": true});
    }
    merge(&mut s, &knobs(&sc.caddy.upstreams));
    s
}

fn handler(sc: &Scenario, net: &Net) -> Value {
    let n = &sc.nginx;
    let mut h = json!({
        "handler": "reverse_proxy",
        "load_balancing": {
            "selection_policy": {"policy": "random"},
            // Caddy's own default is no retry; nginx's, every peer once.
            "retries": retries(sc, 1),
        },
        "transport": {
            "protocol": "http",
            "dial_timeout": text_or(&n.connect_timeout, "5s"),
        },
    });
    if let Some(t) = &n.read_timeout {
        h["transport"]["response_header_timeout"] = json!(t);
    }
    let names: Vec<Value> = n
        .servers
        .iter()
        .filter(|s| !s.host.starts_with('@'))
        .map(|s| source(sc, net, &s.host))
        .collect();
    match names.len() {
        0 => {
            let fixed: Vec<Value> = n
                .servers
                .iter()
                .filter_map(|s| s.host.strip_prefix('@'))
                .map(|b| json!({"dial": net.hosts[b].to_string()}))
                .collect();
            h["upstreams"] = Value::Array(fixed);
        }
        1 => h["dynamic_upstreams"] = names[0].clone(),
        _ => h["dynamic_upstreams"] = json!({"source": "multi", "sources": names}),
    }
    if !names.is_empty() && !sc.caddy.fallback.is_empty() {
        // Checked at load: each names a backend or proxy of the run.
        let fixed: Vec<Value> = sc
            .caddy
            .fallback
            .iter()
            .filter_map(|f| net.hosts.get(f.trim_start_matches('@')))
            .map(|a| json!({"dial": a.to_string()}))
            .collect();
        h["upstreams"] = Value::Array(fixed);
    }
    merge(&mut h, &knobs(&sc.caddy.handler));
    h
}

/// The whole `caddy.json` of a run.
pub fn config(sc: &Scenario, net: &Net) -> Result<String> {
    let stderr = |level: &str| json!({"writer": {"output": "stderr"}, "encoder": {"format": "json"}, "level": level});
    let mut default_log = stderr("INFO");
    // The lookups log at debug; Caddy 2.11 matches this logger by its whole name only.
    let source_logger = "http.reverse_proxy.upstreams.a";
    default_log["exclude"] = json!([source_logger]);
    let mut lookups = stderr("DEBUG");
    lookups["include"] = json!([source_logger]);
    let append =
        |key: &str, value: &str| json!({"handler": "log_append", "key": key, "value": value});
    let doc = json!({
        "admin": {"disabled": true, "config": {"persist": false}},
        "storage": {"module": "file_system", "root": "caddy-home"},
        "logging": {"logs": {"default": default_log, "lookups": lookups}},
        "apps": {"http": {"servers": {"fe": {
            "listen": [net.nginx.to_string()],
            "automatic_https": {"disable": true},
            "logs": {},
            "routes": [{"handle": [
                append("upstream", "{http.reverse_proxy.upstream.hostport}"),
                append("retries", "{http.reverse_proxy.retries}"),
                handler(sc, net),
            ]}]
        }}}}
    });
    let mut text = serde_json::to_string_pretty(&doc)?;
    text.push('\n');
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_become_dynamic_sources_and_knobs_merge() {
        let mut sc = resolvelab_scenario::library::get("swap-only").unwrap();
        sc.caddy.upstreams = toml::from_str("refresh = \"5s\"").unwrap();
        sc.nginx.proxy_next_upstream = "off".parse().unwrap();
        let cfg = config(&sc, &Net::assign(&sc, 10, 1).unwrap()).unwrap();
        let v: Value = serde_json::from_str(&cfg).unwrap();
        let h = &v["apps"]["http"]["servers"]["fe"]["routes"][0]["handle"][2];
        assert_eq!(h["dynamic_upstreams"]["refresh"], "5s");
        assert_eq!(
            h["dynamic_upstreams"]["resolver"]["addresses"][0],
            "127.10.1.53:5353"
        );
        assert_eq!(h["load_balancing"]["retries"], 0);
    }

    #[test]
    fn a_fallback_is_a_static_list_beside_the_dynamic_source() {
        let mut sc = resolvelab_scenario::library::get("nxdomain").unwrap();
        let net = Net::assign(&sc, 10, 1).unwrap();
        let handler = |sc: &Scenario| {
            let v: Value = serde_json::from_str(&config(sc, &net).unwrap()).unwrap();
            v["apps"]["http"]["servers"]["fe"]["routes"][0]["handle"][2].clone()
        };
        assert!(handler(&sc).get("upstreams").is_none(), "none by default");
        sc.caddy.fallback = vec!["@b1".into()];
        let h = handler(&sc);
        assert_eq!(h["dynamic_upstreams"]["name"], "app.test.local");
        assert_eq!(h["upstreams"][0]["dial"], net.hosts["b1"].to_string());
        assert_eq!(h["upstreams"].as_array().unwrap().len(), 1);
    }

    #[test]
    fn a_mix_of_names_and_fixed_addresses_is_refused() {
        let sc = resolvelab_scenario::library::get("swap-only").unwrap();
        refuse(&sc).unwrap();
        let mut sc2 = sc.clone();
        sc2.nginx
            .servers
            .push(resolvelab_scenario::format::ServerLine {
                host: "@b1".into(),
                ..sc.nginx.servers[0].clone()
            });
        let e = refuse(&sc2).unwrap_err().to_string();
        assert!(e.contains("beside resolved names"), "{e}");
    }
}
