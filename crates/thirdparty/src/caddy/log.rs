//! Caddy's log as the lab runs it: JSON lines on its stderr. Access lines (`http.log.access`,
//! with the `upstream` and `retries` the lab appends) become the lab's nginx access log; a
//! request Caddy answered with no upstream (`no upstreams available`, 503) is logged with the
//! backend's name (`be`) as its upstream, as nginx logs `no live upstreams`. The state lines kept
//! are its lookups (`refreshing A upstreams`, `discovered A record`) and its failures
//! (`failed getting dynamic upstreams`, with the resolver's error).
//!
//! ```
//! use resolvelab_thirdparty::caddy::log::{parse, Line};
//! let l = r#"{"level":"error","ts":1796176289.7456503,"logger":"http.log.access","msg":"handled request","request":{"remote_ip":"127.0.0.1","remote_port":"35318","proto":"HTTP/1.1","method":"GET","uri":"/"},"duration":0.00086,"status":503,"retries":1,"upstream":null}"#;
//! let Some(Line::Access(a)) = parse(l) else { panic!() };
//! assert_eq!(a.lab_line(), "1796176289.745 503 \"be\" \"503\" 0.000 GET 35318 - \"-\" \"-\" \"GET / HTTP/1.1\" 127.0.0.1");
//! ```

use crate::convert::{Converted, Parsed, convert, msec, secs};
use anyhow::Result;
use serde_json::Value;
use std::path::Path;

/// One access line.
#[derive(Debug, Clone, PartialEq)]
pub struct Access {
    /// When Caddy logged it (the request's end), epoch µs.
    pub t_us: i64,
    /// The status sent.
    pub status: u16,
    /// The upstream's `host:port`, `None` when Caddy had none.
    pub upstream: Option<String>,
    /// Retries made.
    pub retries: u32,
    /// Total time, ms.
    pub duration_ms: i64,
    /// The method.
    pub method: String,
    /// The client's port: the connection's id.
    pub client_port: String,
    /// The request line.
    pub request: String,
    /// The client's address.
    pub client: String,
}

/// A line of Caddy's log.
pub type Line = crate::convert::Line<Access>;

fn text(v: &Value) -> &str {
    v.as_str().unwrap_or("")
}

/// One line; `None` for anything but requests, lookups and failures.
pub fn parse(line: &str) -> Option<Line> {
    let v: Value = serde_json::from_str(line).ok()?;
    let t_us = (v["ts"].as_f64()? * 1e6).round() as i64;
    let logger = text(&v["logger"]);
    let msg = text(&v["msg"]);
    if logger.starts_with("http.log.access") {
        let r = &v["request"];
        let upstream = Some(text(&v["upstream"])).filter(|u| !u.is_empty());
        let retries = v["retries"]
            .as_u64()
            .or_else(|| text(&v["retries"]).parse().ok())
            .unwrap_or(0);
        return Some(Line::Access(Access {
            t_us,
            status: v["status"].as_u64()? as u16,
            upstream: upstream.map(str::to_string),
            retries: retries as u32,
            duration_ms: (v["duration"].as_f64().unwrap_or(0.0) * 1000.0) as i64,
            method: text(&r["method"]).to_string(),
            client_port: text(&r["remote_port"]).to_string(),
            request: format!(
                "{} {} {}",
                text(&r["method"]),
                text(&r["uri"]),
                text(&r["proto"])
            ),
            client: text(&r["remote_ip"]).to_string(),
        }));
    }
    let message = if logger.starts_with("http.reverse_proxy.upstreams") {
        let subject = [&v["name"], &v["ip"]]
            .into_iter()
            .map(text)
            .find(|s| !s.is_empty());
        format!("{msg} {}", subject.unwrap_or(""))
    } else if logger == "http.handlers.reverse_proxy"
        && matches!(text(&v["level"]), "warn" | "error")
    {
        format!("{msg}: {}", text(&v["error"]))
    } else {
        return None;
    };
    Some(Line::State {
        t_us,
        message: message.trim_end().to_string(),
    })
}

impl Access {
    /// The line in the lab's nginx format (see `haproxy::Access::lab_line`). Caddy logs no
    /// upstream timings apart from the whole request's: the response time is the request's.
    pub fn lab_line(&self) -> String {
        let upstream = self.upstream.as_deref().unwrap_or("be");
        let urt = if self.upstream.is_some() {
            secs(self.duration_ms)
        } else {
            "-".into()
        };
        format!(
            "{} {} \"{upstream}\" \"{}\" {} {} {} - \"{urt}\" \"-\" \"{}\" {}",
            msec(self.t_us),
            self.status,
            self.status,
            secs(self.duration_ms),
            self.method,
            self.client_port,
            self.request,
            self.client,
        )
    }
}

/// Read `caddy.log` and write its access lines to `access_out` in the lab format.
pub fn to_lab(caddy_log: &Path, access_out: &Path) -> Result<Converted> {
    convert(&[caddy_log], access_out, |l| {
        Parsed::of(parse(l), Access::lab_line)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_served_request_keeps_its_upstream() {
        let l = r#"{"level":"info","ts":1796176350.0662048,"logger":"http.log.access","msg":"handled request","request":{"remote_ip":"127.0.0.1","remote_port":"47736","proto":"HTTP/1.1","method":"GET","uri":"/a"},"duration":0.006005706,"status":200,"retries":"0","upstream":"127.9.8.30:8080"}"#;
        let Some(Line::Access(a)) = parse(l) else {
            panic!()
        };
        assert_eq!(a.upstream.as_deref(), Some("127.9.8.30:8080"));
        assert_eq!(
            a.lab_line(),
            "1796176350.066 200 \"127.9.8.30:8080\" \"200\" 0.006 GET 47736 - \"0.006\" \"-\" \"GET /a HTTP/1.1\" 127.0.0.1"
        );
    }

    #[test]
    fn lookups_and_failures_are_states_and_the_rest_is_not() {
        let l = r#"{"level":"debug","ts":1796176313.9182267,"logger":"http.reverse_proxy.upstreams.a","msg":"refreshing A upstreams","version":"ip4","name":"app.test.local","port":"8080"}"#;
        assert_eq!(
            parse(l),
            Some(Line::State {
                t_us: 1_796_176_313_918_227,
                message: "refreshing A upstreams app.test.local".into()
            })
        );
        let l = r#"{"level":"error","ts":1.5,"logger":"http.handlers.reverse_proxy","msg":"failed getting dynamic upstreams; falling back to static upstreams","error":"lookup app.test.local on 10.0.0.1:53: no such host"}"#;
        let Some(Line::State { message, .. }) = parse(l) else {
            panic!()
        };
        assert!(message.ends_with(": lookup app.test.local on 10.0.0.1:53: no such host"));
        assert_eq!(
            parse(r#"{"level":"info","ts":1.0,"msg":"serving initial configuration"}"#),
            None
        );
        assert_eq!(parse("not json"), None);
    }
}
