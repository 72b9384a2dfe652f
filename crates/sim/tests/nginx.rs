//! The simulated nginx against the shapes of the digest (§5, §8): each test is one experiment.

use resolvelab_sim::nginx::*;
use std::path::Path;

const NAME: &str = "app.test.local";

fn base(mode: &str) -> SimConfig {
    let mut cfg = SimConfig::new(vec![ServerLine::resolve(NAME, 8080)]);
    cfg.valid = Some(Us::s(5));
    cfg.dns = vec![phase(0, mode)];
    cfg
}

fn phase(at_s: i64, mode: &str) -> DnsPhase {
    DnsPhase {
        at: Us::s(at_s),
        name: NAME.into(),
        mode: DnsMode::parse(mode).unwrap(),
        aaaa: Vec::new(),
    }
}

fn reclaim(p: f64) -> FaultWindow {
    FaultWindow {
        start: Us(0),
        end: Us::s(100_000),
        target: None,
        fault: FaultKind::Reclaim {
            p,
            delay_min: Us(0),
            delay_max: Us::ms(50),
        },
    }
}

/// One parsed access-log line.
#[derive(Debug)]
struct Line {
    msec: f64,
    status: u16,
    addr: String,
    ustatus: String,
    method: String,
}

fn access(dir: &Path) -> Vec<Line> {
    std::fs::read_to_string(dir.join("access.log"))
        .unwrap()
        .lines()
        .map(|l| {
            let q: Vec<&str> = l.split('"').collect();
            let head: Vec<&str> = q[0].split_whitespace().collect();
            let mid: Vec<&str> = q[4].split_whitespace().collect();
            Line {
                msec: head[0].parse().unwrap(),
                status: head[1].parse().unwrap(),
                addr: q[1].to_string(),
                ustatus: q[3].to_string(),
                method: mid[1].to_string(),
            }
        })
        .collect()
}

#[test]
fn swaps_alone_are_harmless() {
    // P1 / §8 swap-only: a swap every valid + 1 s, no errors.
    let mut cfg = base("alternate:127.0.0.20,127.0.0.30");
    cfg.duration = Us::s(60);
    let s = simulate_counts(&cfg).unwrap();
    assert_eq!(s.requests, 18_000);
    assert_eq!(s.ok, 18_000);
    assert!((9..=11).contains(&s.swaps), "swaps {}", s.swaps);
    for w in s.swap_times_us.windows(2) {
        let period = w[1] - w[0];
        assert!(
            (5_998_000..=6_002_000).contains(&period),
            "requery period {period} µs"
        );
    }
}

#[test]
fn generation_race_at_retry() {
    // 4-4 / §8: alternate + reclaim race p=0.3 → isolated 2-hop NLUs shortly after swaps.
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = base("alternate:127.0.0.20,127.0.0.30");
    cfg.duration = Us::s(120);
    cfg.faults = vec![reclaim(0.3)];
    let s = simulate(&cfg, dir.path()).unwrap();
    let nlu = s.nlu.generation_race_retry;
    assert_eq!(s.nlu_total(), nlu, "only the retry race: {:?}", s.nlu);
    // §8 measured 41 in 36,000 over 20 swaps; the model must land in the same decade.
    assert!((15..=120).contains(&nlu), "NLU {nlu}");
    assert_eq!(s.disabled_warnings, 0, "single peer: max_fails not applied");
    let lines = access(dir.path());
    let swaps: Vec<f64> = s.swap_times_us.iter().map(|&t| t as f64 / 1e6).collect();
    let mut n = 0;
    for l in lines.iter().filter(|l| l.status == 502) {
        n += 1;
        assert!(
            l.addr.ends_with(", be"),
            "multi-hop through the old IP: {l:?}"
        );
        assert!(l.addr.starts_with("127.0.0."));
        assert!(l.ustatus.split(", ").all(|s| s == "502"), "{l:?}");
        // Within ~0.5 s after some swap (bounded by the first-try delay).
        let after = swaps
            .iter()
            .filter(|&&sw| sw <= l.msec + 0.001)
            .map(|sw| l.msec - sw)
            .fold(f64::INFINITY, f64::min);
        assert!(after < 0.5, "{l:?} is {after} s after the last swap");
    }
    assert_eq!(n, nlu);
    // Every NLU pairs (by *cid) with an earlier first-try failure line.
    let err = std::fs::read_to_string(dir.path().join("error.log")).unwrap();
    let nlu_lines: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("no live upstreams"))
        .collect();
    assert_eq!(nlu_lines.len() as u64, nlu);
    for l in nlu_lines {
        let cid = l.split_whitespace().nth(4).unwrap();
        assert!(cid.starts_with('*'));
        assert!(
            err.lines()
                .any(|e| e.contains(&format!(" {cid} upstream prematurely closed"))),
            "no first-try failure for {cid}"
        );
    }
}

#[test]
fn static_ip_control_has_no_client_errors() {
    // 4-3: the same reclaim race without swaps: retries absorb everything.
    let mut cfg = base("static:127.0.0.20");
    cfg.duration = Us::s(120);
    cfg.faults = vec![reclaim(0.3)];
    let s = simulate_counts(&cfg).unwrap();
    assert!(s.try_failures > 1000, "{}", s.try_failures);
    assert_eq!(s.status_502, 0);
    assert_eq!(s.swaps, 0);
}

#[test]
fn nxdomain_empties_the_upstream_for_one_period() {
    // P2 / §8: one `could not be resolved (3…)` line, then ≈ valid + 1 s of 1-hop NLU.
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = base("static:127.0.0.20");
    cfg.duration = Us::s(40);
    // Broken for 2 s around the requery at ≈11 s: the negative answer is kept for valid + 1 s.
    cfg.dns.push(phase(10, "nxdomain"));
    cfg.dns.push(phase(12, "static:127.0.0.20"));
    let s = simulate(&cfg, dir.path()).unwrap();
    let nlu = s.nlu.dns_nxdomain;
    assert_eq!(s.nlu_total(), nlu);
    // 300 rps × 6 s = 1,800 (±1 period jitter of 1 ms).
    assert!((1790..=1810).contains(&nlu), "NLU {nlu}");
    let lines = access(dir.path());
    let bad: Vec<&Line> = lines.iter().filter(|l| l.status == 502).collect();
    assert!(bad.iter().all(|l| l.addr == "be" && l.ustatus == "502"));
    let span = bad.last().unwrap().msec - bad[0].msec;
    assert!((5.9..=6.1).contains(&span), "outage {span} s");
    let err = std::fs::read_to_string(dir.path().join("error.log")).unwrap();
    assert_eq!(
        err.matches("app.test.local could not be resolved (3: Host not found)")
            .count(),
        1
    );
}

#[test]
fn servfail_and_silence_keep_the_peers() {
    // P3: DNS failures other than NXDOMAIN are harmless (negative control).
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = base("static:127.0.0.20");
    cfg.duration = Us::s(60);
    cfg.resolver_timeout = Us::s(5);
    cfg.dns.push(phase(5, "drop"));
    cfg.dns.push(phase(25, "servfail"));
    cfg.dns.push(phase(40, "static:127.0.0.20"));
    let s = simulate(&cfg, dir.path()).unwrap();
    assert_eq!(s.ok, s.requests);
    let err = std::fs::read_to_string(dir.path().join("error.log")).unwrap();
    assert!(err.contains("could not be resolved (110: Operation timed out)"));
    assert!(err.contains("could not be resolved (2: Server failure)"));
    assert!(!err.contains("Host not found"));
}

fn two_lines_refused(max_fails: u32) -> SimConfig {
    // P4 / §8: two resolve lines (single = 0), backend refuses for 2 s.
    let mut line = ServerLine::resolve(NAME, 8080);
    line.max_fails = max_fails;
    let mut cfg = SimConfig::new(vec![line.clone(), line]);
    cfg.valid = Some(Us::s(5));
    cfg.dns = vec![phase(0, "static:127.0.0.20")];
    cfg.duration = Us::s(40);
    cfg.faults = vec![FaultWindow {
        start: Us::s(10),
        end: Us::ms(12_000),
        target: Some("127.0.0.20:8080".into()),
        fault: FaultKind::Refuse,
    }];
    cfg
}

#[test]
fn maxfails_wipeout_burst_and_max_fails_zero() {
    let dir = tempfile::tempdir().unwrap();
    let s = simulate(&two_lines_refused(1), dir.path()).unwrap();
    let burst = s.nlu.maxfails_wipeout;
    // ≈ fail_timeout (10–11 s on nginx's one-second clock) of every request.
    assert!((2900..=3400).contains(&burst), "burst {burst}");
    assert!(s.disabled_warnings >= 2);
    let lines = access(dir.path());
    let bad: Vec<&Line> = lines.iter().filter(|l| l.addr == "be").collect();
    let span = bad.last().unwrap().msec - bad[0].msec;
    assert!((9.9..=11.1).contains(&span), "burst lasts {span} s");
    let err = std::fs::read_to_string(dir.path().join("error.log")).unwrap();
    assert!(err.contains("[warn] 1234#0: *"));
    assert!(err.contains("upstream server temporarily disabled while connecting to upstream"));
    assert!(
        err.contains("connect() failed (111: Connection refused) while connecting to upstream")
    );

    // max_fails=0: ordinary 502s during the 2 s only, no tail.
    let s0 = simulate_counts(&two_lines_refused(0)).unwrap();
    assert_eq!(s0.nlu.maxfails_wipeout, 0);
    assert!(s0.upstream_failures + s0.nlu.tries_exhausted >= 500);
    assert!(s0.status_502 <= 620, "{}", s0.status_502);
}

#[test]
fn backup_does_not_help_the_generation_race() {
    // F4: the BUSY path skips backup; and a backup makes single = 0 (5-5: worse).
    let mut cfg = base("alternate:127.0.0.20,127.0.0.30");
    cfg.duration = Us::s(120);
    cfg.faults = vec![reclaim(0.3)];
    let baseline = simulate_counts(&cfg).unwrap();
    let mut b = ServerLine::fixed("127.0.0.40", 8080);
    b.backup = true;
    cfg.servers.push(b);
    let with_backup = simulate_counts(&cfg).unwrap();
    assert!(with_backup.nlu.generation_race_retry > 0);
    assert!(with_backup.nlu_total() > baseline.nlu_total());
    assert!(with_backup.disabled_warnings > 0);
}

#[test]
fn retry_shim_rescues_the_race_but_not_nxdomain() {
    let mut cfg = base("alternate:127.0.0.20,127.0.0.30");
    cfg.duration = Us::s(120);
    cfg.faults = vec![reclaim(0.3)];
    cfg.retry_shim = Some(RetryShim::default());
    let s = simulate_counts(&cfg).unwrap();
    assert!(s.shim_first_pass_nlu.generation_race_retry > 10);
    assert_eq!(s.status_502, 0, "5-3: 0 client errors");

    let dir = tempfile::tempdir().unwrap();
    let mut cfg = base("static:127.0.0.20");
    cfg.duration = Us::s(30);
    // Broken for 2 s around the requery at ≈11 s: the negative answer is kept for valid + 1 s.
    cfg.dns.push(phase(10, "nxdomain"));
    cfg.dns.push(phase(12, "static:127.0.0.20"));
    cfg.retry_shim = Some(RetryShim::default());
    let s = simulate(&cfg, dir.path()).unwrap();
    assert!(s.nlu.dns_nxdomain > 1700, "P7b: no reduction");
    let lines = access(dir.path());
    assert!(
        lines
            .iter()
            .any(|l| l.addr == "be : be" && l.ustatus == "502 : 502")
    );
}

#[test]
fn post_is_not_retried_after_sending() {
    let mut cfg = base("static:127.0.0.20");
    cfg.duration = Us::s(30);
    cfg.mix = vec![("GET".into(), 0.5), ("POST".into(), 0.5)];
    cfg.faults = vec![reclaim(0.3)];
    let dir = tempfile::tempdir().unwrap();
    let s = simulate(&cfg, dir.path()).unwrap();
    let lines = access(dir.path());
    let failed: Vec<&Line> = lines.iter().filter(|l| l.status == 502).collect();
    assert!(!failed.is_empty());
    assert!(
        failed
            .iter()
            .all(|l| l.method == "POST" && !l.addr.contains(", "))
    );
    assert_eq!(s.nlu_total(), 0, "F7: the original error, not NLU");
    let mut cfg2 = cfg.clone();
    cfg2.next_upstream.non_idempotent = true;
    assert_eq!(simulate_counts(&cfg2).unwrap().status_502, 0);
}

#[test]
fn slab_exhaustion_loses_peers() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = base("static:127.0.0.20");
    cfg.zone_bytes = 40 * 1024; // room for 16 peers
    cfg.duration = Us::s(20);
    cfg.dns.push(phase(5, "multi:25@127.0.1.1"));
    let s = simulate(&cfg, dir.path()).unwrap();
    assert!(s.memory_exhausted >= 1);
    let err = std::fs::read_to_string(dir.path().join("error.log")).unwrap();
    assert!(err.contains("cannot add new server to upstream \"be\", memory exhausted"));
}

#[test]
fn first_pick_window_is_a_parameter() {
    let mut cfg = base("alternate:127.0.0.20,127.0.0.30");
    cfg.valid = Some(Us::s(1));
    cfg.rps = 3000.0;
    cfg.duration = Us::s(300);
    cfg.first_pick_window_us = 0.0;
    assert_eq!(simulate_counts(&cfg).unwrap().nlu_total(), 0);
    // A 7 µs window at 3000 rps over ~149 swaps: expect ≈ 149 × 3000 × 7e-6 ≈ 3.1.
    cfg.first_pick_window_us = 7.0;
    let s = simulate_counts(&cfg).unwrap();
    assert_eq!(s.nlu_total(), s.nlu.generation_race_first_pick);
    assert!(s.swaps > 140);
    // A huge window makes it frequent: it scales with the window.
    cfg.first_pick_window_us = 700.0;
    let big = simulate_counts(&cfg)
        .unwrap()
        .nlu
        .generation_race_first_pick;
    assert!((200..=450).contains(&big), "{big}");
}

#[test]
fn tries_exhausted_with_max_fails_zero() {
    // §8: with max_fails=0 the RST/refuse window can end in a 3-hop NLU (cached, other, be).
    let mut cfg = two_lines_refused(0);
    cfg.servers[1].host = "app2.test.local".into();
    cfg.dns.push(DnsPhase {
        at: Us(0),
        name: "app2.test.local".into(),
        mode: DnsMode::parse("static:127.0.0.30").unwrap(),
        aaaa: Vec::new(),
    });
    cfg.faults[0].target = None;
    cfg.faults[0].fault = FaultKind::Rst { p: 1.0 };
    let s = simulate_counts(&cfg).unwrap();
    assert!(s.nlu.tries_exhausted > 0, "{:?}", s.nlu);
    assert_eq!(s.nlu.maxfails_wipeout, 0);
}

#[test]
fn same_seed_same_bytes() {
    let mut cfg = base("alternate:127.0.0.20,127.0.0.30");
    cfg.duration = Us::s(30);
    cfg.mix = vec![("GET".into(), 0.8), ("POST".into(), 0.2)];
    cfg.faults = vec![reclaim(0.3)];
    cfg.latency = Latency::Lognormal {
        median: Us::ms(3),
        sigma: 0.5,
    };
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    let c = tempfile::tempdir().unwrap();
    let sa = simulate(&cfg, a.path()).unwrap();
    let sb = simulate(&cfg, b.path()).unwrap();
    assert_eq!(sa, sb);
    for f in [
        "access.log",
        "error.log",
        "dns.jsonl",
        "events.jsonl",
        "load.jsonl",
    ] {
        let x = std::fs::read(a.path().join(f)).unwrap();
        let y = std::fs::read(b.path().join(f)).unwrap();
        assert!(x == y, "{f} differs between identical runs");
    }
    // Counting mode agrees with logging mode.
    assert_eq!(simulate_counts(&cfg).unwrap(), sa);
    // Another seed is another run.
    cfg.seed = 2;
    simulate(&cfg, c.path()).unwrap();
    assert_ne!(
        std::fs::read(a.path().join("access.log")).unwrap(),
        std::fs::read(c.path().join("access.log")).unwrap()
    );
}

#[test]
fn jsonl_files_have_their_schemas() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = base("alternate:127.0.0.20,127.0.0.30");
    cfg.duration = Us::s(10);
    cfg.faults = vec![reclaim(0.1)];
    let s = simulate(&cfg, dir.path()).unwrap();
    for (f, schema, keys) in [
        (
            "dns.jsonl",
            "resolvelab.dns/v1",
            &[
                "t_us",
                "client",
                "qname",
                "qtype",
                "transport",
                "id",
                "mode",
                "rcode",
                "answers",
                "ttl",
                "changed",
                "injected",
            ][..],
        ),
        (
            "events.jsonl",
            "resolvelab.events/v1",
            &["t_us", "kind", "target", "spec", "hits"][..],
        ),
        (
            "load.jsonl",
            "resolvelab.load/v1",
            &[
                "t_us",
                "sent_us",
                "latency_us",
                "uncorrected_us",
                "status",
                "bytes",
                "error",
                "conn",
                "method",
                "header",
            ][..],
        ),
    ] {
        let text = std::fs::read_to_string(dir.path().join(f)).unwrap();
        let mut lines = text.lines();
        let first: serde_json::Value = serde_json::from_str(lines.next().unwrap()).unwrap();
        assert_eq!(first["schema"], schema);
        let mut n = 0;
        for l in lines {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            for k in keys {
                assert!(v.get(k).is_some(), "{f}: no {k} in {l}");
            }
            n += 1;
        }
        assert!(n > 0, "{f} is empty");
    }
    let events = std::fs::read_to_string(dir.path().join("events.jsonl")).unwrap();
    let off = events.lines().find(|l| l.contains("fault-off")).unwrap();
    let v: serde_json::Value = serde_json::from_str(off).unwrap();
    assert_eq!(v["hits"], s.fault_hits[0]);
    assert!(s.fault_hits[0] > 0);
}

#[test]
fn bad_configs_are_refused_with_one_line() {
    let mut cfg = base("static:127.0.0.20");
    cfg.servers[0].host = "other.name".into();
    let e = format!("{:#}", cfg.validate().unwrap_err());
    assert!(e.contains("resolve") && !e.contains('\n'), "{e}");
    let mut cfg = base("static:127.0.0.20");
    cfg.rps = 0.0;
    assert!(cfg.validate().is_err());
    assert!(DnsMode::parse("sometimes").is_err());
    let cfg: Result<SimConfig, _> = toml::from_str(
        r#"
rps = 100
duration = "10s"
[[servers]]
host = "app.test.local"
resolve = true
[[dns]]
at = "0s"
name = "app.test.local"
mode = "alternate:127.0.0.20,127.0.0.30"
[[faults]]
start = "5s"
end = "6s"
kind = "reclaim"
p = 0.5
"#,
    );
    let cfg = cfg.unwrap();
    cfg.validate().unwrap();
    assert_eq!(cfg.servers[0].max_fails, 1);
    assert_eq!(cfg.servers[0].fail_timeout, Us::s(10));
}

#[test]
fn example_config_parses_and_runs() {
    let cfg: SimConfig = toml::from_str(EXAMPLE_TOML).unwrap();
    cfg.validate().unwrap();
    let s = simulate_counts(&cfg).unwrap();
    assert_eq!(s.requests, 36_000);
    assert!(s.nlu.generation_race_retry > 0);
    // A typo in a fault is refused, not ignored.
    let bad = EXAMPLE_TOML.replace("delay_max", "delay_mx");
    assert!(toml::from_str::<SimConfig>(&bad).is_err());
    assert!(Latency::parse("lognormal:5ms,0.6").is_ok());
    assert!(Latency::parse("uniform:1ms..5ms").is_ok());
    assert!(Latency::parse("gauss:1ms").is_err());
}

#[test]
fn read_timeout_gives_504_and_retries_on_timeout() {
    // Seed 003-style latency injection on one of two backends, slower than proxy_read_timeout.
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = SimConfig::new(vec![
        ServerLine::fixed("127.0.0.20", 8080),
        ServerLine::fixed("127.0.0.30", 8080),
    ]);
    cfg.read_timeout = Us::s(1);
    cfg.duration = Us::s(10);
    cfg.faults = vec![FaultWindow {
        start: Us::s(2),
        end: Us::s(4),
        target: Some("127.0.0.20:8080".into()),
        fault: FaultKind::Delay { by: Us::s(3) },
    }];
    let s = simulate(&cfg, dir.path()).unwrap();
    // The timeout is retried on the other peer: no client error, but real timed-out tries.
    assert!(s.try_failures > 0);
    assert_eq!(s.status_504, 0);
    let err = std::fs::read_to_string(dir.path().join("error.log")).unwrap();
    assert!(err.contains(
        "upstream timed out (110: Connection timed out) while reading response header from upstream"
    ));
    let lines = access(dir.path());
    assert!(lines.iter().any(|l| l.ustatus == "504, 200"));
    // Without `timeout` in proxy_next_upstream the client gets the 504.
    cfg.next_upstream.timeout = false;
    let s = simulate_counts(&cfg).unwrap();
    assert!(s.status_504 > 0);
    assert_eq!(s.status_504, s.upstream_failures);
}

#[test]
fn lab_fault_specs_map_onto_the_model() {
    assert_eq!(
        FaultKind::from_lab_spec("reclaim:toxicity=0.3,delay=0ms..50ms").unwrap(),
        FaultKind::Reclaim {
            p: 0.3,
            delay_min: Us(0),
            delay_max: Us::ms(50)
        }
    );
    assert_eq!(
        FaultKind::from_lab_spec("rst").unwrap(),
        FaultKind::Rst { p: 1.0 }
    );
    assert_eq!(
        FaultKind::from_lab_spec("refuse").unwrap(),
        FaultKind::Refuse
    );
    assert_eq!(
        FaultKind::from_lab_spec("slow-headers:200ms").unwrap(),
        FaultKind::Delay { by: Us::ms(200) }
    );
    assert!(FaultKind::from_lab_spec("status:503").is_err());
    assert!(FaultKind::from_lab_spec("rst:toxicity=2").is_err());
}

#[test]
fn keepalive_cache_follows_the_swap_when_full() {
    // Concurrency (8000 rps × 5 ms ≈ 40) above the cache size (16): after a swap the new
    // address must take over the cache, or the reclaim race would vanish after the first swap.
    let mut cfg = base("alternate:127.0.0.20,127.0.0.30");
    cfg.rps = 8000.0;
    cfg.keepalive = 16;
    cfg.latency = Latency::Fixed { value: Us::ms(5) };
    cfg.duration = Us::s(30);
    cfg.faults = vec![reclaim(0.02)];
    let s = simulate_counts(&cfg).unwrap();
    let half = s.swap_times_us.len() / 2;
    let mid = s.swap_times_us[half];
    // Race NLUs keep happening in the second half of the run.
    let dir = tempfile::tempdir().unwrap();
    simulate(&cfg, dir.path()).unwrap();
    let late = access(dir.path())
        .iter()
        .filter(|l| l.status == 502 && l.msec * 1e6 > mid as f64)
        .count();
    assert!(s.nlu.generation_race_retry > 10, "{:?}", s.nlu);
    assert!(late > 3, "late NLU {late} of {}", s.nlu_total());
}

#[test]
fn aaaa_record_turns_one_peer_into_two() {
    // ipv6=on (default) + an unintended AAAA (::1, nothing listens): two peers, single guard
    // off, so a 2 s reset window on the real backend becomes a max_fails wipeout.
    let mut cfg = SimConfig::new(vec![ServerLine::resolve(NAME, 8080)]);
    cfg.valid = Some(Us::s(5));
    cfg.keepalive = 0;
    cfg.duration = Us::s(40);
    cfg.dns = vec![DnsPhase::lab(Us(0), NAME, "static:127.0.0.20;aaaa=::1").unwrap()];
    cfg.faults = vec![
        FaultWindow {
            start: Us::s(-1),
            end: Us::s(100),
            target: Some("[::1]:8080".into()),
            fault: FaultKind::Refuse,
        },
        FaultWindow {
            start: Us::s(10),
            end: Us::s(12),
            target: Some("127.0.0.20:8080".into()),
            fault: FaultKind::Rst { p: 1.0 },
        },
    ];
    let dir = tempfile::tempdir().unwrap();
    let s = simulate(&cfg, dir.path()).unwrap();
    assert!(s.nlu.maxfails_wipeout > 1000, "{:?}", s.nlu);
    let access = std::fs::read_to_string(dir.path().join("access.log")).unwrap();
    assert!(access.contains("[::1]:8080"));
    let dns = std::fs::read_to_string(dir.path().join("dns.jsonl")).unwrap();
    assert!(dns.contains(r#""qtype":"AAAA""#) && dns.contains(r#""answers":["::1"]"#));
    // The fix: ipv6=off.
    cfg.ipv6 = false;
    let off = simulate_counts(&cfg).unwrap();
    assert_eq!(off.nlu.maxfails_wipeout, 0);
    assert!(
        off.upstream_failures > 0,
        "the 2 s of resets stay ordinary 502s"
    );
}
