//! What the three renderers share: refusing a scenario field on one line, nginx's values
//! carried over (`retries`, times), and a proxy's own knobs merged into the rendered
//! configuration. The renderers import it; it imports none of them.

use crate::Kind;
use anyhow::anyhow;
use resolvelab_core::spec::nginx::NginxTime;
use resolvelab_scenario::Scenario;

/// The error for what `kind` cannot play, at the field's `file:line`.
pub(crate) fn unsupported(
    kind: Kind,
    sc: &Scenario,
    field: &[&str],
    shown: &str,
    why: &str,
) -> anyhow::Error {
    anyhow!(
        "{}: scenario `{}`: {shown} cannot run on --engine {} ({why}); run it with --engine nginx",
        sc.at(field),
        sc.name,
        kind.id()
    )
}

/// An `[nginx]` time written into another proxy's configuration as the scenario spelled it,
/// else that proxy's stand-in for nginx's default.
pub(crate) fn text_or(t: &Option<NginxTime>, default: &str) -> String {
    t.as_ref().map_or(default.to_string(), ToString::to_string)
}

/// How many times a failed try is tried again: none for `proxy_next_upstream off`, N − 1 for
/// `proxy_next_upstream_tries N`, else `default` (nginx's own default, every peer once, has no
/// counterpart where the number of addresses is not known at render time).
pub fn retries(sc: &Scenario, default: u32) -> u32 {
    let n = &sc.nginx;
    if n.proxy_next_upstream.is_off() {
        0
    } else if n.proxy_next_upstream_tries > 0 {
        n.proxy_next_upstream_tries - 1
    } else {
        default
    }
}

/// RFC 7386 JSON merge patch: `patch`'s objects merged into `target`'s, its other values
/// replacing them. The proxies' JSON knobs are applied this way.
pub(crate) fn merge(target: &mut serde_json::Value, patch: &serde_json::Value) {
    match (target, patch) {
        (serde_json::Value::Object(t), serde_json::Value::Object(p)) => {
            for (k, v) in p {
                merge(t.entry(k.clone()).or_insert(serde_json::Value::Null), v);
            }
        }
        (t, p) => *t = p.clone(),
    }
}

/// A TOML table of knobs as JSON.
pub(crate) fn knobs(t: &toml::Table) -> serde_json::Value {
    serde_json::to_value(t).unwrap_or_default()
}
