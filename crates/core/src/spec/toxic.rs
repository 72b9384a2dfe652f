//! The proxy's fault kinds ("toxics", Toxiproxy's names and units): their parameters,
//! spellings and defaults. Each toxic's behaviour is one file of the proxy
//! (`crates/proxy/src/toxics/`); the model maps the same values onto its own.
//!
//! Kinds are written as Toxiproxy writes them (`reset_peer`); the kebab-case spelling
//! (`reset-peer`) is an alias.
//!
//! ```
//! use resolvelab_core::spec::toxic::{Direction, ToxicKind, ToxicSpec};
//! let t: ToxicSpec = "latency:delay=200ms,jitter=10ms,direction=upstream".parse().unwrap();
//! assert_eq!(t.direction, Direction::Upstream);
//! assert!(matches!(t.kind, ToxicKind::Latency(_)));
//! assert_eq!(t.to_string(), "latency:delay=200ms,jitter=10ms,direction=upstream");
//! ```

use super::Spec;
use super::fault::{Common, dur_key, u64_key};
use crate::dur;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// Which way the bytes flow that a toxic acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Client → upstream (requests).
    Upstream,
    /// Upstream → client (responses). The default, as in Toxiproxy.
    Downstream,
}

impl Direction {
    /// `upstream` or `downstream`.
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Upstream => "upstream",
            Direction::Downstream => "downstream",
        }
    }
}

// `latency:delay=DUR,jitter=DUR` — every chunk is forwarded `delay ± jitter` after it arrived.
/// Delay each chunk by `delay` plus a uniform jitter in `[-jitter, +jitter]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Latency {
    /// Base delay.
    pub delay: Duration,
    /// Half-width of the uniform jitter.
    pub jitter: Duration,
}

impl Latency {
    /// The kind's own keys (besides the common ones and `direction`).
    pub const KEYS: &'static [&'static str] = &["delay", "jitter", "latency"];

    /// Read the kind's own keys of a parsed spec.
    pub fn from_spec(spec: &Spec) -> Result<Latency, String> {
        // Toxiproxy calls it `latency`; accept both.
        let delay = if spec.get("latency").is_some() {
            dur_key(spec, "latency", None)?
        } else {
            dur_key(spec, "delay", None)?
        };
        Ok(Latency {
            delay,
            jitter: dur_key(spec, "jitter", Some(Duration::ZERO))?,
        })
    }

    /// The kind-specific keys rendered back, as `key=value` pairs.
    pub fn params(&self) -> Vec<String> {
        let mut p = vec![format!("delay={}", dur::format(self.delay))];
        if !self.jitter.is_zero() {
            p.push(format!("jitter={}", dur::format(self.jitter)));
        }
        p
    }
}

// `bandwidth:rate=KB/s` — limit the throughput of a direction (Toxiproxy's unit: KB/s).
/// Pace the stream at `rate` kilobytes per second.
#[derive(Debug, Clone, PartialEq)]
pub struct Bandwidth {
    /// KB (1000 bytes) per second.
    pub rate_kb: u64,
}

impl Bandwidth {
    /// The kind's own keys (besides the common ones and `direction`).
    pub const KEYS: &'static [&'static str] = &["rate"];

    /// Read the kind's own keys of a parsed spec.
    pub fn from_spec(spec: &Spec) -> Result<Bandwidth, String> {
        let rate_kb = u64_key(spec, "rate", None)?;
        if rate_kb == 0 {
            return Err(
                "`bandwidth`: rate=0 would stall forever; use `timeout:timeout=0` for a blackhole"
                    .into(),
            );
        }
        Ok(Bandwidth { rate_kb })
    }

    /// The kind-specific keys rendered back, as `key=value` pairs.
    pub fn params(&self) -> Vec<String> {
        vec![format!("rate={}", self.rate_kb)]
    }
}

// `slicer:average_size=N,size_variation=N,delay=DUR` — cut chunks into small pieces with a
// delay between them (exercises partial reads).
/// Split every chunk into slices of `average_size ± size_variation` bytes, `delay` apart.
#[derive(Debug, Clone, PartialEq)]
pub struct Slicer {
    /// Mean slice size in bytes.
    pub average_size: u64,
    /// Half-width of the uniform size variation.
    pub size_variation: u64,
    /// Delay between slices.
    pub delay: Duration,
}

impl Slicer {
    /// The kind's own keys (besides the common ones and `direction`).
    pub const KEYS: &'static [&'static str] = &["average_size", "size_variation", "delay"];

    /// Read the kind's own keys of a parsed spec.
    pub fn from_spec(spec: &Spec) -> Result<Slicer, String> {
        let average_size = u64_key(spec, "average_size", Some(64))?;
        let size_variation = u64_key(spec, "size_variation", Some(0))?;
        if average_size == 0 || size_variation >= average_size {
            return Err(format!(
                "`slicer`: average_size must be > 0 and size_variation below it (got {average_size}, {size_variation})"
            ));
        }
        Ok(Slicer {
            average_size,
            size_variation,
            delay: dur_key(spec, "delay", Some(Duration::ZERO))?,
        })
    }

    /// The kind-specific keys rendered back, as `key=value` pairs.
    pub fn params(&self) -> Vec<String> {
        vec![
            format!("average_size={}", self.average_size),
            format!("size_variation={}", self.size_variation),
            format!("delay={}", dur::format(self.delay)),
        ]
    }
}

// `timeout:timeout=DUR` — a blackhole: data is dropped; the connection is closed `timeout`
// after the toxic met it (0 = never, data is dropped until the toxic is removed).
/// Drop all data; close after `timeout` unless it is zero.
#[derive(Debug, Clone, PartialEq)]
pub struct Timeout {
    /// Time until the connection is closed (zero = never).
    pub timeout: Duration,
}

impl Timeout {
    /// The kind's own keys (besides the common ones and `direction`).
    pub const KEYS: &'static [&'static str] = &["timeout"];

    /// Read the kind's own keys of a parsed spec.
    pub fn from_spec(spec: &Spec) -> Result<Timeout, String> {
        Ok(Timeout {
            timeout: dur_key(spec, "timeout", Some(Duration::ZERO))?,
        })
    }

    /// The kind-specific keys rendered back, as `key=value` pairs.
    pub fn params(&self) -> Vec<String> {
        vec![format!("timeout={}", dur::format(self.timeout))]
    }
}

// `reset_peer:timeout=DUR` — reset the connection (TCP RST via SO_LINGER 0) `timeout` after
// the toxic met it; 0 resets at once.
/// Reset both sides after `timeout`.
#[derive(Debug, Clone, PartialEq)]
pub struct ResetPeer {
    /// Time until the reset.
    pub timeout: Duration,
}

impl ResetPeer {
    /// The kind's own keys (besides the common ones and `direction`).
    pub const KEYS: &'static [&'static str] = &["timeout"];

    /// Read the kind's own keys of a parsed spec.
    pub fn from_spec(spec: &Spec) -> Result<ResetPeer, String> {
        Ok(ResetPeer {
            timeout: dur_key(spec, "timeout", Some(Duration::ZERO))?,
        })
    }

    /// The kind-specific keys rendered back, as `key=value` pairs.
    pub fn params(&self) -> Vec<String> {
        vec![format!("timeout={}", dur::format(self.timeout))]
    }
}

// `limit_data:bytes=N` — close the connection once N bytes went through this direction.
/// Forward at most `bytes` bytes, then close.
#[derive(Debug, Clone, PartialEq)]
pub struct LimitData {
    /// The byte budget of the direction.
    pub bytes: u64,
}

impl LimitData {
    /// The kind's own keys (besides the common ones and `direction`).
    pub const KEYS: &'static [&'static str] = &["bytes"];

    /// Read the kind's own keys of a parsed spec.
    pub fn from_spec(spec: &Spec) -> Result<LimitData, String> {
        Ok(LimitData {
            bytes: u64_key(spec, "bytes", None)?,
        })
    }

    /// The kind-specific keys rendered back, as `key=value` pairs.
    pub fn params(&self) -> Vec<String> {
        vec![format!("bytes={}", self.bytes)]
    }
}

// `slow_close:delay=DUR` — when the source closes, hold the close back for `delay`.
/// Delay the forwarded FIN by `delay`.
#[derive(Debug, Clone, PartialEq)]
pub struct SlowClose {
    /// How long the close is held back.
    pub delay: Duration,
}

impl SlowClose {
    /// The kind's own keys (besides the common ones and `direction`).
    pub const KEYS: &'static [&'static str] = &["delay"];

    /// Read the kind's own keys of a parsed spec.
    pub fn from_spec(spec: &Spec) -> Result<SlowClose, String> {
        Ok(SlowClose {
            delay: dur_key(spec, "delay", None)?,
        })
    }

    /// The kind-specific keys rendered back, as `key=value` pairs.
    pub fn params(&self) -> Vec<String> {
        vec![format!("delay={}", dur::format(self.delay))]
    }
}

/// Close the listening socket while active (`down`).
#[derive(Debug, Clone, PartialEq)]
pub struct Down;

/// A toxic kind with its parameters.
#[derive(Debug, Clone, PartialEq)]
pub enum ToxicKind {
    /// `latency`.
    Latency(Latency),
    /// `bandwidth`.
    Bandwidth(Bandwidth),
    /// `slicer`.
    Slicer(Slicer),
    /// `timeout`.
    Timeout(Timeout),
    /// `reset_peer`.
    ResetPeer(ResetPeer),
    /// `limit_data`.
    LimitData(LimitData),
    /// `slow_close`.
    SlowClose(SlowClose),
    /// `down`.
    Down(Down),
}

/// Every toxic kind with its own keys, for help texts and error messages.
pub const TOXIC_KINDS: &[(&str, &str)] = &[
    ("latency", "delay=DUR, jitter=DUR"),
    ("bandwidth", "rate=KB/s"),
    (
        "slicer",
        "average_size=BYTES, size_variation=BYTES, delay=DUR",
    ),
    ("timeout", "timeout=DUR (0 = forever)"),
    ("reset_peer", "timeout=DUR"),
    ("limit_data", "bytes=N"),
    ("slow_close", "delay=DUR"),
    ("down", "(none)"),
];

impl ToxicKind {
    /// The kind as written in specs (`latency`, `reset_peer`, …).
    pub fn name(&self) -> &'static str {
        match self {
            ToxicKind::Latency(_) => "latency",
            ToxicKind::Bandwidth(_) => "bandwidth",
            ToxicKind::Slicer(_) => "slicer",
            ToxicKind::Timeout(_) => "timeout",
            ToxicKind::ResetPeer(_) => "reset_peer",
            ToxicKind::LimitData(_) => "limit_data",
            ToxicKind::SlowClose(_) => "slow_close",
            ToxicKind::Down(_) => "down",
        }
    }

    /// The kind-specific parameters, rendered back as `key=value` pairs.
    pub fn params(&self) -> Vec<String> {
        match self {
            ToxicKind::Latency(t) => t.params(),
            ToxicKind::Bandwidth(t) => t.params(),
            ToxicKind::Slicer(t) => t.params(),
            ToxicKind::Timeout(t) => t.params(),
            ToxicKind::ResetPeer(t) => t.params(),
            ToxicKind::LimitData(t) => t.params(),
            ToxicKind::SlowClose(t) => t.params(),
            ToxicKind::Down(_) => Vec::new(),
        }
    }

    /// True for toxics that act on the listening socket instead of on streams (`down`).
    pub fn on_listener(&self) -> bool {
        matches!(self, ToxicKind::Down(_))
    }

    /// Parse the kind and its own keys; returns the keys it took.
    fn parse(spec: &Spec) -> Result<(ToxicKind, &'static [&'static str]), String> {
        Ok(match spec.kind.replace('-', "_").as_str() {
            "latency" => (ToxicKind::Latency(Latency::from_spec(spec)?), Latency::KEYS),
            "bandwidth" => (
                ToxicKind::Bandwidth(Bandwidth::from_spec(spec)?),
                Bandwidth::KEYS,
            ),
            "slicer" => (ToxicKind::Slicer(Slicer::from_spec(spec)?), Slicer::KEYS),
            "timeout" => (ToxicKind::Timeout(Timeout::from_spec(spec)?), Timeout::KEYS),
            "reset_peer" => (
                ToxicKind::ResetPeer(ResetPeer::from_spec(spec)?),
                ResetPeer::KEYS,
            ),
            "limit_data" => (
                ToxicKind::LimitData(LimitData::from_spec(spec)?),
                LimitData::KEYS,
            ),
            "slow_close" => (
                ToxicKind::SlowClose(SlowClose::from_spec(spec)?),
                SlowClose::KEYS,
            ),
            "down" => (ToxicKind::Down(Down), &[]),
            other => {
                let known: Vec<&str> = TOXIC_KINDS.iter().map(|k| k.0).collect();
                return Err(format!(
                    "unknown proxy fault `{other}`; known: {}",
                    known.join(", ")
                ));
            }
        })
    }
}

/// A parsed toxic: `KIND[:key=value,…]` with the common keys plus `direction`.
#[derive(Debug, Clone, PartialEq)]
pub struct ToxicSpec {
    /// Common keys (name, toxicity, for, seed).
    pub common: Common,
    /// Which direction it acts on.
    pub direction: Direction,
    /// The kind with its parameters.
    pub kind: ToxicKind,
}

impl ToxicSpec {
    /// The name: the explicit `name=`, or `KIND_DIRECTION` like Toxiproxy.
    pub fn name(&self) -> String {
        self.common
            .name
            .clone()
            .unwrap_or_else(|| format!("{}_{}", self.kind.name(), self.direction.as_str()))
    }

    /// The spec rendered back (`latency:delay=200ms,direction=downstream`).
    pub fn render(&self) -> String {
        let mut parts = self.kind.params();
        if !self.kind.on_listener() {
            parts.push(format!("direction={}", self.direction.as_str()));
        }
        parts.extend(self.common.render(self.kind.name()));
        if parts.is_empty() {
            self.kind.name().to_string()
        } else {
            format!("{}:{}", self.kind.name(), parts.join(","))
        }
    }
}

impl fmt::Display for ToxicSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render())
    }
}

impl FromStr for ToxicSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let spec = Spec::parse(s)?;
        let (kind, own) = ToxicKind::parse(&spec)?;
        let mut keys = own.to_vec();
        keys.push("direction");
        let common = Common::from_spec(&spec, &keys)?;
        let direction = match spec.get("direction") {
            None | Some("downstream") | Some("down") => Direction::Downstream,
            Some("upstream") | Some("up") => Direction::Upstream,
            Some(d) => {
                return Err(format!(
                    "`{s}`: direction `{d}` is neither `upstream` nor `downstream`"
                ));
            }
        };
        if kind.on_listener() && common.toxicity < 1.0 {
            return Err(format!(
                "`{s}`: `down` closes the listening socket and takes no toxicity; for \
                 probabilistic failures use `reset_peer:timeout=0,toxicity=P`"
            ));
        }
        Ok(ToxicSpec {
            common,
            direction,
            kind,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_render() {
        let t: ToxicSpec = "latency:delay=200ms,jitter=10ms,direction=upstream"
            .parse()
            .unwrap();
        assert_eq!(t.direction, Direction::Upstream);
        assert_eq!(t.name(), "latency_upstream");
        assert_eq!(
            t.render(),
            "latency:delay=200ms,jitter=10ms,direction=upstream"
        );
        let t: ToxicSpec = "reset-peer:timeout=0,toxicity=0.5,name=r".parse().unwrap();
        assert_eq!(t.name(), "r");
        assert!(
            "latency"
                .parse::<ToxicSpec>()
                .unwrap_err()
                .contains("delay=")
        );
        assert!("nope".parse::<ToxicSpec>().unwrap_err().contains("known"));
        assert!("down:toxicity=0.5".parse::<ToxicSpec>().is_err());
        assert!(
            "latency:delay=1ms,direction=sideways"
                .parse::<ToxicSpec>()
                .is_err()
        );
    }
}
