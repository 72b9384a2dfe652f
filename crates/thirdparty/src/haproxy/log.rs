//! HAProxy's log as the lab runs it (`log stderr format iso`, the frontend's `log-format`
//! [`LOG_FORMAT`]): access lines, and the state changes HAProxy logs beside them (a server's
//! address changed by DNS, a server going to maintenance after `hold nx`, a backend with no
//! server left). [`to_lab`] writes the access lines as the lab's nginx access log
//! ([`resolvelab_core::evidence::LAB_LOG_FORMAT`]), so the one checker reads every engine's runs:
//! a request HAProxy answered itself with no server (`<NOSRV>`, 503) is logged with the backend's
//! name as its upstream address, exactly as nginx logs `no live upstreams`.
//!
//! ```
//! use resolvelab_thirdparty::haproxy::log::{parse, Line};
//! let l = "2026-12-01T23:15:21.568735+00:00 A 503 be <NOSRV> -:- 0 -1 -1 0 GET 38008 \"GET / HTTP/1.1\" 127.0.0.1";
//! let Some(Line::Access(a)) = parse(l) else { panic!() };
//! assert_eq!((a.status, a.server.as_deref()), (503, None));
//! assert_eq!(a.lab_line(), "1796166921.568 503 \"be\" \"503\" 0.000 GET 38008 - \"-\" \"-\" \"GET / HTTP/1.1\" 127.0.0.1");
//! ```

use crate::convert::{Converted, Parsed, convert, msec, secs};
use anyhow::Result;
use std::path::Path;

/// The frontend's `log-format`: a marker, the status, backend and server, the server's address,
/// retries (`+N` when redispatched), connect / response / active time (ms, -1 when none), the
/// method, the client port (the connection's id), the request line and the client address.
pub const LOG_FORMAT: &str = "A %ST %b %s %si:%sp %rc %Tc %Tr %Ta %HM %cp %{+Q}r %ci";

/// One access line.
#[derive(Debug, Clone, PartialEq)]
pub struct Access {
    /// When HAProxy logged it (the end of the request), epoch µs.
    pub t_us: i64,
    /// The status sent to the client.
    pub status: u16,
    /// The backend.
    pub backend: String,
    /// The server, `None` for `<NOSRV>` (HAProxy found no usable server).
    pub server: Option<String>,
    /// The server's `ip:port`, when there was one.
    pub addr: Option<String>,
    /// Connection retries.
    pub retries: u32,
    /// The last retry went to another server (`option redispatch`).
    pub redispatched: bool,
    /// Time to connect to the server, ms (-1: never connected).
    pub connect_ms: i64,
    /// Time for the server's response headers, ms (-1: none).
    pub response_ms: i64,
    /// Total active time, ms.
    pub active_ms: i64,
    /// The method.
    pub method: String,
    /// The client's source port: the connection's id.
    pub client_port: String,
    /// The request line.
    pub request: String,
    /// The client's address.
    pub client: String,
}

/// A line of HAProxy's log.
pub type Line = crate::convert::Line<Access>;

/// One line of the log; `None` for HAProxy's untimed stderr notices (`[NOTICE] (pid) : …`).
pub fn parse(line: &str) -> Option<Line> {
    let (ts, rest) = line.split_once(' ')?;
    let t_us = ts.parse::<jiff::Timestamp>().ok()?.as_microsecond();
    let Some(fields) = rest.strip_prefix("A ") else {
        return Some(Line::State {
            t_us,
            message: rest.trim_end().to_string(),
        });
    };
    // The quoted request line may hold spaces: split around it.
    let (head, tail) = fields.split_once(" \"")?;
    let (request, client) = tail.rsplit_once("\" ")?;
    let f: Vec<&str> = head.split(' ').collect();
    if f.len() != 10 {
        return None;
    }
    let num = |s: &str| s.parse::<i64>().ok();
    let server = (f[2] != "<NOSRV>").then(|| f[2].to_string());
    let addr = (server.is_some() && !f[3].starts_with('-')).then(|| f[3].to_string());
    let (redispatched, retries) = match f[4].strip_prefix('+') {
        Some(n) => (true, n.parse().ok()?),
        None => (false, f[4].parse().ok()?),
    };
    Some(Line::Access(Access {
        t_us,
        status: f[0].parse().ok()?,
        backend: f[1].to_string(),
        server,
        addr,
        retries,
        redispatched,
        connect_ms: num(f[5])?,
        response_ms: num(f[6])?,
        active_ms: num(f[7])?,
        method: f[8].to_string(),
        client_port: f[9].to_string(),
        request: request.to_string(),
        client: client.trim_end().to_string(),
    }))
}

impl Access {
    /// The status nginx would have logged: HAProxy answers 503 when it could not connect to
    /// the server it chose (its `SC` termination, no connect time), where nginx answers 502;
    /// a 503 the server itself sent, or one with no server, stays 503.
    pub fn nginx_status(&self) -> u16 {
        if self.status == 503 && self.server.is_some() && self.connect_ms < 0 {
            502
        } else {
            self.status
        }
    }

    /// The line in the lab's nginx format: `$msec $status "$upstream_addr" "$upstream_status"
    /// $request_time $request_method $connection $connection_requests "$upstream_response_time"
    /// "$upstream_connect_time" "$request" $remote_addr`, with [`Access::nginx_status`] and an
    /// IPv6 server address in brackets, as nginx writes it. HAProxy keeps no per-try
    /// addresses, so a retried request shows its last server only; `$connection_requests` is
    /// unknown (`-`).
    pub fn lab_line(&self) -> String {
        let upstream = match (&self.server, &self.addr) {
            (Some(_), Some(a)) => bracketed(a),
            _ => self.backend.clone(),
        };
        let status = self.nginx_status();
        format!(
            "{} {status} \"{upstream}\" \"{status}\" {} {} {} - \"{}\" \"{}\" \"{}\" {}",
            msec(self.t_us),
            secs(self.active_ms.max(0)),
            self.method,
            self.client_port,
            secs(self.response_ms),
            secs(self.connect_ms),
            self.request,
            self.client,
        )
    }
}

/// `::1:8080` (HAProxy's `%si:%sp`) → `[::1]:8080`.
fn bracketed(addr: &str) -> String {
    match addr.rsplit_once(':') {
        Some((ip, port)) if ip.contains(':') => format!("[{ip}]:{port}"),
        _ => addr.to_string(),
    }
}

/// Read `haproxy.log` and write its access lines to `access_out` in the lab format.
pub fn to_lab(haproxy_log: &Path, access_out: &Path) -> Result<Converted> {
    convert(&[haproxy_log], access_out, |l| {
        Parsed::of(parse(l), Access::lab_line)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_served_and_retried_request_keeps_its_server_and_times() {
        let l = "2026-12-01T23:15:21.5+00:00 A 200 be s1 127.0.0.20:8080 +1 0 3 4 GET 4000 \"GET /a b HTTP/1.1\" 127.0.0.1";
        let Some(Line::Access(a)) = parse(l) else {
            panic!()
        };
        assert_eq!(a.addr.as_deref(), Some("127.0.0.20:8080"));
        assert!(a.redispatched && a.retries == 1);
        assert_eq!(a.request, "GET /a b HTTP/1.1");
        assert_eq!(
            a.lab_line(),
            "1796166921.500 200 \"127.0.0.20:8080\" \"200\" 0.004 GET 4000 - \"0.003\" \"0.000\" \"GET /a b HTTP/1.1\" 127.0.0.1"
        );
    }

    #[test]
    fn a_refused_server_is_nginx_502_and_ipv6_is_bracketed() {
        let l = "2026-12-02T00:03:07.895829+00:00 A 503 be s1 ::1:8080 3 -1 -1 3004 GET 33566 \"GET / HTTP/1.1\" 127.0.0.1";
        let Some(Line::Access(a)) = parse(l) else {
            panic!()
        };
        assert!(
            a.lab_line().contains(" 502 \"[::1]:8080\" \"502\" "),
            "{}",
            a.lab_line()
        );
        let own = "2026-12-02T00:03:07.8+00:00 A 503 be s1 127.0.0.20:8080 0 0 2 3 GET 1 \"GET / HTTP/1.1\" 127.0.0.1";
        let Some(Line::Access(a)) = parse(own) else {
            panic!()
        };
        assert_eq!(a.nginx_status(), 503, "the server's own 503");
    }

    #[test]
    fn state_lines_keep_their_time_and_notices_are_not_evidence() {
        let l = "2026-12-01T23:15:21.874796+00:00 be/s1 changed its IP from 127.0.0.20 to 127.0.0.30 by lab/lab.";
        assert_eq!(
            parse(l),
            Some(Line::State {
                t_us: 1_796_166_921_874_796,
                message: "be/s1 changed its IP from 127.0.0.20 to 127.0.0.30 by lab/lab.".into()
            })
        );
        assert_eq!(parse("[NOTICE]   (12190) : Loading success."), None);
        assert_eq!(parse("2026-12-01T23:15:21+00:00 A 200 be"), None);
    }
}
