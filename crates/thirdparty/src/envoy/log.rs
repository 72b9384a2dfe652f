//! Envoy's logs as the lab runs it: the access log in our format ([`LOG_FORMAT`]), and its
//! application log (`--log-format "%Y-%m-%dT%T.%f %l %n %v"`, UTC, the `upstream` component at
//! debug), whose DNS lines are the evidence of what the cluster did with each answer: `DNS hosts
//! have changed for NAME` (the cluster's hosts were replaced, emptied by an NXDOMAIN) and
//! `DNS refresh rate reset for NAME, (failure) …` (a lookup failed; the hosts are kept).
//! [`to_lab`] writes the access lines as the lab's nginx access log: a request Envoy answered
//! without a host (`UH`: no healthy upstream, 503) is logged with the cluster's name as its
//! upstream, as nginx logs `no live upstreams`.
//!
//! ```
//! use resolvelab_thirdparty::envoy::log::Access;
//! let a = Access::parse("E 1796176321.396399 503 - UH 0 - 1 16 be 127.0.0.1:54236 \"-\" \"GET / HTTP/1.1\"").unwrap();
//! assert_eq!((a.status, a.host.as_deref(), a.flags.as_str()), (503, None, "UH"));
//! assert_eq!(a.lab_line(), "1796176321.396 503 \"be\" \"503\" 0.000 GET 16 - \"-\" \"-\" \"GET / HTTP/1.1\" 127.0.0.1");
//! ```

use crate::convert::{Converted, Parsed, convert, msec, secs};
use anyhow::Result;
use std::path::Path;

/// The access log's format: a marker, the request's start (epoch s.µs), status, the host used
/// (last try), response flags, total and response-headers time (ms), tries, the downstream
/// connection's id, the cluster, the client, the transport failure and the request line.
pub const LOG_FORMAT: &str = "E %START_TIME(%s.%6f)% %RESPONSE_CODE% %UPSTREAM_HOST% %RESPONSE_FLAGS% %DURATION% %RESPONSE_DURATION% %UPSTREAM_REQUEST_ATTEMPT_COUNT% %CONNECTION_ID% %UPSTREAM_CLUSTER% %DOWNSTREAM_REMOTE_ADDRESS% \"%UPSTREAM_TRANSPORT_FAILURE_REASON%\" \"%REQ(:METHOD)% %REQ(:PATH)% %PROTOCOL%\"";

/// One access line.
#[derive(Debug, Clone, PartialEq)]
pub struct Access {
    /// When the request began, epoch µs.
    pub start_us: i64,
    /// The status sent (0: none, the client went away first).
    pub status: u16,
    /// The host of the last try, `None` when no host was chosen.
    pub host: Option<String>,
    /// Envoy's response flags (`UH`, `UF`, `URX`, `-`).
    pub flags: String,
    /// Total time, ms.
    pub duration_ms: i64,
    /// Time to the upstream's response headers, ms (-1: none).
    pub response_ms: i64,
    /// Tries made (1 + retries).
    pub attempts: u32,
    /// The downstream connection's id.
    pub connection: String,
    /// The cluster.
    pub cluster: String,
    /// The client's address, without its port.
    pub client: String,
    /// Why the connection to the host failed, when it did.
    pub failure: Option<String>,
    /// The request line.
    pub request: String,
}

impl Access {
    /// Parse a line written with [`LOG_FORMAT`].
    pub fn parse(line: &str) -> Option<Access> {
        let rest = line.strip_prefix("E ")?;
        let (head, tail) = rest.split_once(" \"")?;
        let (failure, request) = tail.split_once("\" \"")?;
        let request = request.strip_suffix('"')?;
        let f: Vec<&str> = head.split(' ').collect();
        if f.len() != 10 {
            return None;
        }
        let ms = |s: &str| {
            if s == "-" {
                Some(-1)
            } else {
                s.parse::<i64>().ok()
            }
        };
        let (s, us) = f[0].split_once('.')?;
        let client = f[9].rsplit_once(':').map_or(f[9], |(ip, _)| ip);
        Some(Access {
            start_us: s.parse::<i64>().ok()? * 1_000_000 + us.parse::<i64>().ok()?,
            status: f[1].parse().ok()?,
            host: (f[2] != "-").then(|| f[2].to_string()),
            flags: f[3].to_string(),
            duration_ms: ms(f[4])?,
            response_ms: ms(f[5])?,
            attempts: f[6].parse().unwrap_or(0),
            connection: f[7].to_string(),
            cluster: f[8].to_string(),
            client: client.to_string(),
            failure: (failure != "-").then(|| failure.to_string()),
            request: request.to_string(),
        })
    }

    /// The status nginx would have logged for this outcome. Envoy answers its own failures
    /// to reach a host with 503 where nginx answers 502 (504 for a timeout): a host chosen
    /// and its try failed (`UF` connect failure, `UC` connection closed, `UR` reset, `URX`
    /// retries exhausted, `UO` a circuit breaker, such as the three concurrent retries Envoy
    /// allows by default) is a 502, as the checker counts failures. A request Envoy sent
    /// nothing for (0: the client left) is nginx's 499. `envoy-access.log` keeps Envoy's own.
    pub fn nginx_status(&self) -> u16 {
        let failed_try = self.host.is_some()
            && self
                .flags
                .split(',')
                .any(|f| matches!(f, "UF" | "UC" | "UR" | "URX" | "UO"));
        match self.status {
            0 => 499,
            503 if self.flags.split(',').any(|f| f == "UT") => 504,
            503 if failed_try => 502,
            s => s,
        }
    }

    /// The line in the lab's nginx format (see `haproxy::Access::lab_line`), logged at the
    /// request's end with [`Access::nginx_status`]. Envoy keeps no per-try addresses: a
    /// retried request shows its last host.
    pub fn lab_line(&self) -> String {
        let upstream = self.host.as_deref().unwrap_or(&self.cluster);
        let status = self.nginx_status();
        let method = self.request.split(' ').next().unwrap_or("-");
        format!(
            "{} {status} \"{upstream}\" \"{status}\" {} {method} {} - \"{}\" \"-\" \"{}\" {}",
            msec(self.start_us + self.duration_ms.max(0) * 1000),
            secs(self.duration_ms.max(0)),
            self.connection,
            secs(self.response_ms),
            self.request,
            self.client,
        )
    }
}

/// A DNS line of Envoy's application log: epoch µs and the message.
pub fn state(line: &str) -> Option<(i64, String)> {
    let mut it = line.splitn(4, ' ');
    let (ts, level, logger, msg) = (it.next()?, it.next()?, it.next()?, it.next()?);
    let dns = msg.starts_with("DNS hosts have changed") || msg.contains("(failure)");
    let alarm = matches!(level, "warning" | "error" | "critical")
        && !msg.starts_with("Deprecated field")
        && !msg.contains("no configured limit")
        && !msg.starts_with("caught ");
    if !(dns && logger == "upstream" || alarm) {
        return None;
    }
    // Envoy runs with TZ=UTC and writes no offset.
    let t_us = format!("{ts}Z")
        .parse::<jiff::Timestamp>()
        .ok()?
        .as_microsecond();
    Some((t_us, msg.trim_end().to_string()))
}

/// Read Envoy's application log and access log; write the access lines to `access_out` in the
/// lab format, in the order Envoy logged them.
pub fn to_lab(envoy_log: &Path, access_log: &Path, access_out: &Path) -> Result<Converted> {
    let logs: Vec<&Path> = [envoy_log, access_log]
        .into_iter()
        .filter(|p| p.exists())
        .collect();
    convert(&logs, access_out, |l| {
        if let Some(a) = Access::parse(l) {
            Parsed::Access(a.lab_line())
        } else if let Some((t, m)) = state(l) {
            Parsed::State(t, m)
        } else {
            Parsed::Other
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_served_request_ends_after_its_duration() {
        let a = Access::parse("E 1796176216.658811 200 127.9.9.20:8080 - 10 9 2 0 be 127.0.0.1:52460 \"-\" \"GET /x HTTP/1.1\"").unwrap();
        assert_eq!(a.attempts, 2);
        assert_eq!(
            a.lab_line(),
            "1796176216.668 200 \"127.9.9.20:8080\" \"200\" 0.010 GET 0 - \"0.009\" \"-\" \"GET /x HTTP/1.1\" 127.0.0.1"
        );
        let closed = Access::parse("E 1.000000 503 127.0.0.20:8080 URX,UC 20 - 2 7 be 127.0.0.1:1 \"-\" \"GET / HTTP/1.1\"").unwrap();
        assert_eq!(closed.nginx_status(), 502, "a failed try is nginx's 502");
        let none =
            Access::parse("E 1.000000 503 - UH 0 - 1 7 be 127.0.0.1:1 \"-\" \"GET / HTTP/1.1\"")
                .unwrap();
        assert_eq!(
            none.nginx_status(),
            503,
            "no host: the cluster's name says it"
        );
        let gone = Access::parse(
            "E 1.000000 0 127.0.0.20:8080 DC 3 - 1 7 be 127.0.0.1:1 \"-\" \"GET / HTTP/1.1\"",
        )
        .unwrap();
        assert!(gone.lab_line().starts_with("1.003 499 "));
    }

    #[test]
    fn dns_lines_are_kept_and_startup_noise_is_not() {
        let (t, m) = state(
            "2026-12-02T01:52:00.995866 debug upstream DNS hosts have changed for app.test.local",
        )
        .unwrap();
        assert_eq!(t, 1_796_176_320_995_866);
        assert_eq!(m, "DNS hosts have changed for app.test.local");
        assert!(state("2026-12-02T01:51:56.203885 debug upstream DNS refresh rate reset for app.test.local, (failure) refresh rate 5000 ms").is_some());
        assert!(state("2026-12-02T01:51:55.995828 debug upstream DNS refresh rate reset for app.test.local, refresh rate 5000 ms").is_none());
        assert!(state("2026-12-02T01:50:12.758411 warning misc Deprecated field: type envoy.config.cluster.v3.Cluster").is_none());
    }
}
