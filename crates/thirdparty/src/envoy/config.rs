//! The `envoy` engine's `envoy.json`: one listener, a route with a retry policy from nginx's
//! `proxy_next_upstream`, and cluster `be` of type STRICT_DNS resolving through the run's
//! authority (c-ares, no search domains) with Envoy 1.40's DNS defaults written out: a re-query
//! every `dns_refresh_rate` (5 s) whatever the TTL, every address of an answer a host. Backup
//! servers are priority 1. Envoy checks no host passively unless `outlier_detection` is set
//! (`[envoy] cluster = { … }`), and pools upstream connections whatever nginx's `keepalive`.
//!
//! ```
//! use resolvelab_thirdparty::envoy::config::config;
//! use resolvelab_scenario::{library, net::Net};
//! let sc = library::get("swap-only").unwrap();
//! let cfg = config(&sc, &Net::assign(&sc, 10, 1).unwrap()).unwrap();
//! let v: serde_json::Value = serde_json::from_str(&cfg).unwrap();
//! assert_eq!(v["static_resources"]["clusters"][0]["dns_refresh_rate"], "5s");
//! ```

use crate::shared::{knobs, merge, retries, text_or};
use anyhow::Result;
use resolvelab_core::spec::nginx::NextUpstream;
use resolvelab_scenario::Scenario;
use resolvelab_scenario::net::Net;
use serde_json::{Value, json};

/// Envoy's access log in the run directory (relative: Envoy runs there).
pub const ACCESS_LOG: &str = "envoy-access.log";

/// Which Envoy `retry_on` conditions stand for nginx's `proxy_next_upstream` tokens: `error`
/// (a connection refused or reset before a response) and the statuses nginx may retry.
fn retry_on(next_upstream: &NextUpstream) -> String {
    let mut on: Vec<&str> = Vec::new();
    let mut add = |a: &[&'static str]| {
        for a in a {
            if !on.contains(a) {
                on.push(a);
            }
        }
    };
    if next_upstream.error {
        add(&["connect-failure", "refused-stream", "reset"]);
    }
    for code in &next_upstream.statuses {
        match code {
            502..=504 => add(&["gateway-error"]),
            500 => add(&["5xx"]),
            _ => {}
        }
    }
    on.join(",")
}

fn route(sc: &Scenario) -> Value {
    let n = &sc.nginx;
    let mut r = json!({
        "cluster": "be",
        // nginx's proxy_read_timeout (60 s); Envoy's own default would cut requests at 15 s.
        "timeout": text_or(&n.read_timeout, "60s"),
    });
    let on = retry_on(&n.proxy_next_upstream);
    // Envoy's default once a retry policy exists is one retry; nginx's, every peer once.
    let retries = retries(sc, 1);
    if retries > 0 && !on.is_empty() {
        r["retry_policy"] = json!({
            "retry_on": on,
            "num_retries": retries,
            // Like nginx, a retry goes to another host when there is one.
            "retry_host_predicate": [{
                "name": "envoy.retry_host_predicates.previous_hosts",
                "typed_config": {
                    "@type": "type.googleapis.com/envoy.extensions.retry.host.previous_hosts.v3.PreviousHostsPredicate"
                }
            }],
            "host_selection_retry_max_attempts": 3
        });
    }
    merge(&mut r, &knobs(&sc.envoy.route));
    r
}

fn endpoints(sc: &Scenario, net: &Net) -> Value {
    let n = &sc.nginx;
    let endpoint = |host: &str| -> Value {
        let (address, port) = match host.strip_prefix('@') {
            Some(name) => (net.hosts[name].ip().to_string(), net.hosts[name].port()),
            None => (host.to_string(), n.port),
        };
        json!({"endpoint": {"address": {"socket_address": {"address": address, "port_value": port}}}})
    };
    let tier = |backup: bool| -> Vec<Value> {
        n.servers
            .iter()
            .filter(|s| s.backup == backup)
            .map(|s| endpoint(&s.host))
            .collect()
    };
    let mut groups = vec![json!({"priority": 0, "lb_endpoints": tier(false)})];
    let backups = tier(true);
    if !backups.is_empty() {
        groups.push(json!({"priority": 1, "lb_endpoints": backups}));
    }
    Value::Array(groups)
}

fn cluster(sc: &Scenario, net: &Net) -> Value {
    let n = &sc.nginx;
    let mut c = json!({
        "name": "be",
        "type": "STRICT_DNS",
        "connect_timeout": text_or(&n.connect_timeout, "5s"),
        "lb_policy": "ROUND_ROBIN",
        "dns_lookup_family": if n.ipv6 { "AUTO" } else { "V4_ONLY" },
        "dns_refresh_rate": "5s",
        "respect_dns_ttl": false,
        "typed_dns_resolver_config": {
            "name": "envoy.network.dns_resolver.cares",
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.network.dns_resolver.cares.v3.CaresDnsResolverConfig",
                "resolvers": [{"socket_address": {
                    "address": net.dns.ip().to_string(), "port_value": net.dns.port()
                }}],
                "use_resolvers_as_fallback": false,
                "dns_resolver_options": {"no_default_search_domain": true}
            }
        },
        "load_assignment": {"cluster_name": "be", "endpoints": endpoints(sc, net)}
    });
    merge(&mut c, &knobs(&sc.envoy.cluster));
    c
}

/// The whole `envoy.json` of a run.
pub fn config(sc: &Scenario, net: &Net) -> Result<String> {
    let format = format!("{}\n", super::log::LOG_FORMAT);
    let hcm = json!({
        "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
        "stat_prefix": "fe",
        "access_log": [{
            "name": "envoy.access_loggers.file",
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog",
                "path": ACCESS_LOG,
                "log_format": {"text_format_source": {"inline_string": format}}
            }
        }],
        "route_config": {"virtual_hosts": [{
            "name": "all", "domains": ["*"],
            "routes": [{"match": {"prefix": "/"}, "route": route(sc)}]
        }]},
        "http_filters": [{
            "name": "envoy.filters.http.router",
            "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}
        }]
    });
    let mut doc = json!({
        "static_resources": {
            "listeners": [{
                "name": "fe",
                "address": {"socket_address": {
                    "address": net.nginx.ip().to_string(), "port_value": net.nginx.port()
                }},
                "filter_chains": [{"filters": [{
                    "name": "envoy.filters.network.http_connection_manager",
                    "typed_config": hcm
                }]}]
            }],
            "clusters": [cluster(sc, net)]
        }
    });
    merge(&mut doc, &knobs(&sc.envoy.bootstrap));
    let mut text = serde_json::to_string_pretty(&doc)?;
    text.push('\n');
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rendered(sc: &Scenario) -> Value {
        let cfg = config(sc, &Net::assign(sc, 10, 1).unwrap()).unwrap();
        serde_json::from_str(&cfg).unwrap()
    }

    #[test]
    fn retries_follow_proxy_next_upstream() {
        let mut sc = resolvelab_scenario::library::get("swap-only").unwrap();
        let v = rendered(&sc);
        let r = &v["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
            ["route_config"]["virtual_hosts"][0]["routes"][0]["route"];
        assert_eq!(
            r["retry_policy"]["retry_on"],
            "connect-failure,refused-stream,reset"
        );
        assert_eq!(r["retry_policy"]["num_retries"], 1);
        sc.nginx.proxy_next_upstream = "off".parse().unwrap();
        let v = rendered(&sc);
        let r = &v["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
            ["route_config"]["virtual_hosts"][0]["routes"][0]["route"];
        assert!(r.get("retry_policy").is_none(), "{r}");
    }

    #[test]
    fn knobs_merge_into_the_cluster_and_backups_are_priority_one() {
        let mut sc = resolvelab_scenario::library::get("backup").unwrap();
        sc.envoy.cluster =
            toml::from_str("type = \"LOGICAL_DNS\"\ndns_refresh_rate = \"1s\"").unwrap();
        let v = rendered(&sc);
        let c = &v["static_resources"]["clusters"][0];
        assert_eq!(c["type"], "LOGICAL_DNS");
        assert_eq!(c["dns_refresh_rate"], "1s");
        assert_eq!(c["respect_dns_ttl"], false, "the rest of the defaults stay");
        let eps = c["load_assignment"]["endpoints"].as_array().unwrap();
        assert_eq!(eps.len(), 2);
        assert_eq!(eps[1]["priority"], 1);
    }
}
