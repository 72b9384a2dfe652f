//! The third-party engines' side of a scenario: each proxy's configuration rendered from the
//! scenario's proxy-neutral upstream (`[nginx]`: the names and port, the resolver, retries,
//! timeouts, backup servers) with the proxy's own defaults where nginx's knobs have no
//! counterpart, and the proxy's own knobs from `[haproxy]`, `[envoy]` or `[caddy]`; what a
//! proxy cannot be asked to do the same way, refused on one line naming the field before
//! anything starts; and its logs turned into the run directory's evidence after the run.
//! What differs by proxy is asked of its folder ([`crate::proxy`]).
//!
//! ```
//! use resolvelab_thirdparty::{Kind, lab};
//! use resolvelab_scenario::{library, net::Net};
//! let sc = library::get("nxdomain").unwrap();
//! let net = Net::assign(&sc, 10, 1).unwrap();
//! let cfg = lab::config(Kind::Envoy, &sc, &net).unwrap();
//! assert!(cfg.contains("\"STRICT_DNS\""));
//! let e = lab::refuse(Kind::Caddy, &library::get("backup").unwrap()).unwrap_err();
//! assert!(e.to_string().contains("backup"));
//! ```

use crate::shared::unsupported;
use crate::{Kind, ProxyBinary, proxy};
use anyhow::{Context, Result};
use resolvelab_core::jsonl::Row;
use resolvelab_core::rundir::RunDir;
use resolvelab_core::spec::engine::EngineId;
use resolvelab_scenario::Scenario;
use resolvelab_scenario::format::Route;
use resolvelab_scenario::net::Net;

/// Refuse what `kind` cannot play as the scenario means it: nginx-only configuration (what
/// every third-party proxy lacks), then the proxy's own limits.
pub fn refuse(kind: Kind, sc: &Scenario) -> Result<()> {
    let n = &sc.nginx;
    let no = |field: &[&str], shown: &str, why: &str| Err(unsupported(kind, sc, field, shown, why));
    if sc.fleet.is_some() {
        return no(&["fleet"], "fleet", "a fleet plays nginx instances");
    }
    use resolvelab_scenario::format::NginxAction;
    let at_start = proxy(kind).resolves_at_start();
    for (i, e) in sc.timeline.iter().enumerate() {
        let (shown, why) = match e.nginx {
            Some(NginxAction::Test) => {
                ("nginx = \"test\"", "`nginx -t` tests nginx's configuration")
            }
            Some(NginxAction::Restart) if !at_start => (
                "nginx = \"restart\"",
                "the lab restarts only the proxies whose start resolves names (nginx, HAProxy)",
            ),
            Some(NginxAction::Start) if !at_start => (
                "nginx = \"start\"",
                "the lab starts again only the proxies whose start resolves names (nginx, HAProxy)",
            ),
            _ => continue,
        };
        return no(&["timeline", &i.to_string(), "nginx"], shown, why);
    }
    if let Some(i) = sc.backends.iter().position(|b| b.tls.is_some()) {
        return no(
            &["backend", &i.to_string(), "tls"],
            "backend.tls",
            "the lab renders TLS to the backends for nginx only",
        );
    }
    if n.inline.is_some() {
        return no(
            &["nginx", "inline"],
            "nginx.inline",
            "an inline nginx configuration has no rendering for another proxy",
        );
    }
    if n.route != Route::Upstream {
        return no(
            &["nginx", "route"],
            "nginx.route",
            "only the upstream route (servers resolved by a resolver) is rendered for another proxy",
        );
    }
    if n.retry_shim {
        return no(
            &["nginx", "retry_shim"],
            "nginx.retry_shim",
            "the error_page retry shim is nginx's",
        );
    }
    if n.zone_filler.is_some() {
        return no(
            &["nginx", "zone_filler"],
            "nginx.zone_filler",
            "only nginx has a shared upstream zone to fill",
        );
    }
    for (i, s) in n.servers.iter().enumerate() {
        if !s.resolve && !s.host.starts_with('@') && !at_start {
            return no(
                &["nginx", "server", &i.to_string()],
                &format!("nginx.server[{i}] {} with resolve = false", s.host),
                "the proxy would resolve it at start with the system resolver, outside the lab",
            );
        }
    }
    if !proxy(kind).reloads()
        && let Some(i) = sc.timeline.iter().position(|e| e.nginx.is_some())
    {
        return no(
            &["timeline", &i.to_string(), "nginx"],
            &format!("timeline[{i}] nginx reload"),
            "the lab reloads only nginx and HAProxy, by their own signals",
        );
    }
    proxy(kind).refuse(sc)
}

/// The proxy's whole configuration for a run.
pub fn config(kind: Kind, sc: &Scenario, net: &Net) -> Result<String> {
    refuse(kind, sc)?;
    proxy(kind).config(sc, net)
}

/// After the run: the proxy's logs → `access.log` in the lab format, and its timestamped
/// state lines (addresses changed, a server in maintenance, a lookup failed) into
/// `events.jsonl` in time order.
pub fn evidence(kind: Kind, dir: &RunDir) -> Result<()> {
    use resolvelab_core::evidence::{Event, event_kind, file};
    let got = proxy(kind).convert(dir, &dir.file(file::ACCESS_LOG))?;
    let path = dir.file(file::EVENTS);
    let file =
        std::fs::File::open(&path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut header = String::new();
    // The proxy's own events of an earlier conversion are replaced, not added to.
    let mut all: Vec<(i64, String)> = Vec::new();
    resolvelab_core::jsonl::for_each::<Event>(std::io::BufReader::new(file), |row| match row {
        Row::Header { line, .. } => header = line.to_string(),
        Row::Line { value, line, .. } => {
            let e = value.ok();
            let ours = e.as_ref().is_some_and(|e| {
                e.kind == event_kind::PROXY_STATE && e.target.as_deref() == Some(kind.id())
            });
            if !ours {
                all.push((e.map_or(0, |e| e.t_us), line.to_string()));
            }
        }
    })
    .with_context(|| format!("cannot read {}", path.display()))?;
    for (t_us, message) in got.states {
        let e = Event {
            note: Some(message),
            ..Event::new(t_us, event_kind::PROXY_STATE, kind.id())
        };
        all.push((t_us, serde_json::to_string(&e)?));
    }
    all.sort_by_key(|(t, _)| *t);
    let mut out = header;
    out.push('\n');
    for (_, l) in all {
        out.push_str(&l);
        out.push('\n');
    }
    resolvelab_core::rundir::write_atomic(&path, out.as_bytes())?;
    Ok(())
}

/// Derive a finished run's evidence again from its proxy's own log when `engine` is a
/// third-party proxy (nothing to do for nginx and the models).
pub fn rederive(dir: &std::path::Path, engine: &str) -> Result<()> {
    match engine.parse() {
        Ok(EngineId::Proxy(k)) if dir.join(k.log_file()).is_file() => {
            evidence(k, &RunDir::open(dir))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shared::merge;

    #[test]
    fn what_no_third_party_proxy_can_do_is_refused_at_its_line() {
        for kind in [Kind::Haproxy, Kind::Envoy, Kind::Caddy] {
            let sc = resolvelab_scenario::library::get("retry-shim").unwrap();
            let e = refuse(kind, &sc).unwrap_err().to_string();
            assert!(
                e.contains("retry_shim") && e.contains("--engine nginx"),
                "{e}"
            );
            assert!(e.contains(&format!("--engine {}", kind.id())), "{e}");
            assert!(
                e.contains("retry-shim.toml:"),
                "names the file and line: {e}"
            );
        }
    }

    #[test]
    fn a_name_resolved_at_start_and_a_restart_are_for_haproxy_only() {
        let sc = resolvelab_scenario::library::get("restart-nxdomain").unwrap();
        refuse(Kind::Haproxy, &sc).unwrap();
        let cfg = config(Kind::Haproxy, &sc, &Net::assign(&sc, 10, 1).unwrap()).unwrap();
        assert!(
            cfg.contains("    server s1 app.test.local:8080\n"),
            "resolved at start only, HAProxy's default init-addr: {cfg}"
        );
        for kind in [Kind::Envoy, Kind::Caddy] {
            let e = refuse(kind, &sc).unwrap_err().to_string();
            assert!(e.contains("nginx = \"restart\""), "{e}");
            let mut sc = sc.clone();
            sc.timeline.retain(|e| e.nginx.is_none());
            let e = refuse(kind, &sc).unwrap_err().to_string();
            assert!(e.contains("resolve = false"), "{e}");
        }
    }

    #[test]
    fn a_reload_is_refused_where_the_lab_cannot_reload() {
        let mut sc = resolvelab_scenario::library::get("swap-only").unwrap();
        sc.timeline.push(resolvelab_scenario::format::Event {
            at: Some("5s".parse().unwrap()),
            nginx: Some(resolvelab_scenario::format::NginxAction::Reload),
            ..Default::default()
        });
        refuse(Kind::Haproxy, &sc).unwrap();
        let e = refuse(Kind::Envoy, &sc).unwrap_err().to_string();
        assert!(e.contains("nginx reload"), "{e}");
    }

    #[test]
    fn an_nginx_test_is_nginx_only() {
        let mut sc = resolvelab_scenario::library::get("swap-only").unwrap();
        sc.timeline.push(resolvelab_scenario::format::Event {
            at: Some("5s".parse().unwrap()),
            nginx: Some(resolvelab_scenario::format::NginxAction::Test),
            ..Default::default()
        });
        for kind in [Kind::Haproxy, Kind::Envoy, Kind::Caddy] {
            let e = refuse(kind, &sc).unwrap_err().to_string();
            assert!(
                e.contains("nginx = \"test\"") && e.contains("nginx -t"),
                "{e}"
            );
        }
    }

    #[test]
    fn a_tls_backend_is_nginx_only() {
        let mut sc = resolvelab_scenario::library::get("swap-only").unwrap();
        sc.backends[0].tls = Some(Default::default());
        for kind in [Kind::Haproxy, Kind::Envoy, Kind::Caddy] {
            let e = refuse(kind, &sc).unwrap_err().to_string();
            assert!(e.contains("backend.tls") && e.contains("nginx only"), "{e}");
        }
    }

    #[test]
    fn a_merge_patch_replaces_leaves_and_merges_objects() {
        let mut t = serde_json::json!({"a": {"b": 1, "c": 2}, "d": [1]});
        merge(
            &mut t,
            &serde_json::json!({"a": {"b": 5, "e": 6}, "d": [2, 3]}),
        );
        assert_eq!(
            t,
            serde_json::json!({"a": {"b": 5, "c": 2, "e": 6}, "d": [2, 3]})
        );
    }
}
