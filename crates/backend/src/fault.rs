//! Backend faults: `KIND[:key=value,…]` with the common keys `toxicity`, `for`, `seed`, `name`.

use resolvelab_core::{dur, spec::Spec};
use resolvelab_faults::gate::{Common, Gate};
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// What a fault does.
#[derive(Debug, Clone, PartialEq)]
pub enum FaultKind {
    /// After a response, close the idle keep-alive connection after a random delay in the range,
    /// silently; a request that arrives in that gap is never answered.
    Reclaim {
        /// The delay between the response and the close.
        delay: dur::Range,
    },
    /// Close keep-alive connections that stay idle this long.
    IdleTimeout {
        /// Idle time before the close.
        after: Duration,
    },
    /// Accept, then reset the connection (SO_LINGER 0).
    Rst,
    /// Stop listening (connection refused) while active.
    Refuse,
    /// Accept and never answer.
    Hang,
    /// Send the response headers, then close before the body.
    CloseAfterHeaders,
    /// Answer with this status code.
    Status {
        /// The status code.
        code: u16,
    },
    /// Wait this long before sending the response headers.
    SlowHeaders {
        /// The added delay.
        delay: Duration,
    },
}

/// Every kind, for help texts.
pub const KINDS: &[(&str, &str)] = &[
    ("reclaim", "delay=LO..HI (default 0ms..50ms)"),
    ("idle-timeout", "DUR or after=DUR"),
    ("rst", ""),
    ("refuse", "(listener; no toxicity)"),
    ("hang", ""),
    ("close-after-headers", ""),
    ("status", "CODE or code=CODE"),
    ("slow-headers", "DUR or delay=DUR"),
];

impl FaultKind {
    /// The kind as written in specs.
    pub fn name(&self) -> &'static str {
        match self {
            FaultKind::Reclaim { .. } => "reclaim",
            FaultKind::IdleTimeout { .. } => "idle-timeout",
            FaultKind::Rst => "rst",
            FaultKind::Refuse => "refuse",
            FaultKind::Hang => "hang",
            FaultKind::CloseAfterHeaders => "close-after-headers",
            FaultKind::Status { .. } => "status",
            FaultKind::SlowHeaders { .. } => "slow-headers",
        }
    }
}

/// A parsed backend fault: `FaultSpec::from_str("reclaim:toxicity=0.3,delay=0ms..50ms")`.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultSpec {
    /// What it does.
    pub kind: FaultKind,
    /// Name, toxicity, window and seed.
    pub common: Common,
}

impl FaultSpec {
    /// The explicit `name=` or the kind.
    pub fn name(&self) -> String {
        self.common
            .name
            .clone()
            .unwrap_or_else(|| self.kind.name().to_string())
    }

    /// The spec rendered back.
    pub fn render(&self) -> String {
        let mut parts = match &self.kind {
            FaultKind::Reclaim { delay } => vec![format!(
                "delay={}..{}",
                dur::format(delay.lo),
                dur::format(delay.hi)
            )],
            FaultKind::IdleTimeout { after } => vec![format!("after={}", dur::format(*after))],
            FaultKind::Status { code } => vec![format!("code={code}")],
            FaultKind::SlowHeaders { delay } => vec![format!("delay={}", dur::format(*delay))],
            _ => Vec::new(),
        };
        parts.extend(self.common.render(self.kind.name()));
        if parts.is_empty() {
            self.kind.name().to_string()
        } else {
            format!("{}:{}", self.kind.name(), parts.join(","))
        }
    }
}

fn positional_or<'a>(spec: &'a Spec, key: &str) -> Option<&'a str> {
    spec.get(key).or_else(|| spec.get(""))
}

fn dur_of(spec: &Spec, key: &str) -> Result<Duration, String> {
    let v = positional_or(spec, key).ok_or_else(|| {
        format!(
            "`{}` needs a duration: write `{}:200ms` or `{}:{key}=200ms`",
            spec.kind, spec.kind, spec.kind
        )
    })?;
    dur::parse(v).map_err(|e| format!("`{}`: {e}", spec.kind))
}

impl FromStr for FaultSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let spec = Spec::parse(s)?;
        let kind_name = spec.kind.replace('_', "-");
        let (kind, own): (FaultKind, &[&str]) = match kind_name.as_str() {
            "reclaim" => {
                let delay = match spec.get("delay").or_else(|| spec.get("")) {
                    Some(d) => {
                        dur::Range::parse(d).map_err(|e| format!("`reclaim`: delay: {e}"))?
                    }
                    None => dur::Range::parse("0ms..50ms").expect("constant range"),
                };
                (FaultKind::Reclaim { delay }, &["delay", ""])
            }
            "idle-timeout" => (
                FaultKind::IdleTimeout {
                    after: dur_of(&spec, "after")?,
                },
                &["after", ""],
            ),
            "rst" | "reset" => (FaultKind::Rst, &[]),
            "refuse" => (FaultKind::Refuse, &[]),
            "hang" => (FaultKind::Hang, &[]),
            "close-after-headers" => (FaultKind::CloseAfterHeaders, &[]),
            "status" => {
                let v = positional_or(&spec, "code").ok_or_else(|| {
                    "`status` needs a code: write `status:503` or `status:code=503`".to_string()
                })?;
                let code: u16 = v
                    .parse()
                    .ok()
                    .filter(|c| (100..=599).contains(c))
                    .ok_or_else(|| format!("`status`: `{v}` is not an HTTP status (100–599)"))?;
                (FaultKind::Status { code }, &["code", ""])
            }
            "slow-headers" => (
                FaultKind::SlowHeaders {
                    delay: dur_of(&spec, "delay")?,
                },
                &["delay", ""],
            ),
            other => {
                let known: Vec<&str> = KINDS.iter().map(|k| k.0).collect();
                return Err(format!(
                    "unknown backend fault `{other}`; known: {}",
                    known.join(", ")
                ));
            }
        };
        let common = Common::from_spec(&spec, own)?;
        if kind == FaultKind::Refuse && common.toxicity < 1.0 {
            return Err(format!(
                "`{s}`: `refuse` closes the listening socket and takes no toxicity; for \
                 probabilistic failures use `rst:toxicity=P`"
            ));
        }
        Ok(FaultSpec { kind, common })
    }
}

/// A fault installed on a running backend.
#[derive(Debug)]
pub struct Fault {
    pub(crate) name: String,
    pub(crate) spec: FaultSpec,
    pub(crate) gate: Gate,
    /// Kind-specific second counter: for `reclaim`, requests that arrived in the gap and were
    /// dropped (each is one first-try failure on the client side).
    pub(crate) caught: AtomicU64,
}

impl resolvelab_faults::gate::Gated for Fault {
    fn gate(&self) -> &resolvelab_faults::gate::Gate {
        &self.gate
    }
}

impl resolvelab_faults::gate::Named for Fault {
    fn name(&self) -> &str {
        &self.name
    }
}

/// A fault's counters.
#[derive(Debug, Clone, serde::Serialize, PartialEq)]
pub struct FaultStatus {
    /// Name.
    pub name: String,
    /// Kind.
    pub kind: String,
    /// Spec rendered back.
    pub spec: String,
    /// Inside its window?
    pub active: bool,
    /// What it actually touched: reclaim/idle-timeout closes, rst/hang connections, refuse
    /// windows, status/slow-headers/close-after-headers requests.
    pub hits: u64,
    /// For `reclaim`: requests caught in the gap (never answered).
    pub caught: u64,
}

impl Fault {
    pub(crate) fn new(spec: FaultSpec) -> Fault {
        Fault {
            name: spec.name(),
            gate: Gate::new(spec.common.clone()),
            spec,
            caught: AtomicU64::new(0),
        }
    }

    /// The hit counter.
    pub fn hits(&self) -> u64 {
        self.gate.hits()
    }

    pub(crate) fn status(&self) -> FaultStatus {
        FaultStatus {
            name: self.name.clone(),
            kind: self.spec.kind.name().to_string(),
            spec: self.spec.render(),
            active: self.gate.in_window(),
            hits: self.gate.hits(),
            caught: self.caught.load(Ordering::Relaxed),
        }
    }
}

impl std::fmt::Display for FaultSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.render())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_kind() {
        let f: FaultSpec = "reclaim:toxicity=0.3,delay=0ms..50ms".parse().unwrap();
        assert_eq!(f.common.toxicity, 0.3);
        assert_eq!(f.render(), "reclaim:delay=0s..50ms,toxicity=0.3");
        assert_eq!(
            "idle-timeout:2s".parse::<FaultSpec>().unwrap().kind,
            FaultKind::IdleTimeout {
                after: Duration::from_secs(2)
            }
        );
        assert_eq!(
            "status:code=503,toxicity=0.1"
                .parse::<FaultSpec>()
                .unwrap()
                .kind,
            FaultKind::Status { code: 503 }
        );
        assert_eq!(
            "status:503".parse::<FaultSpec>().unwrap().kind,
            FaultKind::Status { code: 503 }
        );
        assert!("status:99".parse::<FaultSpec>().is_err());
        assert!(
            "slow-headers"
                .parse::<FaultSpec>()
                .unwrap_err()
                .contains("slow-headers:200ms")
        );
        let r: FaultSpec = "refuse:for=2s".parse().unwrap();
        assert_eq!(r.common.window, Some(Duration::from_secs(2)));
        assert!("refuse:toxicity=0.5".parse::<FaultSpec>().is_err());
        assert!(
            "explode"
                .parse::<FaultSpec>()
                .unwrap_err()
                .contains("known")
        );
        assert!("rst:delay=1ms".parse::<FaultSpec>().is_err());
        assert_eq!(
            "close-after-headers".parse::<FaultSpec>().unwrap().name(),
            "close-after-headers"
        );
    }
}
