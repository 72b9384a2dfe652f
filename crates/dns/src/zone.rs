//! Names and their settings: `--name NAME=MODE[;ttl=DUR][;aaaa=IP,…]`, the `--zone` TOML file
//! and the `--timeline` TOML file.

use std::collections::BTreeMap;
use std::net::Ipv6Addr;
use std::path::Path;
use std::time::Duration;

use resolvelab_core::{dur, policy};
use serde::Deserialize;

pub use resolvelab_core::spec::dns::Align;
use resolvelab_core::spec::dns::{DnsMode, DnsSetting, non_loopback, parse_aaaa_list};

/// One name the authority answers for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameConfig {
    /// Lowercase, without the trailing dot.
    pub name: String,
    /// The configured ("default") mode; answers under any other mode count as injected.
    pub mode: DnsMode,
    /// TTL of this name's records (seconds); `None` = the server's default TTL.
    pub ttl: Option<u32>,
    /// AAAA records (AAAA queries get NODATA when empty).
    pub aaaa: Vec<Ipv6Addr>,
}

/// Unknown names are answered NXDOMAIN (the default) or REFUSED.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Unknown {
    /// NXDOMAIN, as a real authority answers for a name it does not have.
    #[default]
    Nxdomain,
    /// REFUSED, as a server that is not authoritative for the zone answers.
    Refused,
}

impl std::str::FromStr for Unknown {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "nxdomain" => Ok(Unknown::Nxdomain),
            "refused" => Ok(Unknown::Refused),
            other => Err(format!(
                "unknown-name policy `{other}`: use `nxdomain` or `refused`"
            )),
        }
    }
}

/// Normalise a DNS name as typed: lowercase, no trailing dot, no empty labels.
pub fn normalize_name(s: &str) -> Result<String, String> {
    let n = s.trim().trim_end_matches('.').to_ascii_lowercase();
    if n.is_empty() {
        return Err("empty DNS name".into());
    }
    if n.split('.').any(|l| l.is_empty() || l.len() > 63) {
        return Err(format!(
            "`{s}` is not a valid DNS name (empty or over-long label)"
        ));
    }
    if n.len() > 253 {
        return Err(format!("`{s}` is longer than 253 characters"));
    }
    hickory_proto::rr::Name::from_ascii(&n)
        .map_err(|e| format!("`{s}` is not a valid DNS name: {e}"))?;
    Ok(n)
}

pub use resolvelab_core::spec::dns::parse_ttl;

impl NameConfig {
    /// Parse `NAME=MODE[;ttl=DUR][;aaaa=IP,…]`, the value of `--name`.
    pub fn parse_cli(s: &str) -> Result<NameConfig, String> {
        let (name, setting) = s.split_once('=').ok_or_else(|| {
            format!(
                "--name `{s}`: expected NAME=MODE, e.g. `app.test.local=alternate:127.0.0.20,127.0.0.30`"
            )
        })?;
        let setting: DnsSetting = setting.parse().map_err(|e| format!("--name `{s}`: {e}"))?;
        NameConfig::new(name, setting).map_err(|e| format!("--name `{s}`: {e}"))
    }

    /// A served name and its starting setting, which must be a complete mode.
    pub fn new(name: &str, setting: DnsSetting) -> Result<NameConfig, String> {
        let name = normalize_name(name)?;
        let DnsSetting { mode, ttl, aaaa } = setting;
        if mode.is_partial() {
            return Err(
                "a starting mode must be complete, e.g. `delay:200ms+static:127.0.0.20`".into(),
            );
        }
        Ok(NameConfig {
            name,
            mode,
            ttl,
            aaaa,
        })
    }

    /// Refuse non-loopback answers unless allowed.
    pub fn check_loopback(&self, allow_remote: bool) -> Result<(), String> {
        self.mode
            .check_loopback(allow_remote)
            .map_err(|e| format!("name `{}`: {e}", self.name))?;
        if !allow_remote
            && let Some(ip) = self
                .aaaa
                .iter()
                .find(|ip| !policy::is_loopback((**ip).into()))
        {
            return Err(format!(
                "name `{}`: {}",
                self.name,
                non_loopback((*ip).into())
            ));
        }
        Ok(())
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
enum TtlValue {
    Secs(u32),
    Text(String),
}

impl TtlValue {
    fn get(&self) -> Result<u32, String> {
        match self {
            TtlValue::Secs(n) => Ok(*n),
            TtlValue::Text(s) => parse_ttl(s),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ZoneFile {
    ttl: Option<TtlValue>,
    unknown: Option<String>,
    seed: Option<u64>,
    #[serde(default)]
    names: BTreeMap<String, ZoneName>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ZoneName {
    mode: String,
    ttl: Option<TtlValue>,
    #[serde(default)]
    aaaa: Vec<String>,
}

/// A parsed `--zone` file.
///
/// ```toml
/// ttl = "1s"              # default TTL of every name (optional)
/// unknown = "nxdomain"    # or "refused" (optional)
/// seed = 7                # RNG seed of `weighted` (optional)
///
/// [names."app.test.local"]
/// mode = "alternate:127.0.0.20,127.0.0.30"
/// ttl = "5s"
/// aaaa = ["::1"]
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Zone {
    /// Default TTL, if the file sets one.
    pub ttl: Option<u32>,
    /// Unknown-name policy, if the file sets one.
    pub unknown: Option<Unknown>,
    /// RNG seed, if the file sets one.
    pub seed: Option<u64>,
    /// The names, in file order of their keys (sorted).
    pub names: Vec<NameConfig>,
}

impl Zone {
    /// Parse zone TOML; `origin` names the file in error messages.
    pub fn parse(text: &str, origin: &str) -> Result<Zone, String> {
        let file: ZoneFile = toml::from_str(text).map_err(|e| toml_error(origin, text, &e))?;
        let mut zone = Zone {
            ttl: file
                .ttl
                .map(|t| t.get())
                .transpose()
                .map_err(|e| format!("{origin}: `ttl`: {e}"))?,
            unknown: file
                .unknown
                .map(|u| u.parse())
                .transpose()
                .map_err(|e| format!("{origin}: {e}"))?,
            seed: file.seed,
            names: Vec::new(),
        };
        for (raw, n) in file.names {
            let at = |e: String| format!("{origin}: [names.\"{raw}\"]: {e}");
            let setting = DnsSetting {
                mode: n.mode.parse().map_err(at)?,
                ttl: n.ttl.map(|t| t.get()).transpose().map_err(at)?,
                aaaa: parse_aaaa_list(&n.aaaa.join(",")).map_err(at)?,
            };
            zone.names.push(NameConfig::new(&raw, setting).map_err(at)?);
        }
        Ok(zone)
    }

    /// Read and parse a zone file.
    pub fn load(path: &Path) -> Result<Zone, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read zone file {}: {e}", path.display()))?;
        Zone::parse(&text, &path.display().to_string())
    }
}

/// `file:line: message` for a TOML error (the toml crate reports a byte span).
pub(crate) fn toml_error(origin: &str, text: &str, e: &toml::de::Error) -> String {
    let line = e
        .span()
        .map(|s| {
            text.as_bytes()[..s.start.min(text.len())]
                .iter()
                .filter(|b| **b == b'\n')
                .count()
                + 1
        })
        .unwrap_or(1);
    format!("{origin}:{line}: {}", e.message())
}

/// One scheduled change of a `--timeline` file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// Offset from the start of the server.
    pub at: Duration,
    /// The name (normalised).
    pub name: String,
    /// The mode (may be partial like `delay:200ms`, or `default`).
    pub mode: ModeSpec,
    /// Revert after this long.
    pub for_: Option<Duration>,
    /// When the change takes effect.
    pub align: Align,
}

/// A mode as given to a `set`: a mode, or `default` (the name's configured mode).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModeSpec {
    /// Back to the name's configured mode.
    Default,
    /// This mode.
    DnsMode(DnsMode),
}

impl std::str::FromStr for ModeSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s.trim().eq_ignore_ascii_case("default") {
            Ok(ModeSpec::Default)
        } else {
            s.parse().map(ModeSpec::DnsMode)
        }
    }
}

impl std::fmt::Display for ModeSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ModeSpec::Default => f.write_str("default"),
            ModeSpec::DnsMode(m) => m.fmt(f),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TimelineFile {
    #[serde(default)]
    change: Vec<TimelineEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TimelineEntry {
    at: String,
    name: String,
    mode: String,
    #[serde(rename = "for")]
    for_: Option<String>,
    align: Option<String>,
}

/// A parsed `--timeline` file: changes sorted by `at`.
///
/// ```toml
/// [[change]]
/// at = "10s"               # after the server started
/// name = "app.test.local"
/// mode = "nxdomain"
/// for = "2s"               # optional: then revert
/// align = "next-query"     # optional
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Timeline {
    /// The changes, sorted by `at`.
    pub changes: Vec<Change>,
}

impl Timeline {
    /// Parse timeline TOML; `origin` names the file in error messages.
    pub fn parse(text: &str, origin: &str) -> Result<Timeline, String> {
        let file: TimelineFile = toml::from_str(text).map_err(|e| toml_error(origin, text, &e))?;
        let mut changes = Vec::new();
        for (i, e) in file.change.into_iter().enumerate() {
            let at = |m: String| format!("{origin}: [[change]] #{}: {m}", i + 1);
            changes.push(Change {
                at: dur::parse(&e.at).map_err(|m| at(format!("`at`: {m}")))?,
                name: normalize_name(&e.name).map_err(at)?,
                mode: e.mode.parse().map_err(at)?,
                for_: e
                    .for_
                    .as_deref()
                    .map(dur::parse)
                    .transpose()
                    .map_err(|m| at(format!("`for`: {m}")))?,
                align: e.align.as_deref().unwrap_or("now").parse().map_err(at)?,
            });
        }
        changes.sort_by_key(|c| c.at);
        Ok(Timeline { changes })
    }

    /// Read and parse a timeline file.
    pub fn load(path: &Path) -> Result<Timeline, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read timeline file {}: {e}", path.display()))?;
        Timeline::parse(&text, &path.display().to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cli_names() {
        let n = NameConfig::parse_cli(
            "App.Test.Local.=alternate:127.0.0.20,127.0.0.30;ttl=5s;aaaa=::1",
        )
        .unwrap();
        assert_eq!(n.name, "app.test.local");
        assert_eq!(n.mode.to_string(), "alternate:127.0.0.20,127.0.0.30");
        assert_eq!(n.ttl, Some(5));
        assert_eq!(n.aaaa, vec![Ipv6Addr::LOCALHOST]);
        assert!(
            NameConfig::parse_cli("app")
                .unwrap_err()
                .contains("NAME=MODE")
        );
        assert!(
            NameConfig::parse_cli("a..b=nxdomain")
                .unwrap_err()
                .contains("valid DNS name")
        );
        assert!(
            NameConfig::parse_cli("a=nxdomain;x=1")
                .unwrap_err()
                .contains("unknown option")
        );
        assert!(
            NameConfig::parse_cli("a=delay:1s")
                .unwrap_err()
                .contains("complete")
        );
        assert!(
            NameConfig::parse_cli("a=nxdomain;ttl=1.5s")
                .unwrap_err()
                .contains("whole seconds")
        );
        let remote = NameConfig::parse_cli("a=static:127.0.0.1;aaaa=2001:db8::1").unwrap();
        assert!(
            remote
                .check_loopback(false)
                .unwrap_err()
                .contains("2001:db8::1")
        );
    }

    #[test]
    fn zone_file() {
        let z = Zone::parse(
            r#"
ttl = 2
unknown = "refused"
seed = 9
[names."b.test"]
mode = "nxdomain"
[names."A.test"]
mode = "static:127.0.0.20"
ttl = "5s"
aaaa = ["::1"]
"#,
            "z.toml",
        )
        .unwrap();
        assert_eq!(z.ttl, Some(2));
        assert_eq!(z.unknown, Some(Unknown::Refused));
        assert_eq!(z.seed, Some(9));
        assert_eq!(z.names.len(), 2);
        assert_eq!(z.names[0].name, "a.test");
        assert_eq!(z.names[0].ttl, Some(5));
        let e = Zone::parse("[names.\"x\"]\nmode = \"bogus\"\n", "z.toml").unwrap_err();
        assert!(e.starts_with("z.toml: [names.\"x\"]: unknown mode"), "{e}");
        let e = Zone::parse("ttl = 1\n\nbogus = 3\n", "z.toml").unwrap_err();
        assert!(e.starts_with("z.toml:3:"), "{e}");
    }

    #[test]
    fn timeline_file() {
        let t = Timeline::parse(
            r#"
[[change]]
at = "5s"
name = "a.test"
mode = "nxdomain"
for = "2s"
align = "next-query"
[[change]]
at = "1s"
name = "a.test"
mode = "delay:100ms"
"#,
            "t.toml",
        )
        .unwrap();
        assert_eq!(t.changes.len(), 2);
        assert_eq!(t.changes[0].at, Duration::from_secs(1));
        assert_eq!(t.changes[1].for_, Some(Duration::from_secs(2)));
        assert_eq!(t.changes[1].align, Align::NextQuery);
        let e = Timeline::parse(
            "[[change]]\nat = \"5\"\nname = \"a\"\nmode = \"drop\"\n",
            "t.toml",
        )
        .unwrap_err();
        assert!(e.contains("#1") && e.contains("no unit"), "{e}");
    }
}
