//! What the inputs can show — computed once, printed at the top of every report, and handed to
//! the classifier so that no class is given on the absence of its evidence.

use crate::verdict::PairingLoss;
use resolvelab_core::version::{RESOLVE_SINCE, Version};
pub use resolvelab_lint::RuntimeFacts;
use serde::{Deserialize, Serialize};

/// Where the peer-list changes come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SwapSource {
    /// A DNS answer history (`--dns`): exact.
    Dns,
    /// Inferred from the addresses in `$upstream_addr` changing over time.
    Inferred,
    /// None seen: either nothing changed or nothing could show it.
    None,
}

impl SwapSource {
    /// The id used in JSON (`swap_source`).
    pub fn id(self) -> &'static str {
        match self {
            SwapSource::Dns => "dns",
            SwapSource::Inferred => "inferred",
            SwapSource::None => "none",
        }
    }
}

/// Can this nginx and configuration show a generation race at all?
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Race {
    /// A `resolve` server on an nginx ≥ 1.27.3.
    Possible,
    /// nginx < 1.27.3 (no generation check), or a configuration without `resolve` (nothing
    /// changes a peer list at run time), or a Lua balancer (ingress-nginx).
    RuledOut,
    /// Neither the version nor the configuration is known.
    Unknown,
}

/// One thing the logs cannot show, why it matters, and what to add.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Missing {
    /// What is missing (`$upstream_addr`, a DNS answer history, …).
    pub what: String,
    /// What it would decide.
    pub decides: String,
    /// How to get it.
    pub add: String,
}

/// What these inputs can show (`evidence` in the diagnosis JSON).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Observability {
    /// What the log format and the other inputs hold.
    #[serde(flatten)]
    pub inputs: Present,
    /// Where peer-list changes come from: `dns`, `inferred` or `none`.
    pub peer_changes: String,
    /// The configuration, if read.
    pub config: Option<RuntimeFacts>,
    /// The nginx version, if known.
    pub nginx_version: Option<String>,
    /// `possible`, `ruled-out` or `unknown`.
    pub race: String,
    /// Why the race is possible, ruled out or unknown.
    pub race_why: String,
    /// What is missing, with what it would decide.
    pub missing: Vec<Missing>,
}

/// What the log format and the other inputs hold.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Present {
    /// An access log was given (else failures come from the error log alone).
    pub access_log: bool,
    /// `$upstream_addr` is logged: trajectories (1-hop / 2-hop), inferred swaps.
    pub upstream_addr: bool,
    /// `$connection` is logged: error lines pair with requests by `*cid`.
    pub connection: bool,
    /// `$msec` is logged: millisecond times (else whole seconds).
    pub msec: bool,
    /// `$request_time` is logged: request start times.
    pub request_time: bool,
    /// `$proxy_upstream_name` is logged (ingress-nginx): the group of every request.
    pub upstream_name: bool,
    /// Error logs were given.
    pub error_log: bool,
    /// A DNS answer history was given.
    pub dns_log: bool,
}

/// Whether a race is possible, and why.
pub fn race(version: Option<Version>, config: Option<&RuntimeFacts>) -> (Race, String) {
    if let Some(v) = version
        && !v.has_resolve()
    {
        return (
            Race::RuledOut,
            format!(
                "nginx {v} is older than {RESOLVE_SINCE}: it has no `resolve` and no generation check"
            ),
        );
    }
    match config {
        Some(c) if c.lua_balancer => (
            Race::RuledOut,
            format!(
                "{}: a Lua balancer (ingress-nginx) picks the peers; nginx's resolve/generation classes do not apply",
                c.source
            ),
        ),
        Some(c) if !c.resolve => (
            Race::RuledOut,
            format!(
                "{}: no `server … resolve`, so nothing changes a peer list at run time",
                c.source
            ),
        ),
        Some(c) => match version {
            Some(v) => (
                Race::Possible,
                format!("nginx {v} with `server … resolve` in {}", c.source),
            ),
            None => (
                Race::Possible,
                format!("`server … resolve` in {} (version not given)", c.source),
            ),
        },
        None => (
            Race::Unknown,
            match version {
                Some(v) => format!(
                    "nginx {v} can race, but without the config it is unknown whether anything uses `resolve`"
                ),
                None => "neither the configuration nor the nginx version was given".to_string(),
            },
        ),
    }
}

/// What a [`PairingLoss`] leaves undecided (listed with the inputs' missing evidence: the
/// lines were read, but not all could be held for pairing).
pub fn pairing_missing(l: &PairingLoss) -> Missing {
    let at = |t: i64| resolvelab_core::time::rfc3339(t * 1000);
    let span = l.span_ms.map_or(String::new(), |(a, b)| {
        format!(" from {} to {}", at(a), at(b))
    });
    Missing {
        what: format!(
            "error-log lines dropped unpaired from a full pairing window (more than {} lines within one request's span): {} lines{span}; {} failures whose span held a dropped line found no error line",
            crate::checker::MAX_BUFFERED,
            l.lines,
            l.unpaired
        ),
        decides: match l.unpaired {
            0 => "no failure's cause: every failure whose span held a dropped line found an error line".into(),
            _ => "those failures' causes (each may have lost its own line: refused, timed out, reset, not resolved); the others found theirs".into(),
        },
        add: "fewer error lines in one diagnosis: each instance's logs apart (`diagnose --partial` per instance, then `merge`)".into(),
    }
}

/// The names the DNS log answered per view, left out of the answer history
/// (`History::per_view`).
pub fn per_view_missing(names: &[(String, usize)]) -> Missing {
    let listed: Vec<String> = (names.iter())
        .map(|(n, k)| format!("{n} ({k} views)"))
        .collect();
    Missing {
        what: format!(
            "one answer history for {}: the DNS log answers it per view (per-resolver answers, a GSLB's per-site order), and which view this nginx asked is not in its logs — those names' DNS lines were not read",
            listed.join(", ")
        ),
        decides: "when those names' answers changed for this nginx: swaps and stale addresses of those names (the other names' DNS lines were read)".into(),
        add: "the lines of the view this nginx asked: `jq -c 'select(.view == K)'` (its resolver's address: `resolvelab dns --view`), `select(.view == null)` for the main address".into(),
    }
}

/// The evidence summary and the list of what is missing.
pub fn observe(
    p: Present,
    swaps: SwapSource,
    version: Option<Version>,
    config: Option<&RuntimeFacts>,
) -> (Observability, Race) {
    let (race, race_why) = race(version, config);
    let mut missing = Vec::new();
    let mut miss = |what: &str, decides: &str, add: &str| {
        missing.push(Missing {
            what: what.into(),
            decides: decides.into(),
            add: add.into(),
        })
    };
    if !p.access_log {
        miss(
            "the access log",
            "which requests the client saw fail (a failed try may have been retried successfully), the share of failures, bursts vs isolated failures",
            "pass --access FILE with the log_format that wrote it (--log-format or --nginx-conf)",
        );
    } else if !p.upstream_addr {
        miss(
            "`$upstream_addr`",
            "each 502's trajectory (`be` = refused at the first pick, `IP:port, be` = refused at the retry), which peer failed, and swaps inferred from address changes",
            "add `\"$upstream_addr\" \"$upstream_status\"` to the log_format",
        );
    }
    if p.access_log && !p.connection {
        miss(
            "`$connection`",
            "pairing each 502 with its own error lines by `*cid` (else by time and client only)",
            "add `$connection` to the log_format",
        );
    }
    if p.access_log && !p.msec {
        miss(
            "`$msec`",
            "millisecond timing against peer-list changes (a race lands 0–500 ms after one)",
            "add `$msec` to the log_format",
        );
    }
    if !p.error_log {
        miss(
            "the error log",
            "`no live upstreams` vs other 502s, `temporarily disabled` (max_fails), `could not be resolved` (DNS)",
            "pass every error_log destination with --error (`nginx -T | grep error_log`), at level warn or lower",
        );
    }
    if !p.dns_log && swaps != SwapSource::Dns {
        miss(
            "a DNS answer history",
            "exactly when the name's answers changed (a race needs a change 0–500 ms before the failure)",
            "record the answers over time and pass them with --dns (resolvelab.dns/v1 JSON Lines)",
        );
    }
    if config.is_none() {
        miss(
            "the configuration",
            "whether anything resolves at run time (`resolve`, variable `proxy_pass`): without it no peer list can change",
            "pass --nginx-conf <(nginx -T)",
        );
    }
    if version.is_none() {
        miss(
            "the nginx version",
            "nginx older than 1.27.3 has no generation check: no race is possible there",
            "pass --nginx-version X.Y.Z (from `nginx -v`)",
        );
    }
    let obs = Observability {
        inputs: p,
        peer_changes: swaps.id().to_string(),
        config: config.cloned(),
        nginx_version: version.map(|v| v.to_string()),
        race: match race {
            Race::Possible => "possible",
            Race::RuledOut => "ruled-out",
            Race::Unknown => "unknown",
        }
        .to_string(),
        race_why,
        missing,
    };
    (obs, race)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conf(resolve: bool) -> RuntimeFacts {
        RuntimeFacts {
            source: "nginx.conf".into(),
            resolve,
            ..RuntimeFacts::default()
        }
    }

    #[test]
    fn old_nginx_and_static_configs_rule_the_race_out() {
        assert_eq!(race(Some(Version(1, 24, 0)), None).0, Race::RuledOut);
        assert_eq!(
            race(Some(Version(1, 24, 0)), Some(&conf(true))).0,
            Race::RuledOut
        );
        assert_eq!(race(None, Some(&conf(false))).0, Race::RuledOut);
        assert_eq!(race(None, Some(&conf(true))).0, Race::Possible);
        assert_eq!(race(Some(Version(1, 28, 0)), None).0, Race::Unknown);
        assert_eq!(race(None, None).0, Race::Unknown);
        let lua = RuntimeFacts {
            lua_balancer: true,
            ..conf(true)
        };
        assert_eq!(race(None, Some(&lua)).0, Race::RuledOut);
    }

    #[test]
    fn missing_lists_exactly_what_is_absent() {
        let all = Present {
            access_log: true,
            upstream_addr: true,
            connection: true,
            msec: true,
            request_time: true,
            upstream_name: false,
            error_log: true,
            dns_log: true,
        };
        let (o, _) = observe(
            all,
            SwapSource::Dns,
            Some(Version(1, 28, 3)),
            Some(&conf(true)),
        );
        assert!(o.missing.is_empty(), "{:?}", o.missing);
        assert_eq!(o.race, "possible");
        let (o, r) = observe(Present::default(), SwapSource::None, None, None);
        assert_eq!(r, Race::Unknown);
        let what: Vec<&str> = o.missing.iter().map(|m| m.what.as_str()).collect();
        assert_eq!(
            what,
            [
                "the access log",
                "the error log",
                "a DNS answer history",
                "the configuration",
                "the nginx version"
            ]
        );
    }
}
