//! The toxics: one file per fault kind, all behind [`Toxic`].
//!
//! A toxic sees the byte stream of one direction of one connection as chunks and turns each
//! chunk into [`Step`]s (forward these bytes, wait, close, reset). The common parts — name,
//! direction, toxicity, window, seed and counters — live in the wrapper ([`ToxicSpec`] and
//! [`crate::proxy::ToxicEntry`]), not in the toxics.

mod bandwidth;
mod down;
mod latency;
mod limit_data;
mod reset_peer;
mod slicer;
mod slow_close;
mod timeout;

use crate::gate::Common;
use bytes::Bytes;
use rand_chacha::ChaCha8Rng;
use resolvelab_core::spec::Spec;
use std::fmt;
use std::str::FromStr;
use std::time::{Duration, Instant};

pub use bandwidth::Bandwidth;
pub use down::Down;
pub use latency::Latency;
pub use limit_data::LimitData;
pub use reset_peer::ResetPeer;
pub use slicer::Slicer;
pub use slow_close::SlowClose;
pub use timeout::Timeout;

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

/// One instruction for the writer of a direction.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Forward these bytes.
    Data(Bytes),
    /// Forward nothing before this instant (latency is measured from the chunk's arrival).
    Until(Instant),
    /// Wait this long before the next step (accumulates: bandwidth, slicer).
    Wait(Duration),
    /// Close the whole connection (FIN both ways).
    Close,
    /// Reset the whole connection (SO_LINGER 0 on both sockets, then close: RST).
    Reset,
}

/// A fault kind. Immutable; per-connection state lives in the [`ToxicConn`] it creates.
pub trait Toxic: Send + Sync + fmt::Debug {
    /// The kind as written in specs (`latency`, `reset_peer`, …).
    fn kind(&self) -> &'static str;
    /// The kind-specific parameters, rendered back as `key=value` pairs.
    fn params(&self) -> Vec<String>;
    /// Per-connection, per-direction state, created when the toxic first sees the connection.
    fn connect(&self, now: Instant) -> Box<dyn ToxicConn>;
    /// True for toxics that act on the listening socket instead of on streams (`down`).
    fn on_listener(&self) -> bool {
        false
    }
}

/// One toxic's state on one direction of one connection.
pub trait ToxicConn: Send {
    /// Turn one chunk into steps appended to `out`; return true when the toxic changed anything
    /// (delayed, split, dropped or cut it) so the counters only count real effects.
    fn data(
        &mut self,
        data: Bytes,
        arrived: Instant,
        rng: &mut ChaCha8Rng,
        out: &mut Vec<Step>,
    ) -> bool;
    /// The source closed: steps to run before the close is forwarded; true when it acted.
    fn eof(&mut self, _out: &mut Vec<Step>) -> bool {
        false
    }
    /// A timer: at this instant apply the step (`Close` or `Reset`) even if no data flows.
    fn deadline(&self) -> Option<(Instant, Step)> {
        None
    }
}

/// A parsed toxic: `KIND[:key=value,…]` with the common keys plus `direction`.
#[derive(Debug, Clone)]
pub struct ToxicSpec {
    /// Common keys (name, toxicity, for, seed).
    pub common: Common,
    /// Which direction it acts on.
    pub direction: Direction,
    /// The kind with its parameters.
    pub toxic: std::sync::Arc<dyn Toxic>,
}

/// Every toxic kind with its own keys, for help texts and error messages.
pub const KINDS: &[(&str, &str)] = &[
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

impl ToxicSpec {
    /// The name: the explicit `name=`, or `KIND_DIRECTION` like Toxiproxy.
    pub fn name(&self) -> String {
        self.common
            .name
            .clone()
            .unwrap_or_else(|| format!("{}_{}", self.toxic.kind(), self.direction.as_str()))
    }

    /// The spec rendered back (`latency:delay=200ms,direction=downstream`).
    pub fn render(&self) -> String {
        let mut parts = self.toxic.params();
        if !self.toxic.on_listener() {
            parts.push(format!("direction={}", self.direction.as_str()));
        }
        parts.extend(self.common.render(self.toxic.kind()));
        if parts.is_empty() {
            self.toxic.kind().to_string()
        } else {
            format!("{}:{}", self.toxic.kind(), parts.join(","))
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
        let kind = spec.kind.replace('-', "_");
        let (toxic, own): (std::sync::Arc<dyn Toxic>, &[&str]) = match kind.as_str() {
            "latency" => (
                std::sync::Arc::new(Latency::from_spec(&spec)?),
                Latency::KEYS,
            ),
            "bandwidth" => (
                std::sync::Arc::new(Bandwidth::from_spec(&spec)?),
                Bandwidth::KEYS,
            ),
            "slicer" => (std::sync::Arc::new(Slicer::from_spec(&spec)?), Slicer::KEYS),
            "timeout" => (
                std::sync::Arc::new(Timeout::from_spec(&spec)?),
                Timeout::KEYS,
            ),
            "reset_peer" => (
                std::sync::Arc::new(ResetPeer::from_spec(&spec)?),
                ResetPeer::KEYS,
            ),
            "limit_data" => (
                std::sync::Arc::new(LimitData::from_spec(&spec)?),
                LimitData::KEYS,
            ),
            "slow_close" => (
                std::sync::Arc::new(SlowClose::from_spec(&spec)?),
                SlowClose::KEYS,
            ),
            "down" => (std::sync::Arc::new(Down), &[]),
            other => {
                let known: Vec<&str> = KINDS.iter().map(|k| k.0).collect();
                return Err(format!(
                    "unknown proxy fault `{other}`; known: {}",
                    known.join(", ")
                ));
            }
        };
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
        if toxic.on_listener() && common.toxicity < 1.0 {
            return Err(format!(
                "`{s}`: `down` closes the listening socket and takes no toxicity; for \
                 probabilistic failures use `reset_peer:timeout=0,toxicity=P`"
            ));
        }
        Ok(ToxicSpec {
            common,
            direction,
            toxic,
        })
    }
}

/// Parse a required or defaulted duration key.
pub(crate) fn dur_key(
    spec: &Spec,
    key: &str,
    default: Option<Duration>,
) -> Result<Duration, String> {
    match spec.get(key) {
        Some(v) => {
            resolvelab_core::dur::parse(v).map_err(|e| format!("`{}`: {key}={v}: {e}", spec.kind))
        }
        None => default.ok_or_else(|| {
            format!(
                "`{}` needs `{key}=DURATION`, e.g. `{}:{key}=200ms`",
                spec.kind, spec.kind
            )
        }),
    }
}

/// Parse a required or defaulted unsigned integer key.
pub(crate) fn u64_key(spec: &Spec, key: &str, default: Option<u64>) -> Result<u64, String> {
    match spec.get(key) {
        Some(v) => v
            .parse()
            .map_err(|_| format!("`{}`: {key}={v} is not an unsigned integer", spec.kind)),
        None => default.ok_or_else(|| {
            format!(
                "`{}` needs `{key}=N`, e.g. `{}:{key}=1024`",
                spec.kind, spec.kind
            )
        }),
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
