//! The `haproxy` engine's `haproxy.cfg`, rendered from the scenario's upstream description
//! with HAProxy 2.6's own policy written out where nginx's knobs have no counterpart, and
//! `[haproxy]` lines for HAProxy's own knobs.
//!
//! ```
//! use resolvelab_thirdparty::haproxy::config::config;
//! use resolvelab_scenario::{library, net::Net};
//! let sc = library::get("nxdomain").unwrap();
//! let cfg = config(&sc, &Net::assign(&sc, 10, 1).unwrap()).unwrap();
//! assert!(cfg.contains("server s1 app.test.local:8080 resolvers lab init-addr none"));
//! assert!(cfg.contains("hold nx 30s"));
//! ```

use crate::shared::{retries, text_or};
use anyhow::Result;
use resolvelab_scenario::Scenario;
use resolvelab_scenario::net::Net;
use std::fmt::Write as _;

/// The whole `haproxy.cfg` of a run.
pub fn config(sc: &Scenario, net: &Net) -> Result<String> {
    let n = &sc.nginx;
    let h = &sc.haproxy;
    let mut w = String::new();
    writeln!(
        w,
        "# Rendered by resolvelab from scenario `{}`: HAProxy's own policy on the scenario's upstream.\n\
         # nginx's max_fails/fail_timeout, zone and keepalive have no counterpart here: HAProxy checks\n\
         # no server passively and reuses idle server connections by default (http-reuse safe).\n",
        sc.name
    )?;
    writeln!(
        w,
        "global\n    log stderr format iso local0\n    nbthread {}",
        n.workers.max(1)
    )?;
    if h.server_state {
        // Relative to the run directory (HAProxy's working directory; `unix@`: a path without
        // a leading `/` is read as an address otherwise); the lab writes `show
        // servers state` from the socket into the file before it replaces HAProxy.
        writeln!(
            w,
            "    stats socket unix@{} mode 600 level admin\n    server-state-file {}",
            super::state::SOCKET,
            super::state::FILE
        )?;
    }
    writeln!(w)?;
    // dontlognull: the runner's readiness probe (a bare TCP connect) is not a request.
    writeln!(
        w,
        "defaults\n    mode http\n    log global\n    option dontlognull"
    )?;
    writeln!(
        w,
        "    timeout connect {}",
        text_or(&n.connect_timeout, "5s")
    )?;
    writeln!(w, "    timeout client 60s")?;
    writeln!(w, "    timeout server {}", text_or(&n.read_timeout, "60s"))?;
    // HAProxy's own default is 3 retries (to the same server, unless `option redispatch`).
    writeln!(w, "    retries {}", retries(sc, 3))?;
    if h.server_state {
        writeln!(w, "    load-server-state-from-file global")?;
    }
    for l in &h.defaults {
        writeln!(w, "    {l}")?;
    }
    // HAProxy 2.6's defaults written out, so the run shows the policy it ran with; a
    // `[haproxy] resolvers` line given later overrides its default.
    writeln!(
        w,
        "\nresolvers lab\n    nameserver lab {}\n    resolve_retries 3\n    timeout resolve 1s\n    timeout retry 1s\n    \
         hold valid 10s\n    hold nx 30s\n    hold other 30s\n    hold refused 30s\n    hold timeout 30s\n    hold obsolete 0s",
        net.dns
    )?;
    for l in &h.resolvers {
        writeln!(w, "    {l}")?;
    }
    writeln!(
        w,
        "\nfrontend fe\n    bind {}\n    log-format \"{}\"\n    default_backend be\n",
        net.nginx,
        super::log::LOG_FORMAT
    )?;
    writeln!(w, "backend be\n    balance roundrobin")?;
    let prefer = if n.ipv6 { "" } else { " resolve-prefer ipv4" };
    // With `resolvers`, the runtime resolver finds the address: none at start unless the
    // scenario says otherwise. A name resolved at start only (`resolve = false`) has no
    // resolver and HAProxy's default `last,libc` (the lab's system resolver), unless told.
    let init = |dflt: &str| match &h.init_addr {
        Some(a) => format!(" init-addr {a}"),
        None => dflt.to_string(),
    };
    for (i, s) in n.servers.iter().enumerate() {
        let mut line = match (s.host.strip_prefix('@'), h.server_template) {
            (Some(name), _) => format!("    server s{} {}", i + 1, net.hosts[name]),
            (None, _) if !s.resolve => {
                format!("    server s{} {}:{}{}", i + 1, s.host, n.port, init(""))
            }
            // One server per address of the answer, up to `count` (servers s1-1 … s1-count).
            (None, Some(count)) => format!(
                "    server-template s{}- {count} {}:{} resolvers lab{}{prefer}",
                i + 1,
                s.host,
                n.port,
                init(" init-addr none")
            ),
            (None, None) => format!(
                "    server s{} {}:{} resolvers lab{}{prefer}",
                i + 1,
                s.host,
                n.port,
                init(" init-addr none")
            ),
        };
        if s.backup {
            line.push_str(" backup");
        }
        writeln!(w, "{line}")?;
    }
    for l in &h.backend {
        writeln!(w, "    {l}")?;
    }
    Ok(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_template_takes_every_address_of_the_answer() {
        let mut sc = resolvelab_scenario::library::get("zone-churn").unwrap();
        sc.haproxy.server_template = Some(25);
        let cfg = config(&sc, &Net::assign(&sc, 10, 1).unwrap()).unwrap();
        assert!(
            cfg.contains("    server-template s1- 25 app.test.local:8080 resolvers lab init-addr none resolve-prefer ipv4\n"),
            "{cfg}"
        );
        assert!(!cfg.contains("    server s1 "), "{cfg}");
    }

    #[test]
    fn a_kept_server_state_names_its_socket_and_file() {
        let mut sc = resolvelab_scenario::library::get("restart-nxdomain").unwrap();
        let plain = config(&sc, &Net::assign(&sc, 10, 1).unwrap()).unwrap();
        assert!(!plain.contains("server-state"), "{plain}");
        sc.haproxy.server_state = true;
        let cfg = config(&sc, &Net::assign(&sc, 10, 1).unwrap()).unwrap();
        assert!(
            cfg.contains("    stats socket unix@haproxy.sock mode 600 level admin\n    server-state-file haproxy.state\n"),
            "{cfg}"
        );
        assert!(
            cfg.contains("    load-server-state-from-file global\n"),
            "{cfg}"
        );
        // HAProxy's default init-addr (last,libc) reads the file first.
        assert!(cfg.contains("    server s1 app.test.local:8080\n"), "{cfg}");
    }

    #[test]
    fn retries_follow_the_scenario_and_knobs_are_appended() {
        let mut sc = resolvelab_scenario::library::get("swap-only").unwrap();
        sc.nginx.proxy_next_upstream = "off".parse().unwrap();
        sc.haproxy.resolvers.push("hold nx 5s".into());
        sc.haproxy.backend.push("option redispatch".into());
        let cfg = config(&sc, &Net::assign(&sc, 10, 1).unwrap()).unwrap();
        assert!(cfg.contains("    retries 0\n"), "{cfg}");
        let nx = cfg.find("hold nx 30s").unwrap();
        assert!(
            cfg[nx..].contains("hold nx 5s"),
            "the knob comes after the default"
        );
        assert!(cfg.contains("    option redispatch\n"));
        assert!(cfg.contains("bind 127.10.1.1:8080"));
    }
}
