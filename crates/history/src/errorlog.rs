//! nginx error logs: `YYYY/MM/DD HH:MM:SS [level] pid#tid: *cid message, client: …, server: …,
//! request: "…", upstream: "…", host: "…"`.

use crate::{FileStats, open_maybe_gz, time};
use serde::{Deserialize, Serialize};
use std::io::BufRead;
use std::path::Path;

/// Error-log severity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[allow(missing_docs)]
pub enum Level {
    Debug,
    Info,
    Notice,
    Warn,
    Error,
    Crit,
    Alert,
    Emerg,
}

impl Level {
    fn parse(s: &str) -> Option<Level> {
        Some(match s {
            "debug" => Level::Debug,
            "info" => Level::Info,
            "notice" => Level::Notice,
            "warn" => Level::Warn,
            "error" => Level::Error,
            "crit" => Level::Crit,
            "alert" => Level::Alert,
            "emerg" => Level::Emerg,
            _ => return None,
        })
    }
}

/// One error-log line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorRecord {
    /// Index of the file in the history's file list.
    pub file: u32,
    /// 1-based line number.
    pub line: u64,
    /// The local wall-clock time read as if it were UTC (seconds); see [`ErrorRecord::t_us`].
    pub local_s: i64,
    /// Epoch µs of the start of the logged second, once the UTC offset is applied.
    pub t_us: i64,
    /// Severity.
    pub level: Level,
    /// Worker pid.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// `*cid`: the client connection id (shared by every request of a keep-alive connection).
    pub cid: Option<u64>,
    /// The message, without the context pairs (`… while connecting to upstream`).
    pub message: String,
    /// `client:` context.
    pub client: Option<String>,
    /// `server:` context.
    pub server: Option<String>,
    /// `request:` context (unquoted).
    pub request: Option<String>,
    /// `upstream:` context (unquoted).
    pub upstream: Option<String>,
    /// `host:` context (unquoted).
    pub host: Option<String>,
}

impl ErrorRecord {
    /// The upstream group named by the `upstream:` context (`http://be/` → `be`, `http://10.0.0.1:80/x` → `10.0.0.1:80`).
    pub fn upstream_host(&self) -> Option<&str> {
        let u = self.upstream.as_deref()?;
        let rest = u.split_once("://").map(|x| x.1).unwrap_or(u);
        Some(rest.split('/').next().unwrap_or(rest))
    }
}

/// Parse one error-log line. `Err` carries the reason.
pub fn parse_line(line: &str, file: u32, line_no: u64) -> Result<ErrorRecord, String> {
    let local_s = line
        .get(..19)
        .and_then(|t| time::parse_error_time(t.as_bytes()))
        .ok_or("does not start with `YYYY/MM/DD HH:MM:SS`")?;
    let rest = line[19..]
        .strip_prefix(" [")
        .ok_or("missing ` [level]` after the time")?;
    let (lvl, rest) = rest.split_once("] ").ok_or("missing `]` after the level")?;
    let level = Level::parse(lvl).ok_or_else(|| format!("unknown level `{lvl}`"))?;
    let (pidtid, rest) = rest.split_once(": ").ok_or("missing `pid#tid: `")?;
    let (pid, tid) = pidtid.split_once('#').ok_or("missing `pid#tid`")?;
    let pid = pid.parse().map_err(|_| format!("bad pid `{pid}`"))?;
    let tid = tid.parse().map_err(|_| format!("bad tid `{tid}`"))?;
    let (cid, msg) = match rest.strip_prefix('*') {
        Some(r) => {
            let end = r.find(' ').unwrap_or(r.len());
            match r[..end].parse::<u64>() {
                Ok(c) => (Some(c), r[end..].trim_start()),
                Err(_) => (None, rest),
            }
        }
        None => (None, rest),
    };
    let mut rec = ErrorRecord {
        file,
        line: line_no,
        local_s,
        t_us: local_s * 1_000_000,
        level,
        pid,
        tid,
        cid,
        message: msg.to_string(),
        client: None,
        server: None,
        request: None,
        upstream: None,
        host: None,
    };
    // The context always starts with `, client: ` (ngx_http_log_error); the message itself may
    // contain commas, so split at that marker only.
    if let Some(idx) = msg.find(", client: ") {
        rec.message = msg[..idx].to_string();
        parse_context(&msg[idx + 2..], &mut rec);
    }
    Ok(rec)
}

fn parse_context(mut s: &str, rec: &mut ErrorRecord) {
    while let Some((key, rest)) = s.split_once(": ") {
        let (value, next) = if let Some(q) = rest.strip_prefix('"') {
            // Quoted values end at `"` followed by `, ` or end of line.
            let mut end = None;
            let mut from = 0;
            while let Some(i) = q[from..].find('"') {
                let j = from + i;
                if q[j + 1..].is_empty() || q[j + 1..].starts_with(", ") {
                    end = Some(j);
                    break;
                }
                from = j + 1;
            }
            let j = end.unwrap_or(q.len());
            (&q[..j], q.get(j + 1..).unwrap_or(""))
        } else {
            match rest.find(", ") {
                Some(i) => (&rest[..i], &rest[i..]),
                None => (rest, ""),
            }
        };
        let v = Some(value.to_string());
        match key {
            "client" => rec.client = v,
            "server" => rec.server = v,
            "request" => rec.request = v,
            "upstream" => rec.upstream = v,
            "host" => rec.host = v,
            _ => {}
        }
        s = match next.strip_prefix(", ") {
            Some(n) => n,
            None => break,
        };
    }
}

/// Read a whole error log (plain or gzip). Malformed lines are counted in the stats.
pub fn read(path: &Path, file: u32) -> anyhow::Result<(Vec<ErrorRecord>, FileStats)> {
    let mut r = open_maybe_gz(path)?;
    let mut stats = FileStats::new(path, "error");
    let mut out = Vec::new();
    let mut buf = Vec::new();
    let mut n = 0u64;
    loop {
        buf.clear();
        match r.read_until(b'\n', &mut buf) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => {
                stats.error = Some(e.to_string());
                break;
            }
        }
        n += 1;
        let line = String::from_utf8_lossy(&buf);
        let line = line.trim_end_matches(['\n', '\r']);
        if line.is_empty() {
            continue;
        }
        stats.lines += 1;
        match parse_line(line, file, n) {
            Ok(rec) => {
                stats.parsed += 1;
                out.push(rec);
            }
            Err(reason) => stats.malformed(n, &reason, line),
        }
    }
    Ok((out, stats))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nlu_line_with_context() {
        let l = r#"2026/11/30 06:00:01 [error] 1234#0: *5 no live upstreams while connecting to upstream, client: 127.0.0.1, server: , request: "GET / HTTP/1.1", upstream: "http://be/", host: "127.0.0.1:8080""#;
        let r = parse_line(l, 0, 7).unwrap();
        assert_eq!(r.level, Level::Error);
        assert_eq!((r.pid, r.tid, r.cid), (1234, 0, Some(5)));
        assert_eq!(r.message, "no live upstreams while connecting to upstream");
        assert_eq!(r.client.as_deref(), Some("127.0.0.1"));
        assert_eq!(r.server.as_deref(), Some(""));
        assert_eq!(r.request.as_deref(), Some("GET / HTTP/1.1"));
        assert_eq!(r.upstream_host(), Some("be"));
        assert_eq!(r.host.as_deref(), Some("127.0.0.1:8080"));
    }

    #[test]
    fn resolver_line_without_cid_and_bad_lines() {
        let l =
            "2026/11/30 06:00:01 [error] 99#99: be.lab could not be resolved (3: Host not found)";
        let r = parse_line(l, 0, 1).unwrap();
        assert_eq!(r.cid, None);
        assert_eq!(
            r.message,
            "be.lab could not be resolved (3: Host not found)"
        );
        let w = "2026/11/30 06:00:01 [warn] 9#9: *3 upstream server temporarily disabled while reading response header from upstream, client: 127.0.0.1, server: , request: \"GET /a\"b HTTP/1.1\", upstream: \"http://127.0.0.20:8080/\", host: \"x\"";
        let r = parse_line(w, 0, 2).unwrap();
        assert_eq!(r.level, Level::Warn);
        assert_eq!(r.request.as_deref(), Some("GET /a\"b HTTP/1.1"));
        assert_eq!(r.upstream_host(), Some("127.0.0.20:8080"));
        assert!(parse_line("garbage", 0, 3).is_err());
        assert!(parse_line("2026/11/30 06:00:01 [loud] 1#0: x", 0, 4).is_err());
    }
}
