//! Writes a large access log in one of the `--log-format` presets (and the matching error log)
//! for the diagnose benchmark: `RATE` requests a second to two peers, with outages that make
//! `FAIL` of the requests fail — by turns every peer refusing (two tries, `connect() failed
//! (111…)` lines), `no live upstreams` (1 hop) and upstream timeouts (504). A format that logs
//! `$proxy_upstream_name` is ingress-nginx's, whose Lua balancer never says `no live upstreams`:
//! there the second kind is the balancer setting no peer and nginx trying its `0.0.0.1:80`
//! placeholder (`[lua] balancer.lua … error while setting current upstream peer`, then
//! `connect() to 0.0.0.1:80 failed (22…)`, as kubernetes/ingress-nginx#4168 logged). Clients,
//! paths, user agents and sizes vary from a seeded generator, so every run writes the same bytes.
//!
//! ```text
//! cargo xtask gen-preset-log main /tmp/b/access.log 10000000 0.3 300
//! cargo xtask gen-preset-log upstreaminfo - 100000000 0.3 5000 | resolvelab watch --logs - …
//! ```

use resolvelab_history::logformat::{JSON_EXAMPLE, PRESETS};
use std::io::{BufWriter, Write};

/// xorshift64*: deterministic, fast, good enough to vary log fields.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const AGENTS: &[&str] = &[
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15",
    "curl/8.5.0",
    "okhttp/4.12.0",
    "kube-probe/1.31",
];
const PEERS: [&str; 2] = ["10.0.0.5:8080", "10.0.0.6:8080"];

/// One request's values, by variable name.
struct Req {
    t_ms: u64,
    status: u16,
    upstream_addr: String,
    upstream_status: String,
    upstream_time: String,
    upstream_len: String,
    conn: u64,
    creq: u64,
    client: String,
    path: String,
    agent: &'static str,
    bytes: u64,
    req_len: u64,
    req_time: String,
    req_id: u64,
}

impl Req {
    /// A 502 that no peer answered: one hop, `addr`, in no time.
    fn refused_at_once(&mut self, addr: &str) {
        self.status = 502;
        self.upstream_addr = addr.into();
        self.upstream_status = "502".into();
        self.upstream_time = "0.000".into();
        self.upstream_len = "0".into();
    }

    fn var(&self, name: &str, out: &mut Vec<u8>) {
        let (s, ms) = (self.t_ms / 1000, self.t_ms % 1000);
        let ts = || jiff::Timestamp::from_second(s as i64).unwrap();
        match name {
            "remote_addr" | "the_real_ip" => out.extend_from_slice(self.client.as_bytes()),
            "time_local" => out.extend_from_slice(
                ts().strftime("%d/%b/%Y:%H:%M:%S +0000")
                    .to_string()
                    .as_bytes(),
            ),
            "time_iso8601" => out.extend_from_slice(
                ts().strftime("%Y-%m-%dT%H:%M:%S+00:00")
                    .to_string()
                    .as_bytes(),
            ),
            "msec" => write!(out, "{s}.{ms:03}").unwrap(),
            "request" => write!(out, "GET {} HTTP/1.1", self.path).unwrap(),
            "request_method" => out.extend_from_slice(b"GET"),
            "request_uri" | "uri" => out.extend_from_slice(self.path.as_bytes()),
            "status" => write!(out, "{}", self.status).unwrap(),
            "body_bytes_sent" | "bytes_sent" => write!(out, "{}", self.bytes).unwrap(),
            "http_user_agent" => out.extend_from_slice(self.agent.as_bytes()),
            "request_length" => write!(out, "{}", self.req_len).unwrap(),
            "request_time" => out.extend_from_slice(self.req_time.as_bytes()),
            "proxy_upstream_name" => out.extend_from_slice(b"shop-web-8080"),
            "proxy_alternative_upstream_name" => {}
            "upstream_addr" => out.extend_from_slice(self.upstream_addr.as_bytes()),
            "upstream_status" => out.extend_from_slice(self.upstream_status.as_bytes()),
            "upstream_response_time" | "upstream_connect_time" => {
                out.extend_from_slice(self.upstream_time.as_bytes())
            }
            "upstream_response_length" => out.extend_from_slice(self.upstream_len.as_bytes()),
            "req_id" => write!(out, "{:016x}{:016x}", self.req_id, !self.req_id).unwrap(),
            "host" | "http_host" | "server_name" => out.extend_from_slice(b"shop.example.com"),
            "scheme" => out.extend_from_slice(b"https"),
            "server" => out.extend_from_slice(PEERS[0].split(':').next().unwrap().as_bytes()),
            "connection" => write!(out, "{}", self.conn).unwrap(),
            "connection_requests" => write!(out, "{}", self.creq).unwrap(),
            _ => out.push(b'-'),
        }
    }
}

/// A format text as (literal, variable) pairs (the generator fills in the values).
fn template(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut lit = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '$' {
            lit.push(c);
            continue;
        }
        let mut var = String::new();
        while let Some(&n) = chars.peek() {
            if !(n.is_ascii_alphanumeric() || n == '_') {
                break;
            }
            var.push(n);
            chars.next();
        }
        out.push((std::mem::take(&mut lit), var));
    }
    out.push((lit, String::new()));
    out
}

pub fn main(args: Vec<String>) -> anyhow::Result<()> {
    let mut args = args.into_iter().skip(1);
    let preset = args.next().unwrap_or_else(|| "main".into());
    let path = args.next().unwrap_or_else(|| "access.log".into());
    let n: u64 = args
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000_000);
    let fail: f64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(0.3);
    let rate: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(300);
    let text = PRESETS
        .iter()
        .chain(&[("json", JSON_EXAMPLE)])
        .find(|p| p.0 == preset)
        .map(|p| p.1)
        .ok_or_else(|| anyhow::anyhow!("no preset {preset}"))?;
    // `-`: access and error lines in one stream on standard output, in time order (a mixed
    // stream, as `kubectl logs` gives): the long watch benchmark pipes it, no disk held.
    let mixed = path == "-";
    let mut w: Box<dyn Write> = if mixed {
        Box::new(BufWriter::with_capacity(1 << 20, std::io::stdout().lock()))
    } else {
        Box::new(BufWriter::with_capacity(
            1 << 20,
            std::fs::File::create(&path)?,
        ))
    };
    let mut e: Box<dyn Write> = if mixed {
        Box::new(std::io::sink())
    } else {
        let err_path = std::path::Path::new(&path).with_file_name("error.log");
        Box::new(BufWriter::with_capacity(
            1 << 20,
            std::fs::File::create(err_path)?,
        ))
    };
    generate(text, n, fail, rate, mixed, &mut w, &mut e)?;
    w.flush()?;
    e.flush()?;
    Ok(())
}

/// Writes `n` requests of the format `text` to `w` and their error lines to `e` (or, `mixed`,
/// each request's error lines to `w` before its access line).
fn generate(
    text: &str,
    n: u64,
    fail: f64,
    rate: u64,
    mixed: bool,
    w: &mut dyn Write,
    e: &mut dyn Write,
) -> anyhow::Result<()> {
    let items = template(text);
    let lua_balancer = items.iter().any(|(_, v)| v == "proxy_upstream_name");
    let mut eb: Vec<u8> = Vec::with_capacity(1024);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let t0_ms: u64 = 1_796_018_400_000;
    // Outages of `fail` × 100 s at the start of every 100 s cycle.
    let down_ms = (fail * 100_000.0) as u64;
    let mut line = Vec::with_capacity(512);
    for i in 0..n {
        let t = t0_ms + i * 1000 / rate;
        let rel = t - t0_ms;
        let cycle = rel / 100_000;
        let down = rel % 100_000 < down_ms;
        let conn = 1 + rng.below(4096);
        let peer = PEERS[(i % 2) as usize];
        let mut r = Req {
            t_ms: t,
            status: 200,
            upstream_addr: peer.to_string(),
            upstream_status: "200".into(),
            upstream_time: format!("0.{:03}", 1 + rng.below(40)),
            upstream_len: format!("{}", 200 + rng.below(20_000)),
            conn,
            creq: 1 + rng.below(100),
            client: format!("10.1.{}.{}", rng.below(256), rng.below(256)),
            path: format!(
                "/api/v1/items/{}?page={}",
                rng.below(100_000),
                rng.below(20)
            ),
            agent: AGENTS[rng.below(AGENTS.len() as u64) as usize],
            bytes: 200 + rng.below(20_000),
            req_len: 300 + rng.below(900),
            req_time: String::new(),
            req_id: rng.next(),
        };
        r.req_time = r.upstream_time.clone();
        let ts = jiff::Timestamp::from_second((t / 1000) as i64)?
            .strftime("%Y/%m/%d %H:%M:%S")
            .to_string();
        let ctx = format!(
            "client: {}, server: shop.example.com, request: \"GET {} HTTP/1.1\"",
            r.client, r.path
        );
        if down {
            match cycle % 3 {
                0 => {
                    r.status = 502;
                    r.upstream_addr = format!("{}, {}", PEERS[0], PEERS[1]);
                    r.upstream_status = "502, 502".into();
                    r.upstream_time = "0.000, 0.001".into();
                    r.upstream_len = "0, 0".into();
                    for p in PEERS {
                        writeln!(
                            eb,
                            "{ts} [error] 31#31: *{conn} connect() failed (111: Connection refused) while connecting to upstream, {ctx}, upstream: \"http://{p}{}\", host: \"shop.example.com\"",
                            r.path
                        )?;
                    }
                }
                1 if lua_balancer => {
                    r.refused_at_once("0.0.0.1:80");
                    writeln!(
                        eb,
                        "{ts} [error] 31#31: *{conn} [lua] balancer.lua:240: balance(): error while setting current upstream peer shop-web.default.svc.cluster.local:8080: no host allowed while connecting to upstream, {ctx}, host: \"shop.example.com\""
                    )?;
                    writeln!(
                        eb,
                        "{ts} [crit] 31#31: *{conn} connect() to 0.0.0.1:80 failed (22: Invalid argument) while connecting to upstream, {ctx}, upstream: \"http://0.0.0.1:80{}\", host: \"shop.example.com\"",
                        r.path
                    )?;
                }
                1 => {
                    r.refused_at_once("shop_backend");
                    writeln!(
                        eb,
                        "{ts} [error] 31#31: *{conn} no live upstreams while connecting to upstream, {ctx}, upstream: \"http://shop_backend{}\", host: \"shop.example.com\"",
                        r.path
                    )?;
                }
                _ => {
                    r.status = 504;
                    r.upstream_status = "504".into();
                    r.upstream_time = "60.001".into();
                    r.upstream_len = "0".into();
                    writeln!(
                        eb,
                        "{ts} [error] 31#31: *{conn} upstream timed out (110: Connection timed out) while reading response header from upstream, {ctx}, upstream: \"http://{peer}{}\", host: \"shop.example.com\"",
                        r.path
                    )?;
                }
            }
            r.req_time = r.upstream_time.rsplit(", ").next().unwrap().to_string();
            r.bytes = 150 + rng.below(50);
        }
        line.clear();
        for (lit, var) in &items {
            line.extend_from_slice(lit.as_bytes());
            if !var.is_empty() {
                r.var(var, &mut line);
            }
        }
        line.push(b'\n');
        if mixed {
            w.write_all(&eb)?;
        } else {
            e.write_all(&eb)?;
        }
        eb.clear();
        w.write_all(&line)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use resolvelab_history::logformat::{MAIN, UPSTREAMINFO};

    /// 200 s at 10 requests a second, 30 % failing: one outage of each of the first two kinds.
    fn run(text: &str) -> (String, String) {
        let (mut w, mut e) = (Vec::new(), Vec::new());
        generate(text, 2000, 0.3, 10, false, &mut w, &mut e).unwrap();
        (String::from_utf8(w).unwrap(), String::from_utf8(e).unwrap())
    }

    #[test]
    fn ingress_nginx_outages_are_what_its_lua_balancer_logs() {
        let (access, errors) = run(UPSTREAMINFO);
        assert!(!errors.contains("no live upstreams"));
        assert!(!access.contains("shop_backend"));
        let placeholder = access
            .lines()
            .filter(|l| l.contains(" 0.0.0.1:80 "))
            .count();
        assert_eq!(
            placeholder, 300,
            "the second outage's 30 s at 10 requests a second"
        );
        assert_eq!(
            errors
                .matches("error while setting current upstream peer")
                .count(),
            300
        );
        assert_eq!(
            errors.matches("connect() to 0.0.0.1:80 failed (22").count(),
            300
        );
    }

    #[test]
    fn plain_nginx_outages_keep_no_live_upstreams() {
        let (access, errors) = run(MAIN);
        assert_eq!(access.lines().count(), 2000);
        assert_eq!(errors.matches("no live upstreams").count(), 300);
        assert!(!errors.contains("0.0.0.1"));
    }
}
