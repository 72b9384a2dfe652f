//! `load.jsonl` ([`super::schema::LOAD`]): one line per request of the load generator, after
//! a [`Header`] line. The one type of its writers (`resolvelab load`, the model) and its reader
//! (`history`, the checker's client view).
//!
//! ```
//! use resolvelab_core::evidence::load::{ErrorKind, Request};
//! let r: Request = serde_json::from_str(r#"{"t_us":5,"status":null,"error":"closed"}"#).unwrap();
//! assert_eq!((r.error, r.bytes, r.class()), (Some(ErrorKind::Closed), 0, 5));
//! // An error kind this version does not know is read as `other`, not refused.
//! let r: Request = serde_json::from_str(r#"{"t_us":5,"error":"tls"}"#).unwrap();
//! assert_eq!(r.error, Some(ErrorKind::Other));
//! ```

use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::fmt;

/// Why a request has no (complete) response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ErrorKind {
    /// The TCP connect was refused (nothing listening).
    ConnectRefused,
    /// The peer reset the connection.
    Reset,
    /// No complete response within `--timeout` of the send.
    Timeout,
    /// The peer closed the connection before a complete response.
    Closed,
    /// Never sent: it waited for a connection longer than `--timeout` past its scheduled time.
    Late,
    /// Never sent: the in-flight cap was full at its scheduled time.
    Dropped,
    /// Anything else (including requests still in flight when the run was cancelled, and a
    /// kind a reader does not know).
    #[serde(other)]
    Other,
}

impl ErrorKind {
    /// Every kind, in report order.
    pub const ALL: [ErrorKind; 7] = [
        ErrorKind::ConnectRefused,
        ErrorKind::Reset,
        ErrorKind::Timeout,
        ErrorKind::Closed,
        ErrorKind::Late,
        ErrorKind::Dropped,
        ErrorKind::Other,
    ];

    /// The stable id used in JSON and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::ConnectRefused => "connect-refused",
            ErrorKind::Reset => "reset",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Closed => "closed",
            ErrorKind::Late => "late",
            ErrorKind::Dropped => "dropped",
            ErrorKind::Other => "other",
        }
    }

    /// Index into [`ErrorKind::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One request, as written to the result file. Times are epoch microseconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Request {
    /// Scheduled time (for `--rate max`: the send time, there is no schedule).
    pub t_us: i64,
    /// When the request actually started (connect or write); `null` if it was never sent.
    pub sent_us: Option<i64>,
    /// Corrected latency: done − scheduled; `null` if never sent.
    pub latency_us: Option<i64>,
    /// Uncorrected latency: done − sent; `null` if never sent.
    pub uncorrected_us: Option<i64>,
    /// HTTP status, `null` without a complete response.
    pub status: Option<u16>,
    /// Response body bytes received.
    #[serde(default)]
    pub bytes: u64,
    /// Error kind, `null` on a complete response (whatever its status).
    pub error: Option<ErrorKind>,
    /// Connection id (unique within the run); `null` if no connection was used.
    pub conn: Option<u64>,
    /// Request method (borrowed for the standard methods: no allocation per request).
    #[serde(default)]
    pub method: Cow<'static, str>,
    /// Value of the `--header-capture` response header, if asked for and present.
    pub header: Option<String>,
    /// Position in the schedule (0-based); records are written in completion order.
    #[serde(default)]
    pub seq: u64,
    /// Sent a second time, on a new connection, after a reused keep-alive connection closed
    /// before any response byte (`--retry-idempotent`: what browsers, curl and Go's client do
    /// for an idempotent request). Left out when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub retried: bool,
}

impl Request {
    /// Status class index: 0..=4 for 1xx..5xx, 5 for an error (no status).
    pub fn class(&self) -> usize {
        match (self.status, self.error) {
            (Some(s), None) if (100..600).contains(&s) => (s / 100 - 1) as usize,
            _ => 5,
        }
    }
}

/// The first line of a result file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Header {
    /// Always [`super::schema::LOAD`].
    pub schema: String,
    /// Target URL.
    #[serde(default)]
    pub target: String,
    /// The `--rate` plan as given (`max` for closed loop).
    #[serde(default)]
    pub plan: String,
    /// Epoch µs of the schedule origin.
    #[serde(default)]
    pub start_us: i64,
    /// RNG seed (method mix).
    #[serde(default)]
    pub seed: u64,
    /// Keep-alive pool size (0 with `--no-keepalive`).
    #[serde(default)]
    pub connections: usize,
    /// Name of the captured response header, if any.
    #[serde(default)]
    pub header_capture: Option<String>,
    /// The engine that wrote the file when it is not the load generator (`sim`: the model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<String>,
}
