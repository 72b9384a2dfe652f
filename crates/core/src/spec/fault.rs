//! Faults: the common keys every fault takes (`toxicity`, `for`, `seed`, `name`) and the
//! backend's fault kinds. The proxy's kinds are in [`super::toxic`]. The backend and the proxy
//! implement what a fault does; the model maps the same values onto its own.
//!
//! ```
//! use resolvelab_core::spec::fault::{BackendFault, BackendFaultKind};
//! let f: BackendFault = "reclaim:toxicity=0.3,delay=0ms..50ms".parse().unwrap();
//! assert_eq!(f.common.toxicity, 0.3);
//! assert!(matches!(f.kind, BackendFaultKind::Reclaim { .. }));
//! assert_eq!("reset".parse::<BackendFault>().unwrap().kind, BackendFaultKind::Rst);
//! ```

use super::Spec;
use crate::dur;
use std::str::FromStr;
use std::time::Duration;

/// Keys every fault accepts besides its own.
pub const COMMON_KEYS: &[&str] = &["toxicity", "for", "seed", "name"];

/// The parsed common keys of a fault spec.
#[derive(Debug, Clone, PartialEq)]
pub struct Common {
    /// Name used by the control API and counters (default: derived from the kind).
    pub name: Option<String>,
    /// Probability (0–1) that the fault applies to one decision point (connection or request).
    pub toxicity: f64,
    /// Optional window: the fault is active for this long after it was added, then inert.
    pub window: Option<Duration>,
    /// Seed of the fault's ChaCha8 random stream.
    pub seed: u64,
}

impl Common {
    /// Read the common keys of `spec`, rejecting any key outside `COMMON_KEYS` and `own`.
    pub fn from_spec(spec: &Spec, own: &[&str]) -> Result<Common, String> {
        let mut allowed: Vec<&str> = COMMON_KEYS.to_vec();
        allowed.extend_from_slice(own);
        spec.only(&allowed)?;
        let toxicity = match spec.get("toxicity") {
            None => 1.0,
            Some(t) => {
                let v: f64 = t.parse().map_err(|_| {
                    format!(
                        "`{}`: toxicity `{t}` is not a number (write e.g. toxicity=0.3)",
                        spec.kind
                    )
                })?;
                if !(0.0..=1.0).contains(&v) {
                    return Err(format!(
                        "`{}`: toxicity {t} is outside 0..1 (it is a probability)",
                        spec.kind
                    ));
                }
                v
            }
        };
        let window = spec
            .get("for")
            .map(|w| dur::parse(w).map_err(|e| format!("`{}`: for={w}: {e}", spec.kind)))
            .transpose()?;
        let seed = match spec.get("seed") {
            None => default_seed(&spec.kind),
            Some(s) => s
                .parse()
                .map_err(|_| format!("`{}`: seed `{s}` is not an unsigned integer", spec.kind))?,
        };
        Ok(Common {
            name: spec.get("name").map(str::to_string),
            toxicity,
            window,
            seed,
        })
    }

    /// Render the common keys that differ from the defaults, as `key=value` pairs.
    pub fn render(&self, kind: &str) -> Vec<String> {
        let mut out = Vec::new();
        if self.toxicity != 1.0 {
            out.push(format!("toxicity={}", self.toxicity));
        }
        if let Some(w) = self.window {
            out.push(format!("for={}", dur::format(w)));
        }
        if self.seed != default_seed(kind) {
            out.push(format!("seed={}", self.seed));
        }
        if let Some(n) = &self.name {
            out.push(format!("name={n}"));
        }
        out
    }
}

/// A fixed seed per kind, so that a spec without `seed=` is still reproducible.
pub fn default_seed(kind: &str) -> u64 {
    // FNV-1a: stable across Rust versions, unlike `DefaultHasher`.
    kind.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Parse a required or defaulted duration key.
pub fn dur_key(spec: &Spec, key: &str, default: Option<Duration>) -> Result<Duration, String> {
    match spec.get(key) {
        Some(v) => crate::dur::parse(v).map_err(|e| format!("`{}`: {key}={v}: {e}", spec.kind)),
        None => default.ok_or_else(|| {
            format!(
                "`{}` needs `{key}=DURATION`, e.g. `{}:{key}=200ms`",
                spec.kind, spec.kind
            )
        }),
    }
}

/// Parse a required or defaulted unsigned integer key.
pub fn u64_key(spec: &Spec, key: &str, default: Option<u64>) -> Result<u64, String> {
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

/// What a fault does.
#[derive(Debug, Clone, PartialEq)]
pub enum BackendFaultKind {
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
    /// A restart or a deleted pod: refuse new connections while active, as `refuse` does, and
    /// reset (RST) every established connection when the window opens — which `refuse` leaves
    /// alone, so a proxy's pooled connections would otherwise keep working.
    Restart,
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
pub const BACKEND_KINDS: &[(&str, &str)] = &[
    ("reclaim", "delay=LO..HI (default 0ms..50ms)"),
    ("idle-timeout", "DUR or after=DUR"),
    ("rst", ""),
    ("refuse", "(listener; no toxicity)"),
    (
        "restart",
        "(listener + resets established connections; no toxicity)",
    ),
    ("hang", ""),
    ("close-after-headers", ""),
    ("status", "CODE or code=CODE"),
    ("slow-headers", "DUR or delay=DUR"),
];

impl BackendFaultKind {
    /// The kind as written in specs.
    pub fn name(&self) -> &'static str {
        match self {
            BackendFaultKind::Reclaim { .. } => "reclaim",
            BackendFaultKind::IdleTimeout { .. } => "idle-timeout",
            BackendFaultKind::Rst => "rst",
            BackendFaultKind::Refuse => "refuse",
            BackendFaultKind::Restart => "restart",
            BackendFaultKind::Hang => "hang",
            BackendFaultKind::CloseAfterHeaders => "close-after-headers",
            BackendFaultKind::Status { .. } => "status",
            BackendFaultKind::SlowHeaders { .. } => "slow-headers",
        }
    }
}

/// A parsed backend fault: `"reclaim:toxicity=0.3,delay=0ms..50ms".parse::<BackendFault>()`.
#[derive(Debug, Clone, PartialEq)]
pub struct BackendFault {
    /// What it does.
    pub kind: BackendFaultKind,
    /// Name, toxicity, window and seed.
    pub common: Common,
}

impl BackendFault {
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
            BackendFaultKind::Reclaim { delay } => vec![format!(
                "delay={}..{}",
                dur::format(delay.lo),
                dur::format(delay.hi)
            )],
            BackendFaultKind::IdleTimeout { after } => {
                vec![format!("after={}", dur::format(*after))]
            }
            BackendFaultKind::Status { code } => vec![format!("code={code}")],
            BackendFaultKind::SlowHeaders { delay } => {
                vec![format!("delay={}", dur::format(*delay))]
            }
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

/// A fault for one of a scenario's targets: a backend's own, or a TCP proxy's (a toxic). Which
/// vocabulary a spec is read in is the target's, so the kind says where it can go.
#[derive(Debug, Clone, PartialEq)]
pub enum Fault {
    /// For a backend.
    Backend(BackendFault),
    /// For a TCP fault proxy.
    Proxy(super::toxic::ToxicSpec),
}

impl Fault {
    /// Read `spec` as a proxy's toxic (`proxy`) or as a backend's fault.
    pub fn parse(spec: &str, proxy: bool) -> Result<Fault, String> {
        Ok(if proxy {
            Fault::Proxy(spec.parse()?)
        } else {
            Fault::Backend(spec.parse()?)
        })
    }

    /// Active for `len` after it is added (a timeline event's `for`), unless the spec gives
    /// its own `for`.
    pub fn lasting(mut self, len: Option<Duration>) -> Fault {
        let common = match &mut self {
            Fault::Backend(f) => &mut f.common,
            Fault::Proxy(t) => &mut t.common,
        };
        if common.window.is_none() {
            common.window = len;
        }
        self
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

impl FromStr for BackendFault {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let spec = Spec::parse(s)?;
        let kind_name = spec.kind.replace('_', "-");
        let (kind, own): (BackendFaultKind, &[&str]) = match kind_name.as_str() {
            "reclaim" => {
                let delay = match spec.get("delay").or_else(|| spec.get("")) {
                    Some(d) => {
                        dur::Range::parse(d).map_err(|e| format!("`reclaim`: delay: {e}"))?
                    }
                    None => dur::Range::parse("0ms..50ms").expect("constant range"),
                };
                (BackendFaultKind::Reclaim { delay }, &["delay", ""])
            }
            "idle-timeout" => (
                BackendFaultKind::IdleTimeout {
                    after: dur_of(&spec, "after")?,
                },
                &["after", ""],
            ),
            "rst" | "reset" => (BackendFaultKind::Rst, &[]),
            "refuse" => (BackendFaultKind::Refuse, &[]),
            "restart" => (BackendFaultKind::Restart, &[]),
            "hang" => (BackendFaultKind::Hang, &[]),
            "close-after-headers" => (BackendFaultKind::CloseAfterHeaders, &[]),
            "status" => {
                let v = positional_or(&spec, "code").ok_or_else(|| {
                    "`status` needs a code: write `status:503` or `status:code=503`".to_string()
                })?;
                let code: u16 = v
                    .parse()
                    .ok()
                    .filter(|c| (100..=599).contains(c))
                    .ok_or_else(|| format!("`status`: `{v}` is not an HTTP status (100–599)"))?;
                (BackendFaultKind::Status { code }, &["code", ""])
            }
            "slow-headers" => (
                BackendFaultKind::SlowHeaders {
                    delay: dur_of(&spec, "delay")?,
                },
                &["delay", ""],
            ),
            other => {
                let known: Vec<&str> = BACKEND_KINDS.iter().map(|k| k.0).collect();
                return Err(format!(
                    "unknown backend fault `{other}`; known: {}",
                    known.join(", ")
                ));
            }
        };
        let common = Common::from_spec(&spec, own)?;
        if matches!(kind, BackendFaultKind::Refuse | BackendFaultKind::Restart)
            && common.toxicity < 1.0
        {
            return Err(format!(
                "`{s}`: `{}` closes the listening socket and takes no toxicity; for \
                 probabilistic failures use `rst:toxicity=P`",
                kind.name()
            ));
        }
        Ok(BackendFault { kind, common })
    }
}

impl std::fmt::Display for BackendFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.render())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_keys() {
        let s = Spec::parse("reclaim:toxicity=0.3,for=2s,seed=7,delay=0..50ms").unwrap();
        let c = Common::from_spec(&s, &["delay"]).unwrap();
        assert_eq!(c.toxicity, 0.3);
        assert_eq!(c.window, Some(Duration::from_secs(2)));
        assert_eq!(c.seed, 7);
        assert!(Common::from_spec(&s, &[]).unwrap_err().contains("delay"));
        let bad = Spec::parse("rst:toxicity=1.5").unwrap();
        assert!(
            Common::from_spec(&bad, &[])
                .unwrap_err()
                .contains("outside 0..1")
        );
    }

    #[test]
    fn parses_every_kind() {
        let f: BackendFault = "reclaim:toxicity=0.3,delay=0ms..50ms".parse().unwrap();
        assert_eq!(f.common.toxicity, 0.3);
        assert_eq!(f.render(), "reclaim:delay=0s..50ms,toxicity=0.3");
        assert_eq!(
            "idle-timeout:2s".parse::<BackendFault>().unwrap().kind,
            BackendFaultKind::IdleTimeout {
                after: Duration::from_secs(2)
            }
        );
        assert_eq!(
            "status:code=503,toxicity=0.1"
                .parse::<BackendFault>()
                .unwrap()
                .kind,
            BackendFaultKind::Status { code: 503 }
        );
        assert_eq!(
            "status:503".parse::<BackendFault>().unwrap().kind,
            BackendFaultKind::Status { code: 503 }
        );
        assert!("status:99".parse::<BackendFault>().is_err());
        assert!(
            "slow-headers"
                .parse::<BackendFault>()
                .unwrap_err()
                .contains("slow-headers:200ms")
        );
        let r: BackendFault = "refuse:for=2s".parse().unwrap();
        assert_eq!(r.common.window, Some(Duration::from_secs(2)));
        assert!("refuse:toxicity=0.5".parse::<BackendFault>().is_err());
        assert!(
            "explode"
                .parse::<BackendFault>()
                .unwrap_err()
                .contains("known")
        );
        assert!("rst:delay=1ms".parse::<BackendFault>().is_err());
        assert_eq!(
            "close-after-headers"
                .parse::<BackendFault>()
                .unwrap()
                .name(),
            "close-after-headers"
        );
    }
}
