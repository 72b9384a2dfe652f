//! Writes the synthetic diagnose fixtures (tests/fixtures/diagnose/synthetic/*): small lab-run
//! directories and a production-shaped log set that follow the real formats byte for byte (the lab
//! `log_format`, nginx's error-log line, our JSONL schemas). Deterministic: no RNG, no clock.
//!
//! ```text
//! cargo xtask make-fixtures tests/fixtures/diagnose/synthetic
//! ```

use serde_json::json;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

/// 2026-11-30T06:00:00Z.
const T0_MS: i64 = 1_796_018_400_000;
const A: &str = "127.0.0.20:8080";
const B: &str = "127.0.0.30:8080";
const LAB_FORMAT: &str = resolvelab_core::evidence::LAB_LOG_FORMAT;

struct Run {
    access: String,
    error: String,
    dns: String,
    events: String,
    load: String,
    tz_s: i64,
    creq: std::collections::HashMap<u64, u64>,
}

impl Run {
    fn new(tz_s: i64) -> Run {
        Run {
            access: String::new(),
            error: String::new(),
            dns: "{\"schema\":\"resolvelab.dns/v1\"}\n".into(),
            events: "{\"schema\":\"resolvelab.events/v1\"}\n".into(),
            load: "{\"schema\":\"resolvelab.load/v1\"}\n".into(),
            tz_s,
            creq: Default::default(),
        }
    }

    /// One access line in the lab format.
    #[allow(clippy::too_many_arguments)]
    fn acc(
        &mut self,
        t_ms: i64,
        status: u16,
        ua: &str,
        us: &str,
        rt_ms: i64,
        conn: u64,
        path: &str,
        urt: &str,
        uct: &str,
    ) {
        let n = self.creq.entry(conn).or_insert(0);
        *n += 1;
        let _ = writeln!(
            self.access,
            "{}.{:03} {status} \"{ua}\" \"{us}\" {}.{:03} GET {conn} {n} \"{urt}\" \"{uct}\" \"GET {path} HTTP/1.1\" 127.0.0.1",
            t_ms / 1000,
            t_ms % 1000,
            rt_ms / 1000,
            rt_ms % 1000
        );
        let sched = (t_ms - rt_ms) * 1000;
        let _ = writeln!(
            self.load,
            "{}",
            json!({"t_us": sched, "sent_us": sched, "latency_us": rt_ms * 1000 + 300, "uncorrected_us": rt_ms * 1000 + 300,
                   "status": status, "bytes": if status == 200 { 612 } else { 157 }, "error": null, "conn": conn % 16, "method": "GET", "header": null})
        );
    }

    fn local(&self, t_ms: i64) -> String {
        let s = t_ms.div_euclid(1000) + self.tz_s;
        let ts = jiff::Timestamp::from_second(s).unwrap();
        ts.strftime("%Y/%m/%d %H:%M:%S").to_string()
    }

    /// One error line, nginx's format.
    fn err(
        &mut self,
        t_ms: i64,
        level: &str,
        cid: Option<u64>,
        msg: &str,
        ctx: Option<(&str, &str)>,
    ) {
        let mut l = format!("{} [{level}] 4242#4242: ", self.local(t_ms));
        if let Some(c) = cid {
            let _ = write!(l, "*{c} ");
        }
        l.push_str(msg);
        if let Some((path, upstream)) = ctx {
            let _ = write!(
                l,
                ", client: 127.0.0.1, server: , request: \"GET {path} HTTP/1.1\", upstream: \"http://{upstream}{path}\", host: \"127.0.0.1:8080\""
            );
        }
        self.error.push_str(&l);
        self.error.push('\n');
    }

    /// `no live upstreams` for a request whose pick in group `be` found no peer.
    fn nlu(&mut self, t_ms: i64, cid: u64, path: &str) {
        let msg = "no live upstreams while connecting to upstream";
        self.err(t_ms, "error", Some(cid), msg, Some((path, "be")));
    }

    /// A refused connect to `peer`.
    fn refused(&mut self, t_ms: i64, cid: u64, path: &str, peer: &str) {
        let msg = "connect() failed (111: Connection refused) while connecting to upstream";
        self.err(t_ms, "error", Some(cid), msg, Some((path, peer)));
    }

    /// `peer` reached max_fails.
    fn disabled(&mut self, t_ms: i64, cid: u64, path: &str, peer: &str) {
        let msg = "upstream server temporarily disabled while connecting to upstream";
        self.err(t_ms, "warn", Some(cid), msg, Some((path, peer)));
    }

    fn dns(&mut self, t_ms: i64, rcode: &str, answers: &[&str], mode: &str) {
        let ans: Vec<&str> = answers
            .iter()
            .map(|a| a.split(':').next().unwrap())
            .collect();
        let _ = writeln!(
            self.dns,
            "{}",
            json!({"t_us": t_ms * 1000, "client": "127.0.0.1:41234", "qname": "be.lab", "qtype": "A", "transport": "udp",
                   "id": (t_ms % 65536), "mode": mode, "rcode": rcode, "answers": ans, "ttl": 5, "changed": false, "injected": mode != "static"})
        );
    }

    fn event(&mut self, t_ms: i64, kind: &str, target: &str, spec: &str, hits: Option<u64>) {
        let mut v = json!({"t_us": t_ms * 1000, "kind": kind, "target": target, "spec": spec});
        if let Some(h) = hits {
            v["hits"] = json!(h);
        }
        let _ = writeln!(self.events, "{v}");
    }

    fn write(&self, dir: &Path, name: &str, checks: &[&str], upstream_conf: &str) {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join("access.log"), &self.access).unwrap();
        std::fs::write(dir.join("error.log"), &self.error).unwrap();
        std::fs::write(dir.join("dns.jsonl"), &self.dns).unwrap();
        std::fs::write(dir.join("events.jsonl"), &self.events).unwrap();
        std::fs::write(dir.join("load.jsonl"), &self.load).unwrap();
        let expect = resolvelab_core::evidence::Expectations {
            checks: checks.iter().map(|c| c.to_string()).collect(),
            ..resolvelab_core::evidence::Expectations::new(name, "")
        };
        std::fs::write(
            dir.join(resolvelab_core::evidence::file::EXPECT),
            serde_json::to_string_pretty(&expect).unwrap() + "\n",
        )
        .unwrap();
        std::fs::write(
            dir.join("nginx.conf"),
            format!(
                "daemon off;\nevents {{ worker_connections 1024; }}\nhttp {{\n    log_format lab '{LAB_FORMAT}';\n    access_log {}/access.log lab;\n    resolver 127.0.0.53:5300 valid=5s;\n{upstream_conf}\n    server {{ listen 127.0.0.1:8080; location / {{ proxy_pass http://be; }} }}\n}}\n",
                dir.display()
            ),
        )
        .unwrap();
        std::fs::write(
            dir.join("fingerprint.json"),
            serde_json::to_string_pretty(&json!({"tool": "make_fixtures", "seed": 0, "host": {"utc_offset": fmt_off(self.tz_s)}})).unwrap(),
        )
        .unwrap();
    }
}

fn fmt_off(s: i64) -> String {
    format!(
        "{}{:02}:{:02}",
        if s < 0 { '-' } else { '+' },
        s.abs() / 3600,
        (s.abs() % 3600) / 60
    )
}

const ONE_RESOLVE: &str = "    upstream be { zone be 64k; server be.lab:8080 resolve; }";
const TWO_RESOLVE: &str =
    "    upstream be { zone be 64k; server be.lab:8080 resolve; server be2.lab:8080 resolve; }";

/// Requests every 50 ms (20 rps) over 10 keep-alive connections.
fn schedule(secs: i64) -> impl Iterator<Item = (usize, i64, u64)> {
    (0..(secs * 20) as usize).map(|i| {
        let t = T0_MS + i as i64 * 50 + (i as i64 * 7) % 5;
        (i, t, 1 + (i as u64 % 10))
    })
}

/// DNS re-queries every 6 s; `answer(k)` gives rcode and answers of query k.
fn dns_every_6s(
    r: &mut Run,
    secs: i64,
    answer: impl Fn(i64) -> (&'static str, Vec<&'static str>, &'static str),
) {
    let mut k = 0;
    while k * 6000 < secs * 1000 {
        let (rc, ans, mode) = answer(k);
        r.dns(T0_MS - 500 + k * 6000, rc, &ans, mode);
        k += 1;
    }
}

fn ok(r: &mut Run, t: i64, conn: u64, addr: &str, path: &str) {
    r.acc(t, 200, addr, "200", 2, conn, path, "0.002", "0.000");
}

fn swap_addr(t: i64) -> &'static str {
    // Alternate answers: A during even periods, B during odd ones (swaps at T0-0.5s + 6k s).
    if ((t - (T0_MS - 500)) / 6000) % 2 == 0 {
        A
    } else {
        B
    }
}

pub fn main(args: Vec<String>) {
    let out = args
        .into_iter()
        .nth(1)
        .unwrap_or_else(|| "tests/fixtures/diagnose/synthetic".into());
    let out = Path::new(&out);
    let tz = 9 * 3600;

    // swap-only: 40 s of alternating answers, no failures.
    let mut r = Run::new(tz);
    dns_every_6s(&mut r, 40, |k| {
        ("NOERROR", vec![if k % 2 == 0 { A } else { B }], "alternate")
    });
    for (i, t, c) in schedule(40) {
        ok(&mut r, t, c, swap_addr(t - 2), &format!("/p/{i}"));
    }
    r.write(
        &out.join("swap-only"),
        "swap-only",
        &[
            "nlu = 0",
            "client_errors = 0",
            "swaps >= 5",
            "requery_period_ms ≈ 6000 ± 2%",
        ],
        ONE_RESOLVE,
    );

    // generation race at retry: after 4 swaps, a 2-hop NLU 12..400 ms later, paired by *cid
    // with a first-try `upstream prematurely closed connection`; one 3-hop.
    let mut r = Run::new(tz);
    dns_every_6s(&mut r, 40, |k| {
        ("NOERROR", vec![if k % 2 == 0 { A } else { B }], "alternate")
    });
    let swaps: Vec<i64> = (1..7).map(|k| T0_MS - 500 + k * 6000).collect();
    let mut victims: Vec<i64> = Vec::new();
    for (n, s) in swaps
        .iter()
        .enumerate()
        .filter(|(n, _)| n % 2 == 0 || *n == 5)
    {
        victims.push(s + 12 + n as i64 * 90);
    }
    for (i, t, c) in schedule(40) {
        let path = format!("/p/{i}");
        if let Some(v) = victims.iter().position(|v| (t - v).abs() < 25) {
            let t = victims[v];
            let old = swap_addr(t - 1000);
            let first_try = t - 9;
            r.err(first_try, "error", Some(c), "upstream prematurely closed connection while reading response header from upstream", Some((&path, old)));
            r.nlu(t, c, &path);
            if v == 3 {
                r.acc(
                    t,
                    502,
                    &format!("{old}, {old}, be"),
                    "502, 502, 502",
                    9,
                    c,
                    &path,
                    "0.004, 0.004, 0.000",
                    "0.000, 0.000, -",
                );
            } else {
                r.acc(
                    t,
                    502,
                    &format!("{old}, be"),
                    "502, 502",
                    9,
                    c,
                    &path,
                    "0.009, 0.000",
                    "0.000, -",
                );
            }
        } else {
            ok(&mut r, t, c, swap_addr(t - 2), &path);
        }
    }
    r.event(T0_MS, "fault-on", "backend:b1", "reclaim-race:p=0.3", None);
    r.event(
        T0_MS + 40_000,
        "fault-off",
        "backend:b1",
        "reclaim-race:p=0.3",
        Some(212),
    );
    r.write(
        &out.join("generation-race"),
        "generation-race",
        &[
            "nlu > 0",
            "all(nlu).after_swap_ms <= 600",
            "count(class(\"generation-race-retry\")) > 0",
            "absent(\"maxfails-wipeout\")",
            "count(nlu) = 4",
            "any(nlu).trajectory = \"2-hop\"",
        ],
        ONE_RESOLVE,
    );

    // NXDOMAIN: the query at k=2 (T0+11.5 s) answers NXDOMAIN; peers gone until k=3 (T0+17.5 s).
    let mut r = Run::new(tz);
    dns_every_6s(&mut r, 40, |k| {
        if k == 2 {
            ("NXDOMAIN", vec![], "nxdomain")
        } else {
            ("NOERROR", vec![A], "static")
        }
    });
    r.err(
        T0_MS + 11_500,
        "error",
        None,
        "be.lab could not be resolved (3: Host not found)",
        None,
    );
    for (i, t, c) in schedule(40) {
        let path = format!("/p/{i}");
        if (T0_MS + 11_501..T0_MS + 17_500).contains(&t) {
            r.nlu(t, c, &path);
            r.acc(t, 502, "be", "502", 0, c, &path, "-", "-");
        } else {
            ok(&mut r, t, c, A, &path);
        }
    }
    r.event(T0_MS + 11_000, "dns-mode", "be.lab", "nxdomain", None);
    r.event(T0_MS + 13_000, "dns-mode", "be.lab", "static", Some(1));
    r.write(
        &out.join("dns-nxdomain"),
        "dns-nxdomain",
        &[
            "present(\"dns-nxdomain\")",
            "incident(\"dns-nxdomain\").duration_ms ≈ 6000 ± 10%",
            "all(nlu).trajectory = 1-hop",
            "absent(\"generation-race-retry\")",
        ],
        ONE_RESOLVE,
    );

    // max_fails wipeout: two peers; refused connections for 2 s from T0+10 s; one ordinary 502,
    // two `temporarily disabled` warnings, then a 1-hop NLU burst until fail_timeout passes.
    let mut r = Run::new(tz);
    dns_every_6s(&mut r, 30, |_| ("NOERROR", vec![A], "static"));
    for (i, t, c) in schedule(30) {
        let path = format!("/p/{i}");
        let peer = if i % 2 == 0 { A } else { B };
        if (T0_MS + 10_000..T0_MS + 10_050).contains(&t) {
            r.refused(t - 1, c, &path, A);
            r.disabled(t - 1, c, &path, A);
            r.refused(t, c, &path, B);
            r.disabled(t, c, &path, B);
            r.acc(
                t,
                502,
                &format!("{A}, {B}"),
                "502, 502",
                1,
                c,
                &path,
                "0.000, 0.000",
                "-, -",
            );
        } else if (T0_MS + 10_050..T0_MS + 20_100).contains(&t) {
            r.nlu(t, c, &path);
            r.acc(t, 502, "be", "502", 0, c, &path, "-", "-");
        } else {
            ok(&mut r, t, c, peer, &path);
        }
    }
    r.event(T0_MS + 10_000, "fault-on", "backend:b1,b2", "refuse", None);
    r.event(
        T0_MS + 12_000,
        "fault-off",
        "backend:b1,b2",
        "refuse",
        Some(40),
    );
    r.write(
        &out.join("maxfails-wipeout"),
        "maxfails-wipeout",
        &[
            "present(\"maxfails-wipeout\")",
            "incident(\"maxfails-wipeout\").duration_ms ≈ 10000 ± 10%",
            "any(incidents).shape = burst",
            "all(nlu).trajectory = 1-hop",
        ],
        TWO_RESOLVE,
    );

    // Tries exhausted: max_fails=0, both peers refuse for 2 s: ordinary 2-try 502s and one
    // 3-hop NLU through a cached connection; the DNS answer never changes.
    let mut r = Run::new(tz);
    dns_every_6s(&mut r, 20, |_| ("NOERROR", vec![A], "static"));
    for (i, t, c) in schedule(20) {
        let path = format!("/p/{i}");
        if (T0_MS + 8_000..T0_MS + 10_000).contains(&t) {
            if i == 170 {
                r.err(t - 2, "error", Some(c), "upstream prematurely closed connection while reading response header from upstream", Some((&path, A)));
                r.refused(t - 1, c, &path, A);
                r.refused(t, c, &path, B);
                r.nlu(t, c, &path);
                r.acc(
                    t,
                    502,
                    &format!("{A}, {A}, {B}, be"),
                    "502, 502, 502, 502",
                    3,
                    c,
                    &path,
                    "0.001, 0.000, 0.000, 0.000",
                    "0.000, -, -, -",
                );
            } else {
                r.refused(t - 1, c, &path, A);
                r.refused(t, c, &path, B);
                r.acc(
                    t,
                    502,
                    &format!("{A}, {B}"),
                    "502, 502",
                    1,
                    c,
                    &path,
                    "0.000, 0.000",
                    "-, -",
                );
            }
        } else {
            ok(&mut r, t, c, if i % 2 == 0 { A } else { B }, &path);
        }
    }
    r.event(T0_MS + 8_000, "fault-on", "backend:b1,b2", "refuse", None);
    r.event(
        T0_MS + 10_000,
        "fault-off",
        "backend:b1,b2",
        "refuse",
        Some(80),
    );
    r.write(
        &out.join("tries-exhausted"),
        "tries-exhausted",
        &["present(\"tries-exhausted\")", "count(class(\"upstream-failure\")) >= 30", "absent(\"maxfails-wipeout\")", "nlu = 1"],
        "    upstream be { zone be 64k; server be.lab:8080 resolve max_fails=0; server be2.lab:8080 resolve max_fails=0; }",
    );

    // DNS silent: resolver timeouts only, no failures (harmless signature).
    let mut r = Run::new(tz);
    dns_every_6s(&mut r, 30, |k| {
        if (2..4).contains(&k) {
            ("none", vec![], "silent")
        } else {
            ("NOERROR", vec![A], "static")
        }
    });
    for t in [
        T0_MS + 11_500,
        T0_MS + 12_500,
        T0_MS + 17_500,
        T0_MS + 18_500,
    ] {
        r.err(
            t,
            "error",
            None,
            "be.lab could not be resolved (110: Operation timed out)",
            None,
        );
    }
    for (i, t, c) in schedule(30) {
        ok(&mut r, t, c, A, &format!("/p/{i}"));
    }
    r.event(T0_MS + 11_000, "dns-mode", "be.lab", "silent", None);
    r.event(T0_MS + 21_000, "dns-mode", "be.lab", "static", Some(4));
    r.write(
        &out.join("dns-silent"),
        "dns-silent",
        &[
            "nlu = 0",
            "client_errors = 0",
            "present(\"resolve-timeout\")",
        ],
        ONE_RESOLVE,
    );

    // Zone memory exhausted at a swap: the new peers could not be added.
    let mut r = Run::new(tz);
    dns_every_6s(&mut r, 30, |k| {
        ("NOERROR", if k == 2 { vec![B] } else { vec![A] }, "multi")
    });
    r.err(
        T0_MS + 11_500,
        "error",
        None,
        "cannot add new server to upstream \"be\", memory exhausted",
        None,
    );
    for (i, t, c) in schedule(30) {
        let path = format!("/p/{i}");
        if (T0_MS + 11_501..T0_MS + 17_500).contains(&t) {
            r.nlu(t, c, &path);
            r.acc(t, 502, "be", "502", 0, c, &path, "-", "-");
        } else {
            ok(&mut r, t, c, A, &path);
        }
    }
    r.write(
        &out.join("zone-memory"),
        "zone-memory",
        &[
            "present(\"zone-memory-exhausted\")",
            "absent(\"dns-nxdomain\")",
        ],
        "    upstream be { zone be 4k; server be.lab:8080 resolve; }",
    );

    // Port exhaustion: connect() failed (99) bursts.
    let mut r = Run::new(tz);
    dns_every_6s(&mut r, 20, |_| ("NOERROR", vec![A], "static"));
    for (i, t, c) in schedule(20) {
        let path = format!("/p/{i}");
        if (T0_MS + 5_000..T0_MS + 6_500).contains(&t) {
            r.err(t, "crit", Some(c), "connect() failed (99: Cannot assign requested address) while connecting to upstream", Some((&path, A)));
            r.acc(t, 502, A, "502", 0, c, &path, "0.000", "-");
        } else {
            ok(&mut r, t, c, A, &path);
        }
    }
    r.write(
        &out.join("port-exhaustion"),
        "port-exhaustion",
        &["present(\"port-exhaustion\")", "nlu = 0"],
        ONE_RESOLVE,
    );

    // Generation race at first pick: lone 1-hop NLUs 0–3 ms after swaps.
    let mut r = Run::new(tz);
    dns_every_6s(&mut r, 40, |k| {
        ("NOERROR", vec![if k % 2 == 0 { A } else { B }], "alternate")
    });
    let picks: Vec<i64> = [1i64, 3, 5]
        .iter()
        .map(|k| T0_MS - 500 + k * 6000 + 2)
        .collect();
    for (i, t, c) in schedule(40) {
        let path = format!("/p/{i}");
        if picks.iter().any(|p| (t - p).abs() < 25) {
            let t = picks.iter().find(|p| (t - *p).abs() < 25).copied().unwrap();
            r.nlu(t, c, &path);
            r.acc(t, 502, "be", "502", 0, c, &path, "-", "-");
        } else {
            ok(&mut r, t, c, swap_addr(t - 2), &path);
        }
    }
    r.write(
        &out.join("first-pick"),
        "first-pick",
        &[
            "count(class(\"generation-race-first-pick\")) = 3",
            "all(nlu).after_swap_ms <= 50",
        ],
        ONE_RESOLVE,
    );

    // An injection that never hit: the verdict must refuse to interpret the run.
    let mut r = Run::new(tz);
    dns_every_6s(&mut r, 10, |_| ("NOERROR", vec![A], "static"));
    for (i, t, c) in schedule(10) {
        ok(&mut r, t, c, A, &format!("/p/{i}"));
    }
    r.event(T0_MS + 2_000, "fault-on", "backend:b1", "rst:p=1", None);
    r.event(T0_MS + 4_000, "fault-off", "backend:b1", "rst:p=1", Some(0));
    r.write(
        &out.join("injection-miss"),
        "injection-miss",
        &["nlu = 0"],
        ONE_RESOLVE,
    );

    production(&out.join("production"));
    eprintln!("fixtures written to {}", out.display());
}

/// Production-shaped logs: a custom log_format with $time_local (+09:00), rotation
/// (access.log.2.gz, access.log.1, access.log), two error_log files, malformed lines, no DNS log.
fn production(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let fmt = r#"$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent" rt=$request_time ua="$upstream_addr" us="$upstream_status" cid=$connection"#;
    let conf = "# configuration file /etc/nginx/nginx.conf:\nuser nginx;\nerror_log /var/log/nginx/error.log warn;\nhttp {\n    log_format main '$remote_addr - $remote_user [$time_local] \"$request\" '\n                    '$status $body_bytes_sent \"$http_referer\" '\n                    '\"$http_user_agent\" rt=$request_time ua=\"$upstream_addr\" us=\"$upstream_status\" cid=$connection';\n    access_log /var/log/nginx/access.log main;\n    resolver 10.0.0.2 valid=5s;\n    upstream be { zone be 64k; server be.example.internal:8080 resolve; }\n    server {\n        error_log /var/log/nginx/upstream-error.log error;\n        location / { proxy_pass http://be; }\n    }\n}\n".to_string();
    assert!(conf.contains("log_format main"));
    std::fs::write(dir.join("nginx-T.txt"), &conf).unwrap();
    std::fs::write(dir.join("log_format.txt"), format!("{fmt}\n")).unwrap();
    let tz = 9 * 3600;
    let loc = |t_ms: i64| jiff::Timestamp::from_second(t_ms.div_euclid(1000) + tz).unwrap();
    let a1 = "10.1.0.11:8080";
    let a2 = "10.2.0.12:8080";
    // Answers alternate every 6 s (inferred swaps), an NXDOMAIN window at 60–66 s, and two
    // generation-race victims.
    let addr = |t: i64| {
        if ((t - T0_MS) / 6000) % 2 == 0 {
            a1
        } else {
            a2
        }
    };
    let victims = [T0_MS + 24_000 + 140, T0_MS + 36_000 + 120];
    let mut files: Vec<String> = vec![String::new(), String::new(), String::new()];
    let mut err_main = String::new();
    let mut err_up = String::new();
    let elog = |t: i64, lvl: &str, cid: Option<u64>, msg: &str, ctx: Option<(&str, &str)>| {
        let mut l = format!("{} [{lvl}] 811#811: ", loc(t).strftime("%Y/%m/%d %H:%M:%S"));
        if let Some(c) = cid {
            l.push_str(&format!("*{c} "));
        }
        l.push_str(msg);
        if let Some((p, u)) = ctx {
            l.push_str(&format!(", client: 192.0.2.7, server: www.example.com, request: \"GET {p} HTTP/1.1\", upstream: \"http://{u}{p}\", host: \"www.example.com\""));
        }
        l + "\n"
    };
    err_main.push_str(&elog(
        T0_MS + 60_000,
        "error",
        None,
        "be.example.internal could not be resolved (3: Host not found)",
        None,
    ));
    for i in 0..(90 * 10) {
        let t = T0_MS + i as i64 * 100;
        let cid = 1000 + (i as u64 % 25);
        let path = format!("/api/items/{i}?q=a%20b");
        let file = if t < T0_MS + 30_000 {
            0
        } else if t < T0_MS + 60_000 {
            1
        } else {
            2
        };
        let (status, ua, us, rt) = if (T0_MS + 60_001..T0_MS + 66_000).contains(&t) {
            err_up.push_str(&elog(
                t,
                "error",
                Some(cid),
                "no live upstreams while connecting to upstream",
                Some((&path, "be")),
            ));
            (502, "be".to_string(), "502".to_string(), "0.000")
        } else if victims.iter().any(|v| (t - v).abs() < 50) {
            let old = addr(t - 1000);
            err_up.push_str(&elog(t - 5, "error", Some(cid), "recv() failed (104: Connection reset by peer) while reading response header from upstream", Some((&path, old))));
            err_up.push_str(&elog(
                t,
                "error",
                Some(cid),
                "no live upstreams while connecting to upstream",
                Some((&path, "be")),
            ));
            (502, format!("{old}, be"), "502, 502".to_string(), "0.006")
        } else {
            (200, addr(t - 5).to_string(), "200".to_string(), "0.004")
        };
        let tl = loc(t).strftime("%d/%b/%Y:%H:%M:%S +0900").to_string();
        files[file].push_str(&format!(
            "192.0.2.7 - - [{tl}] \"GET {path} HTTP/1.1\" {status} {} \"-\" \"Mozilla/5.0 (X11; Linux)\" rt={rt} ua=\"{ua}\" us=\"{us}\" cid={cid}\n",
            if status == 200 { 1532 } else { 157 }
        ));
        if i == 450 {
            files[file].push_str("192.0.2.7 - - [30/Nov/2026:15:00:45 +0900] \"\\x16\\x03\\x01\" 400 157 \"-\" \"-\"\n");
        }
        if i == 455 {
            files[file].push_str("this line was truncated by a full disk\n");
        }
    }
    let mut gz = flate2::write::GzEncoder::new(
        std::fs::File::create(dir.join("access.log.2.gz")).unwrap(),
        flate2::Compression::default(),
    );
    gz.write_all(files[0].as_bytes()).unwrap();
    gz.finish().unwrap();
    std::fs::write(dir.join("access.log.1"), &files[1]).unwrap();
    std::fs::write(dir.join("access.log"), &files[2]).unwrap();
    std::fs::write(dir.join("error.log"), err_main).unwrap();
    std::fs::write(dir.join("upstream-error.log"), err_up).unwrap();
}
