//! The files a simulated run leaves, in the same formats as a real lab run: nginx's
//! `access.log` (the lab `log_format`) and `error.log`, and our `dns.jsonl`, `events.jsonl`,
//! `load.jsonl`, and for pool backends `backends.json` and `probes.jsonl`.

use super::config::SimConfig;
use super::engine::{Addr, BE, PoolState, Req};
use resolvelab_core::evidence::load;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::net::IpAddr;
use std::path::{Path, PathBuf};

pub(crate) struct Logs {
    access: BufWriter<File>,
    error: BufWriter<File>,
    dns: BufWriter<File>,
    events: BufWriter<File>,
    load: BufWriter<File>,
    probes: Option<BufWriter<File>>,
    dir: PathBuf,
    pid: u32,
    tz_offset_s: i64,
    client: String,
    listen: String,
    uri: String,
    /// Cached local-time prefix of the current second.
    stamp_sec: i64,
    stamp: String,
}

/// One finished request, for the access log and the load log.
pub(crate) struct AccessLine<'a> {
    pub end_us: i64,
    pub status: u16,
    pub req: &'a Req,
    pub addrs: &'a [Addr],
    pub group: &'a str,
    pub method: &'a str,
    pub uri: &'a str,
    pub bytes: u64,
    /// The answering backend's `x-backend` header, if it has a name.
    pub header: Option<&'a str>,
}

/// A `GET` sent when it was scheduled and done at `end_us` (the model's client never lags).
fn answered(arrival_us: i64, end_us: i64, seq: u64) -> load::Request {
    let lat = end_us - arrival_us;
    load::Request {
        t_us: arrival_us,
        sent_us: Some(arrival_us),
        latency_us: Some(lat),
        uncorrected_us: Some(lat),
        status: None,
        bytes: 0,
        error: None,
        conn: None,
        method: "GET".into(),
        header: None,
        seq,
        retried: false,
    }
}

fn create(dir: &Path, name: &str) -> io::Result<BufWriter<File>> {
    let path = dir.join(name);
    let f = File::create(&path)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot create {}: {e}", path.display())))?;
    Ok(BufWriter::with_capacity(1 << 18, f))
}

/// Milliseconds as nginx prints them (`1.234`).
fn ms3(ms: i64) -> String {
    format!("{}.{:03}", ms.div_euclid(1000), ms.rem_euclid(1000))
}

/// Days since 1970-01-01 → (year, month, day) (Howard Hinnant's civil_from_days).
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// nginx's error-log time: local time, one-second resolution, no offset.
pub(crate) fn error_time(t_us: i64, tz_offset_s: i64) -> String {
    let s = t_us.div_euclid(1_000_000) + tz_offset_s;
    let (y, m, d) = civil(s.div_euclid(86_400));
    let sod = s.rem_euclid(86_400);
    format!(
        "{y:04}/{m:02}/{d:02} {:02}:{:02}:{:02}",
        sod / 3600,
        (sod / 60) % 60,
        sod % 60
    )
}

impl Logs {
    pub(crate) fn create(dir: &Path, cfg: &SimConfig) -> io::Result<Logs> {
        let mut l = Logs {
            access: create(dir, resolvelab_core::evidence::file::ACCESS_LOG)?,
            error: create(dir, resolvelab_core::evidence::file::ERROR_LOG)?,
            dns: create(dir, resolvelab_core::evidence::file::DNS)?,
            events: create(dir, resolvelab_core::evidence::file::EVENTS)?,
            load: create(dir, resolvelab_core::evidence::file::LOAD)?,
            probes: if cfg.pools.iter().any(|p| p.probe.is_some()) {
                Some(create(dir, resolvelab_core::evidence::file::PROBES)?)
            } else {
                None
            },
            dir: dir.to_path_buf(),
            pid: cfg.pid,
            tz_offset_s: cfg.tz_offset_s as i64,
            client: "127.0.0.1".into(),
            listen: cfg.listen.clone(),
            uri: cfg.uri.clone(),
            stamp_sec: i64::MIN,
            stamp: String::new(),
        };
        writeln!(
            l.dns,
            r#"{{"schema":"{}","engine":"sim"}}"#,
            resolvelab_core::evidence::schema::DNS
        )?;
        writeln!(
            l.events,
            r#"{{"schema":"{}","engine":"sim"}}"#,
            resolvelab_core::evidence::schema::EVENTS
        )?;
        if let Some(p) = &mut l.probes {
            writeln!(
                p,
                r#"{{"schema":"{}","engine":"sim"}}"#,
                resolvelab_core::evidence::schema::PROBES
            )?;
        }
        let plan = if cfg.arrivals.is_empty() {
            format!("{}", cfg.rps)
        } else {
            format!("{} scheduled requests", cfg.arrivals.len())
        };
        let header = load::Header {
            schema: resolvelab_core::evidence::schema::LOAD.into(),
            target: format!("http://{}{}", cfg.listen, cfg.uri),
            plan,
            start_us: cfg.epoch_us,
            seed: cfg.seed,
            connections: cfg.client_connections as usize,
            header_capture: (!cfg.names.is_empty()).then(|| "x-backend".into()),
            engine: Some("sim".into()),
        };
        serde_json::to_writer(&mut l.load, &header)?;
        writeln!(l.load)?;
        Ok(l)
    }

    fn stamp(&mut self, t_us: i64) -> &str {
        let sec = t_us.div_euclid(1_000_000);
        if sec != self.stamp_sec {
            self.stamp_sec = sec;
            self.stamp = error_time(t_us, self.tz_offset_s);
        }
        &self.stamp
    }

    /// A line without request context (resolver, zone).
    pub(crate) fn error_plain(&mut self, t_us: i64, level: &str, msg: &str) -> io::Result<()> {
        let pid = self.pid;
        let stamp = self.stamp(t_us).to_string();
        writeln!(self.error, "{stamp} [{level}] {pid}#0: {msg}")
    }

    /// A line in a request's context (`*cid … client: …, upstream: …`).
    pub(crate) fn error_req(
        &mut self,
        t_us: i64,
        level: &str,
        req: &Req,
        methods: &[String],
        msg: &str,
        upstream: Option<&str>,
    ) -> io::Result<()> {
        // Each worker process logs under its own pid.
        let pid = self.pid + req.worker as u32;
        let stamp = self.stamp(t_us).to_string();
        // A request that never reached an upstream (its own resolution failed) has none.
        let upstream = upstream
            .map(|u| format!(", upstream: \"http://{u}{}\"", self.uri))
            .unwrap_or_default();
        writeln!(
            self.error,
            "{stamp} [{level}] {pid}#0: *{cid} {msg}, client: {client}, server: , request: \"{m} {uri} HTTP/1.1\"{upstream}, host: \"{host}\"",
            cid = req.conn,
            client = self.client,
            m = methods[req.method as usize],
            uri = self.uri,
            host = self.listen,
        )
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn dns(
        &mut self,
        t_us: i64,
        client_port: u16,
        qname: &str,
        qtype: &str,
        id: u16,
        mode: &str,
        rcode: &str,
        answers: &[IpAddr],
        ttl: i64,
        changed: bool,
        injected: bool,
        tcp: bool,
        truncated: bool,
    ) -> io::Result<()> {
        use resolvelab_core::evidence::{DnsQuery, Transport};
        let q = DnsQuery {
            t_us,
            client: std::net::SocketAddr::from(([127, 0, 0, 1], client_port)),
            qname: qname.to_string(),
            qtype: qtype.to_string(),
            transport: if tcp { Transport::Tcp } else { Transport::Udp },
            id,
            mode: mode.to_string(),
            rcode: rcode.to_string(),
            answers: answers.to_vec(),
            ttl: ttl.clamp(0, u32::MAX as i64) as u32,
            changed,
            injected,
            // Like the lab authority: the flag only on a truncated UDP answer.
            truncated,
            ..DnsQuery::default()
        };
        serde_json::to_writer(&mut self.dns, &q)?;
        writeln!(self.dns)
    }

    pub(crate) fn event(
        &mut self,
        t_us: i64,
        kind: &str,
        target: &str,
        spec: &str,
        hits: Option<u64>,
    ) -> io::Result<()> {
        let e = resolvelab_core::evidence::Event {
            hits,
            ..resolvelab_core::evidence::Event::new(t_us, kind, target).spec(spec)
        };
        serde_json::to_writer(&mut self.events, &e)?;
        writeln!(self.events)
    }

    /// An event with a remark (`note`).
    pub(crate) fn event_noted(
        &mut self,
        t_us: i64,
        kind: &str,
        target: &str,
        spec: &str,
        note: &str,
    ) -> io::Result<()> {
        let e = resolvelab_core::evidence::Event {
            note: Some(note.to_string()),
            ..resolvelab_core::evidence::Event::new(t_us, kind, target).spec(spec)
        };
        serde_json::to_writer(&mut self.events, &e)?;
        writeln!(self.events)
    }

    pub(crate) fn access(&mut self, a: AccessLine<'_>) -> io::Result<()> {
        let q = a.req;
        let mut addr = String::new();
        let mut status = String::new();
        let mut rt = String::new();
        let mut ct = String::new();
        for (i, h) in q.hops.iter().enumerate() {
            if i > 0 {
                let sep = if h.pass_start { " : " } else { ", " };
                for s in [&mut addr, &mut status, &mut rt, &mut ct] {
                    s.push_str(sep);
                }
            }
            if h.addr == BE {
                addr.push_str(a.group);
                rt.push_str("0.000");
                ct.push('-');
            } else {
                addr.push_str(&a.addrs[h.addr as usize].text);
                rt.push_str(&ms3(h.end_us / 1000 - h.start_us / 1000));
                if h.connected {
                    ct.push_str("0.000");
                } else {
                    ct.push('-');
                }
            }
            status.push_str(&h.status.to_string());
        }
        if q.hops.is_empty() {
            for s in [&mut addr, &mut status, &mut rt, &mut ct] {
                s.push('-');
            }
        }
        let request_ms = a.end_us / 1000 - q.arrival_us / 1000;
        writeln!(
            self.access,
            "{} {} \"{addr}\" \"{status}\" {} {} {} {} \"{rt}\" \"{ct}\" \"{} {} HTTP/1.1\" {}",
            ms3(a.end_us / 1000),
            a.status,
            ms3(request_ms),
            a.method,
            q.conn,
            q.conn_requests,
            a.method,
            a.uri,
            self.client,
        )?;
        self.load_line(load::Request {
            status: Some(a.status),
            bytes: a.bytes,
            conn: Some(q.conn),
            method: a.method.to_string().into(),
            header: a.header.map(str::to_string),
            ..answered(q.arrival_us, a.end_us, q.seq)
        })
    }

    /// One line of `load.jsonl`, as the lab's load generator writes it.
    fn load_line(&mut self, r: load::Request) -> io::Result<()> {
        serde_json::to_writer(&mut self.load, &r)?;
        writeln!(self.load)
    }

    /// A request of a proxy model (`crate::proxies`): one try or none, its access line in the
    /// lab format (the upstream's name for a request with no server) and its load line.
    pub(crate) fn access_simple(
        &mut self,
        arrival_us: i64,
        end_us: i64,
        status: u16,
        upstream: &str,
        seq: u64,
        tried: bool,
    ) -> io::Result<()> {
        let rt = ms3(end_us / 1000 - arrival_us / 1000);
        let urt = if tried { rt.clone() } else { "-".into() };
        let conn = seq % 64 + 1;
        writeln!(
            self.access,
            "{} {status} \"{upstream}\" \"{status}\" {rt} GET {conn} - \"{urt}\" \"-\" \"GET {} HTTP/1.1\" {}",
            ms3(end_us / 1000),
            self.uri,
            self.client,
        )?;
        self.load_line(load::Request {
            status: Some(status),
            conn: Some(conn),
            ..answered(arrival_us, end_us, seq)
        })
    }

    /// A request whose client connection the proxy closed without an answer (nothing in its
    /// access log): only the load generator's line, as the lab's load writes it.
    pub(crate) fn load_closed(&mut self, arrival_us: i64, end_us: i64, seq: u64) -> io::Result<()> {
        self.load_line(load::Request {
            error: Some(load::ErrorKind::Closed),
            conn: Some(seq % 64 + 1),
            ..answered(arrival_us, end_us, seq)
        })
    }

    /// A request whose connect was refused (nginx down): only the load generator's line.
    pub(crate) fn load_refused(&mut self, t_us: i64, seq: u64) -> io::Result<()> {
        self.load_line(load::Request {
            error: Some(load::ErrorKind::ConnectRefused),
            ..answered(t_us, t_us, seq)
        })
    }

    /// A proxy's own state line as a `proxy-state` event.
    pub(crate) fn proxy_state(&mut self, t_us: i64, proxy: &str, note: &str) -> io::Result<()> {
        let e = resolvelab_core::evidence::Event::new(
            t_us,
            resolvelab_core::evidence::event_kind::PROXY_STATE,
            proxy,
        )
        .note(note);
        serde_json::to_writer(&mut self.events, &e)?;
        writeln!(self.events)
    }

    /// One readiness probe (`probes.jsonl`, the lab prober's format).
    pub(crate) fn probe(
        &mut self,
        t_us: i64,
        target: &str,
        path: &str,
        ok: bool,
        latency_us: i64,
    ) -> io::Result<()> {
        if let Some(p) = &mut self.probes {
            let v = serde_json::json!({
                "t_us": t_us,
                "sent_us": t_us,
                "target": target,
                "path": path,
                "ok": ok,
                "status": if ok { Some(200) } else { None },
                "latency_us": latency_us,
                "error": if ok { None } else { Some("timeout") },
            });
            writeln!(p, "{v}")?;
        }
        Ok(())
    }

    /// `backends.json`: each pool backend's pool statistics, as the lab backends report them.
    pub(crate) fn backends_json(&mut self, cfg: &SimConfig, pools: &[PoolState]) -> io::Result<()> {
        if pools.is_empty() {
            return Ok(());
        }
        let mut out = serde_json::Map::new();
        for (pc, st) in cfg.pools.iter().zip(pools) {
            let mut w = st.waits.clone();
            w.sort_unstable();
            let q = |f: f64| {
                w.get(((w.len() as f64 * f).ceil() as usize).saturating_sub(1))
                    .copied()
                    .unwrap_or(0)
            };
            out.insert(
                pc.name.clone(),
                serde_json::json!({
                    "name": pc.name,
                    "listen": pc.target,
                    "engine": "sim",
                    "pool": {
                        "size": pc.pool,
                        "acquired": w.len(),
                        "timeouts": st.timeouts,
                        "opened": st.opened,
                        "wait_us_p50": q(0.5),
                        "wait_us_p90": q(0.9),
                        "wait_us_p99": q(0.99),
                        "wait_us_max": w.last().copied().unwrap_or(0),
                    },
                }),
            );
        }
        let text = serde_json::to_string_pretty(&serde_json::Value::Object(out))
            .map_err(io::Error::other)?;
        std::fs::write(
            self.dir.join(resolvelab_core::evidence::file::BACKENDS),
            text + "\n",
        )
    }

    pub(crate) fn flush(&mut self) -> io::Result<()> {
        if let Some(p) = &mut self.probes {
            p.flush()?;
        }
        for w in [
            &mut self.access,
            &mut self.error,
            &mut self.dns,
            &mut self.events,
            &mut self.load,
        ] {
            w.flush()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_time_is_local_calendar_time() {
        // 2026-11-30T06:00:01Z
        let t = 1_796_018_401_000_000;
        assert_eq!(error_time(t, 0), "2026/11/30 06:00:01");
        assert_eq!(error_time(t, 9 * 3600), "2026/11/30 15:00:01");
        assert_eq!(
            error_time(t + 18 * 3600 * 1_000_000, 0),
            "2026/12/01 00:00:01"
        );
        assert_eq!(error_time(0, 0), "1970/01/01 00:00:00");
        assert_eq!(error_time(951_782_400_000_000, 0), "2000/02/29 00:00:00");
    }

    #[test]
    fn ms3_formats_like_msec() {
        assert_eq!(ms3(1_796_018_401_123), "1796018401.123");
        assert_eq!(ms3(5), "0.005");
    }
}
