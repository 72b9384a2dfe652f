//! The simulated nginx against the shapes of docs/DOMAIN.md (§5, §8): each test is one experiment.

use resolvelab_core::spec::fault::BackendFault;
use resolvelab_core::spec::toxic::ToxicSpec;
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
        mode: mode.parse::<DnsMode>().unwrap(),
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

/// A variable `proxy_pass` whose name gets no answer: each request waits `resolver_timeout`
/// and fails (`110: Operation timed out`). Its timeout is an event of its own kind in the
/// queue — the ninth, which once did not fit the key's kind bits and came back as a fault's
/// start (a panic with no faults, a wrong fault with some).
#[test]
fn a_per_request_lookup_with_no_answer_fails_after_the_resolver_timeout() {
    let mut cfg = SimConfig::new(vec![ServerLine {
        per_request: true,
        ..ServerLine::fixed(NAME, 8080)
    }]);
    cfg.valid = Some(Us::s(5));
    cfg.resolver_timeout = Us::s(2);
    cfg.duration = Us::s(10);
    cfg.rps = 50.0;
    cfg.dns = vec![phase(0, "static:127.0.0.20"), phase(4, "drop")];
    let s = simulate_counts(&cfg).unwrap();
    assert!(s.dns_request_failures > 0, "{s:?}");
    assert!(s.ok > 0 && s.ok < s.requests, "{s:?}");
    assert!(
        s.status_502 + s.status_504 >= s.dns_request_failures,
        "{s:?}"
    );
    // With a fault in the config, the timeouts leave it alone.
    cfg.faults = vec![FaultWindow {
        start: Us::s(100),
        end: Us::s(200),
        target: None,
        fault: FaultKind::Refuse,
    }];
    let with_fault = simulate_counts(&cfg).unwrap();
    assert_eq!(with_fault.requests, s.requests);
    assert_eq!(with_fault.ok, s.ok, "a fault after the run changed nothing");
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
    assert!(with_backup.nlu_total() > baseline.nlu_total());
    assert!(with_backup.disabled_warnings > 0);
    assert!(
        with_backup.nlu.maxfails_wipeout > 0,
        "{:?}",
        with_backup.nlu
    );
    // With max_fails=0 nothing is excluded, and the race still ends in NLU: BUSY skips the
    // backup (the lab's backup [max_fails=0]).
    for s in &mut cfg.servers {
        s.max_fails = 0;
    }
    let mf0 = simulate_counts(&cfg).unwrap();
    assert!(mf0.nlu.generation_race_retry > 0, "{:?}", mf0.nlu);
    assert_eq!(mf0.nlu.maxfails_wipeout, 0);
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
    // The smallest zone nginx accepts: room for about 30 peers of the lab's 1.28.3 (built
    // without SSL; in the lab it held 25 filler peers beside `be`'s, and 30 ran out).
    cfg.zone_bytes = 32 * 1024;
    cfg.duration = Us::s(20);
    assert!(
        (26..40).contains(&cfg.zone_peer_capacity()),
        "{}",
        cfg.zone_peer_capacity()
    );
    cfg.dns.push(phase(5, "multi:40@127.0.1.1"));
    let s = simulate(&cfg, dir.path()).unwrap();
    assert!(s.memory_exhausted >= 1);
    let err = std::fs::read_to_string(dir.path().join("error.log")).unwrap();
    assert!(err.contains("cannot add new server to upstream \"be\", memory exhausted"));
}

/// The zone-exhaustion scenario (F3): `be` and a `filler` group share a 32k zone. The filler's
/// 200 addresses fill it; then be's name moves b1 → b2 while requests still hold b1.
fn shared_zone(zone_bytes: u64, b1_latency: Us) -> SimConfig {
    let mut cfg = base("static:127.0.0.20");
    cfg.valid = Some(Us::s(1));
    cfg.dns_ttl = Us::s(1);
    cfg.zone_bytes = zone_bytes;
    cfg.keepalive = 0;
    cfg.servers[0].max_fails = 0;
    cfg.rps = 100.0;
    cfg.duration = Us::s(14);
    cfg.ipv6 = false;
    cfg.latency = Latency::Fixed { value: Us::ms(1) };
    cfg.backend_latency.insert(
        "127.0.0.20:8080".into(),
        Latency::Fixed { value: b1_latency },
    );
    cfg.zone_filler = Some(ZoneFiller {
        name: "filler.test.local".into(),
        upstream: "filler".into(),
        port: 8080,
    });
    let filler = |at_s: i64, mode: &str| DnsPhase {
        at: Us::s(at_s),
        name: "filler.test.local".into(),
        mode: mode.parse::<DnsMode>().unwrap(),
        aaaa: Vec::new(),
    };
    cfg.dns.push(filler(0, "static:127.0.0.30"));
    cfg.dns.push(filler(3, "multi:200@127.0.0.30"));
    cfg.dns.push(phase(7, "static:127.0.0.30"));
    cfg
}

/// The lab's `zone-sweep` (COMPARISON.md (c), three runs of each point): in the 32k zone `be`
/// shares with the filler, nginx 1.28.3 (built without SSL) held 25 filler peers beside `be`'s
/// two (its old peer busy while its answer changed), and ran out with 30.
#[test]
fn a_shared_32k_zone_holds_what_the_lab_measured() {
    let cap = shared_zone(32 * 1024, Us::ms(100)).zone_peer_capacity();
    assert!((25 + 2..30 + 2).contains(&cap), "{cap} resolved peers");
}

#[test]
fn shared_zone_filler_and_a_zombie_peer_leave_be_empty_for_one_period() {
    let dir = tempfile::tempdir().unwrap();
    let s = simulate(&shared_zone(32 * 1024, Us::ms(100)), dir.path()).unwrap();
    assert_eq!(s.nlu_total(), s.nlu.zone_memory_exhausted, "{s:?}");
    let lines = access(dir.path());
    let nlu: Vec<&Line> = lines.iter().filter(|l| l.addr == "be").collect();
    assert!(!nlu.is_empty());
    // One re-query period (valid 1 s + 1 s) without a peer, 1-hop, then b2 fits.
    let span = nlu.last().unwrap().msec - nlu[0].msec;
    assert!((1.8..=2.1).contains(&span), "{span}");
    assert!((180..=210).contains(&nlu.len()), "{}", nlu.len());
    let err = std::fs::read_to_string(dir.path().join("error.log")).unwrap();
    assert!(
        err.contains("[crit] 1234#0: ngx_slab_alloc() failed: no memory in upstream zone \"be\"")
    );
    assert!(err.contains("cannot add new server to upstream \"filler\", memory exhausted"));
    assert_eq!(
        err.matches("cannot add new server to upstream \"be\", memory exhausted")
            .count(),
        1
    );
    // The filler's 200 records do not fit 512 bytes of UDP: nginx asks again over TCP.
    let dns = std::fs::read_to_string(dir.path().join("dns.jsonl")).unwrap();
    assert!(dns.contains("\"truncated\":true") && dns.contains("\"transport\":\"tcp\""));
    assert!(
        lines
            .iter()
            .filter(|l| l.status == 200)
            .all(|l| !l.addr.contains(", "))
    );
}

#[test]
fn a_large_zone_or_an_idle_old_peer_avoids_the_outage() {
    // 1m holds every peer of both answers: nothing is exhausted.
    let s = simulate_counts(&shared_zone(1024 * 1024, Us::ms(100))).unwrap();
    assert_eq!((s.memory_exhausted, s.status_502), (0, 0));
    // b1 answering in 100 µs is rarely in flight when its name moves: its memory is freed
    // before b2 is added, so b2 takes its place although the filler keeps failing.
    let s = simulate_counts(&shared_zone(32 * 1024, Us(100))).unwrap();
    assert_eq!(s.status_502, 0, "{s:?}");
    assert!(
        s.memory_exhausted >= 5,
        "the filler still retries its missing peers"
    );
}

/// port-exhaustion [netns]: 500 ports, TIME_WAIT never reused, no upstream keep-alive.
fn ports(granularity: Us) -> SimConfig {
    let mut cfg = base("static:127.0.0.20");
    cfg.keepalive = 0;
    cfg.rps = 300.0;
    cfg.duration = Us::s(70);
    cfg.ephemeral_ports = Some(EphemeralPorts {
        count: 500,
        time_wait: Us::s(60),
        granularity,
    });
    cfg
}

#[test]
fn ephemeral_ports_run_out_without_time_wait_reuse() {
    let dir = tempfile::tempdir().unwrap();
    let s = simulate(&ports(Us::ms(2048)), dir.path()).unwrap();
    // 500 ports, then 60 s (plus the timer wheel's rounding) until they come back: 500 more.
    assert_eq!(s.ok, 1000, "{s:?}");
    assert_eq!(s.port_exhausted, 20_000);
    assert_eq!(s.status_502, 20_000);
    assert_eq!(
        s.nlu_total(),
        0,
        "one peer: the single guard ignores max_fails"
    );
    let lines = access(dir.path());
    assert!(lines[..500].iter().all(|l| l.status == 200));
    let failed: Vec<&Line> = lines.iter().filter(|l| l.status == 502).collect();
    assert!(
        failed
            .iter()
            .all(|l| l.ustatus == "502" && !l.addr.contains(", "))
    );
    // The first outage: from the 501st request until the first ports leave TIME_WAIT.
    let back = lines[500..].iter().find(|l| l.status == 200).unwrap();
    let outage = back.msec - lines[500].msec;
    assert!((58.0..=62.1).contains(&outage), "{outage}");
    let err = std::fs::read_to_string(dir.path().join("error.log")).unwrap();
    assert_eq!(
        err.matches("[crit] 1234#0: *").count() + err.matches("[crit] 1235#0: *").count(),
        20_000
    );
    assert!(err.contains(
        "connect() to 127.0.0.20:8080 failed (99: Cannot assign requested address) while connecting to upstream"
    ));
    // Exact 60 s TIME_WAIT: the same counts; without the limit (Linux's loopback reuse), none.
    assert_eq!(simulate_counts(&ports(Us(0))).unwrap().ok, 1000);
    let mut free = ports(Us(0));
    free.ephemeral_ports = None;
    assert_eq!(simulate_counts(&free).unwrap().status_502, 0);
    // The model covers one connection per try only.
    let mut ka = ports(Us(0));
    ka.keepalive = 16;
    let e = ka.validate().unwrap_err().to_string();
    assert!(e.contains("ephemeral_ports") && !e.contains('\n'), "{e}");
}

#[test]
fn first_pick_race_needs_another_worker_and_scales_with_the_window() {
    let mut cfg = base("alternate:127.0.0.20,127.0.0.30");
    cfg.valid = Some(Us::s(1));
    cfg.rps = 3000.0;
    cfg.duration = Us::s(300);
    cfg.client_connections = 64;
    // One worker resolves and serves: the snapshot and the pick are one event-loop step, so no
    // change can fall between them, whatever the window.
    cfg.workers = 1;
    cfg.first_pick_window_us = 700.0;
    let one = simulate_counts(&cfg).unwrap();
    assert!(one.swaps > 140);
    assert_eq!((one.nlu_total(), one.first_pick_expected), (0, 0.0));
    // Two workers, no window: none.
    cfg.workers = 2;
    cfg.first_pick_window_us = 0.0;
    assert_eq!(simulate_counts(&cfg).unwrap().nlu_total(), 0);
    // Two workers: worker 1 takes about half of the 3,000 rps, so each of ~149 changes catches
    // one of its requests with p ≈ 1,500 × window. 700 µs: p ≈ 0.65, ≈ 97 races.
    cfg.first_pick_window_us = 700.0;
    let big = simulate_counts(&cfg).unwrap();
    assert_eq!(big.nlu_total(), big.nlu.generation_race_first_pick);
    assert!(
        (50.0..=140.0).contains(&big.first_pick_expected),
        "{}",
        big.first_pick_expected
    );
    let n = big.nlu.generation_race_first_pick as f64;
    let (lo, hi) =
        resolvelab_sim::nginx::predict::poisson_95(big.first_pick_expected.round() as u64);
    assert!(
        n >= lo.floor() && n <= hi.ceil(),
        "{n} races vs {}",
        big.first_pick_expected
    );
    // The expectation grows with the window: p = 1 − e^(−rate·window), proportional while
    // small (7 µs: at most 3,000 rps × 7 µs per change) and saturating at 700 µs.
    cfg.first_pick_window_us = 7.0;
    let small = simulate_counts(&cfg).unwrap();
    assert!(small.first_pick_expected > 0.0);
    assert!(small.first_pick_expected <= small.swaps as f64 * 3000.0 * 7e-6);
    let ratio = big.first_pick_expected / small.first_pick_expected;
    assert!((30.0..=100.0).contains(&ratio), "{ratio}");
    // The exposure hardly depends on the window (a refused request frees its client connection
    // sooner, which moves later requests between workers a little), and the small window's
    // expectation is linear in it.
    let drift = small.first_pick_exposure_per_us / big.first_pick_exposure_per_us - 1.0;
    assert!(drift.abs() < 0.05, "{drift}");
    let linear = small.first_pick_exposure_per_us * 7.0;
    assert!(
        (small.first_pick_expected / linear - 1.0).abs() < 0.01,
        "{linear}"
    );
    // Only requests of the worker that does not resolve are refused (nginx's pid + 1 in the logs).
    let dir = tempfile::tempdir().unwrap();
    cfg.first_pick_window_us = 700.0;
    cfg.duration = Us::s(60);
    let s = simulate(&cfg, dir.path()).unwrap();
    assert!(s.nlu.generation_race_first_pick > 0);
    let err = std::fs::read_to_string(dir.path().join("error.log")).unwrap();
    let nlu: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("no live upstreams"))
        .collect();
    assert_eq!(nlu.len() as u64, s.nlu.generation_race_first_pick);
    assert!(nlu.iter().all(|l| l.contains("[error] 1235#0:")), "{nlu:?}");
}

#[test]
fn tries_exhausted_with_max_fails_zero() {
    // §8 / backup [max_fails=0]: a failure on a *cached* connection gives its try back (F6), so
    // when every peer failed on cached connections the request still has tries left and ends
    // in a 3-hop NLU (first, other, be). The reclaim race only hits cached connections.
    let two_peers = |keepalive: u32| {
        let mut cfg = SimConfig::new(vec![
            ServerLine {
                max_fails: 0,
                ..ServerLine::fixed("127.0.0.20", 8080)
            },
            ServerLine {
                max_fails: 0,
                ..ServerLine::fixed("127.0.0.30", 8080)
            },
        ]);
        cfg.keepalive = keepalive;
        cfg.duration = Us::s(60);
        cfg.faults = vec![reclaim(0.3)];
        cfg
    };
    let dir = tempfile::tempdir().unwrap();
    let s = simulate(&two_peers(16), dir.path()).unwrap();
    assert!(s.nlu.tries_exhausted > 100, "{:?}", s.nlu);
    assert_eq!(s.nlu_total(), s.nlu.tries_exhausted, "{:?}", s.nlu);
    assert_eq!(s.upstream_failures, 0, "every failed try was compensated");
    let nlu: Vec<Line> = access(dir.path())
        .into_iter()
        .filter(|l| l.addr.ends_with(", be"))
        .collect();
    assert_eq!(nlu.len() as u64, s.nlu.tries_exhausted);
    for l in &nlu {
        let hops: Vec<&str> = l.addr.split(", ").collect();
        assert_eq!(hops.len(), 3, "{l:?}");
        assert_ne!(hops[0], hops[1], "both peers tried: {l:?}");
    }
    // Without keep-alive no connection is ever reused, so the reclaim race has nothing to hit.
    let s0 = simulate_counts(&two_peers(0)).unwrap();
    assert_eq!((s0.try_failures, s0.status_502), (0, 0));
}

#[test]
fn rst_touches_only_new_connections() {
    // The lab backend's `rst` resets connections as it accepts them: nginx's cached keep-alive
    // connections, accepted before the window, keep working.
    let cfg = |keepalive: u32| {
        let mut cfg = base("static:127.0.0.20");
        cfg.keepalive = keepalive;
        cfg.duration = Us::s(20);
        cfg.faults = vec![FaultWindow {
            start: Us::s(10),
            end: Us::s(12),
            target: Some("127.0.0.20:8080".into()),
            fault: FaultKind::from_backend(&"rst".parse().unwrap()).unwrap(),
        }];
        cfg
    };
    let cached = simulate_counts(&cfg(16)).unwrap();
    assert_eq!(
        cached.fault_hits,
        vec![0],
        "warm cache: no new connection in 2 s"
    );
    assert_eq!(cached.status_502, 0);
    // Every try opens a new connection without keep-alive: all 600 requests of the window fail.
    let fresh = simulate_counts(&cfg(0)).unwrap();
    assert_eq!(fresh.fault_hits, vec![600]);
    assert_eq!(fresh.upstream_failures, 600);
}

#[test]
fn reclaim_catches_only_a_reuse_inside_its_gap() {
    // The lab backend's reclaim closes a connection 0–50 ms after a response; only a request
    // sent on it before the close is lost. At 10 rps the next request comes 100 ms later:
    // every close is seen on an idle connection and nothing fails.
    let mut cfg = base("static:127.0.0.20");
    cfg.duration = Us::s(30);
    cfg.rps = 10.0;
    cfg.faults = vec![reclaim(1.0)];
    let slow = simulate_counts(&cfg).unwrap();
    assert!(slow.fault_hits[0] >= 290, "{:?}", slow.fault_hits);
    assert_eq!(slow.try_failures, 0);
    // At 300 rps (3.3 ms apart) almost every close catches the next request.
    cfg.rps = 300.0;
    cfg.faults = vec![reclaim(0.3)];
    let fast = simulate_counts(&cfg).unwrap();
    let caught = fast.try_failures as f64 / fast.fault_hits[0] as f64;
    assert!((0.85..=0.99).contains(&caught), "caught {caught}");
}

#[test]
fn each_worker_has_its_own_keepalive_cache() {
    // The lab's backup [max_fails=0]: the backup is only tried after a primary failed, ~70 times
    // a second. With one cache a reclaimed backup connection is usually reused inside its gap;
    // with two workers the backup requests split between two caches, so a close more often
    // finds its connection idle (lab: 799 of 1,576 closes caught a request).
    let mut cfg = SimConfig::new(vec![
        ServerLine {
            max_fails: 0,
            ..ServerLine::resolve(NAME, 8080)
        },
        ServerLine {
            max_fails: 0,
            backup: true,
            ..ServerLine::fixed("127.0.0.40", 8080)
        },
    ]);
    cfg.valid = Some(Us::s(5));
    cfg.dns = vec![phase(0, "alternate:127.0.0.20,127.0.0.30")];
    cfg.duration = Us::s(90);
    cfg.keepalive_requests = 100_000;
    cfg.latency = Latency::Uniform {
        min: Us(100),
        max: Us(400),
    };
    cfg.faults = vec![reclaim(0.3)];
    let backup_caught = |workers: u32| {
        let mut c = cfg.clone();
        c.workers = workers;
        let s = simulate_counts(&c).unwrap();
        assert_eq!(
            s.nlu_total(),
            s.nlu.tries_exhausted + s.nlu.generation_race_retry
        );
        // Every backup failure ends the request (both lists tried).
        s.nlu.tries_exhausted
    };
    let (one, two) = (backup_caught(1), backup_caught(2));
    assert!(one > 900, "one worker: {one}");
    assert!(two * 10 < one * 9, "one worker {one} vs two {two}");
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
    // The shared zone (TCP retries, zombies) and the port pool (its timer-wheel phase) too.
    for other in [shared_zone(32 * 1024, Us::ms(100)), ports(Us::ms(2048))] {
        let (x, y) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let sx = simulate(&other, x.path()).unwrap();
        assert_eq!(sx, simulate(&other, y.path()).unwrap());
        assert_eq!(simulate_counts(&other).unwrap(), sx);
        for f in ["access.log", "error.log", "dns.jsonl", "load.jsonl"] {
            let same = std::fs::read(x.path().join(f)).unwrap()
                == std::fs::read(y.path().join(f)).unwrap();
            assert!(same, "{f} differs between identical runs");
        }
    }
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
            // `spec` and `hits` only where they apply (`core::evidence::Event`, like the runner).
            &["t_us", "kind", "target"][..],
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
    assert!(e.contains("no DNS phase") && !e.contains('\n'), "{e}");
    let mut cfg = base("static:127.0.0.20");
    cfg.rps = 0.0;
    assert!(cfg.validate().is_err());
    assert!("sometimes".parse::<DnsMode>().is_err());
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
    assert_eq!(cfg.workers, 1, "nginx's default worker_processes");
    let one_line = |c: &SimConfig, what: &str| {
        let e = format!("{:#}", c.validate().unwrap_err());
        assert!(e.contains(what) && !e.contains('\n'), "{e}");
    };
    let mut w = cfg.clone();
    w.workers = 0;
    one_line(&w, "workers");
    let mut a = cfg.clone();
    a.arrivals = vec![Us::s(2), Us::s(1)];
    one_line(&a, "arrivals");
    let mut p = cfg.clone();
    p.pools = vec![BackendPool {
        target: "app".into(),
        name: "app".into(),
        pool: 4,
        round_trips: 1,
        round_trip: Us::ms(1),
        acquire_timeout: Us::s(1),
        probe: None,
    }];
    one_line(&p, "pools[0].target");
    p.pools[0].target = "127.0.0.20:8080".into();
    p.pools[0].pool = 0;
    one_line(&p, "pool must be");
    let mut d = cfg.clone();
    d.faults[0].fault = FaultKind::Stale {
        p: 0.5,
        delay_min: Us::ms(5),
        delay_max: Us::ms(1),
    };
    one_line(&d, "delay_max");
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
        FaultKind::from_backend(&"reclaim:toxicity=0.3,delay=0ms..50ms".parse().unwrap()).unwrap(),
        FaultKind::Reclaim {
            p: 0.3,
            delay_min: Us(0),
            delay_max: Us::ms(50)
        }
    );
    assert_eq!(
        FaultKind::from_backend(&"rst".parse().unwrap()).unwrap(),
        FaultKind::Rst { p: 1.0 }
    );
    assert_eq!(
        FaultKind::from_backend(&"refuse".parse().unwrap()).unwrap(),
        FaultKind::Refuse
    );
    assert_eq!(
        FaultKind::from_backend(&"slow-headers:200ms".parse().unwrap()).unwrap(),
        FaultKind::Delay { by: Us::ms(200) }
    );
    assert!(FaultKind::from_backend(&"status:503".parse().unwrap()).is_err());
    assert!("rst:toxicity=2".parse::<BackendFault>().is_err());
    let toxic = |t: &str| FaultKind::from_toxic(&t.parse::<ToxicSpec>().unwrap());
    assert_eq!(
        toxic("latency:delay=200ms,direction=downstream").unwrap(),
        FaultKind::Delay { by: Us::ms(200) }
    );
    assert_eq!(toxic("down").unwrap(), FaultKind::Refuse);
    assert!(toxic("bandwidth:rate=10").is_err());
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

#[test]
fn pool_backend_queues_a_burst_in_batches() {
    // Seed 003: 9 sequential round trips of 200 ms through a pool of 4 connections. A burst
    // of 20 requests queues in batches of 4, each batch 1.8 s behind the previous one, and the
    // readiness probe (one round trip through the same pool) times out behind it.
    let app = "127.0.0.20:8080";
    let mut cfg = SimConfig::new(vec![ServerLine::fixed("127.0.0.20", 8080)]);
    cfg.duration = Us::s(20);
    cfg.latency = Latency::Fixed { value: Us(100) };
    cfg.arrivals = (0..20).map(|i| Us(1_500_000 + i * 10_000)).collect();
    cfg.names.insert(app.into(), "app".into());
    cfg.pools = vec![BackendPool {
        target: app.into(),
        name: "app".into(),
        pool: 4,
        round_trips: 9,
        round_trip: Us::ms(200),
        acquire_timeout: Us::s(20),
        probe: Some(Probe {
            interval: Us::s(1),
            timeout: Us::s(1),
            path: "/ready".into(),
        }),
    }];
    let dir = tempfile::tempdir().unwrap();
    let s = simulate(&cfg, dir.path()).unwrap();
    assert_eq!((s.ok, s.status_503), (20, 0));
    assert_eq!(s.pool_connections, vec![4]);
    let mut lat = Vec::new();
    let load = std::fs::read_to_string(dir.path().join("load.jsonl")).unwrap();
    for l in load.lines().skip(1) {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        assert_eq!(v["header"], "app", "{l}");
        lat.push(v["latency_us"].as_i64().unwrap());
    }
    lat.sort_unstable();
    assert!((1_800_000..1_810_000).contains(&lat[0]), "{lat:?}");
    // Five batches of four: the k-th waits about k × 1.8 s.
    let batches: std::collections::BTreeSet<i64> = lat
        .iter()
        .map(|l| (*l as f64 / 1.8e6).round() as i64)
        .collect();
    assert_eq!(batches, (1..=5).collect(), "{lat:?}");
    let probes = std::fs::read_to_string(dir.path().join("probes.jsonl")).unwrap();
    let failed = probes.matches(r#""error":"timeout""#).count();
    let ok = probes.matches(r#""ok":true"#).count();
    assert!(failed >= 5 && ok >= 5, "failed {failed}, ok {ok}");
    let b: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("backends.json")).unwrap())
            .unwrap();
    assert!(
        b["app"]["pool"]["wait_us_max"].as_i64().unwrap() >= 5_400_000,
        "{b}"
    );
    assert_eq!(
        b["app"]["pool"]["timeouts"], 0,
        "a prober giving up is not a pool timeout"
    );

    // A 3 s acquire timeout answers 503 to everyone who would wait longer.
    cfg.pools[0].acquire_timeout = Us::s(3);
    let t = simulate_counts(&cfg).unwrap();
    assert_eq!(t.ok + t.status_503, 20);
    assert!(t.ok >= 8 && t.status_503 >= 8, "{t:?}");
    assert_eq!(
        t.nlu_total() + t.upstream_failures,
        0,
        "a 503 is an answer, not a failure"
    );
    let dir = tempfile::tempdir().unwrap();
    simulate(&cfg, dir.path()).unwrap();
    let b: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("backends.json")).unwrap())
            .unwrap();
    assert_eq!(b["app"]["pool"]["timeouts"], t.status_503, "{b}");
}

#[test]
fn shared_zone_ports_and_backend_latency_read_from_toml() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sim.toml");
    std::fs::write(
        &path,
        r#"rps = 100
duration = "14s"
valid = "1s"
keepalive = 0
zone_bytes = 32768
zone_filler = { name = "filler.test.local" }
ephemeral_ports = { count = 500, granularity = "0ms" }
backend_latency = { "127.0.0.20:8080" = { dist = "fixed", value = "100ms" } }

[[servers]]
host = "app.test.local"
resolve = true
max_fails = 0

[[dns]]
at = "-1s"
name = "app.test.local"
mode = "static:127.0.0.20"

[[dns]]
at = "-1s"
name = "filler.test.local"
mode = "multi:200@127.0.0.30"
"#,
    )
    .unwrap();
    let cfg = SimConfig::from_path(&path).unwrap();
    let f = cfg.zone_filler.as_ref().unwrap();
    assert_eq!((f.upstream.as_str(), f.port), ("filler", 8080));
    let p = cfg.ephemeral_ports.as_ref().unwrap();
    assert_eq!(
        (p.count, p.time_wait, p.granularity),
        (500, Us::s(60), Us(0))
    );
    let s = simulate_counts(&cfg).unwrap();
    assert!(s.memory_exhausted > 0, "the filler does not fit 32k");
    // be's one peer was in before the filler: no NLU. The 500 ports last 500 requests, and
    // none leaves TIME_WAIT within 14 s.
    assert_eq!(s.nlu_total(), 0, "{s:?}");
    assert_eq!((s.ok, s.port_exhausted, s.status_502), (500, 900, 900));
    // A filler without DNS phases, or named like the main group, is refused on one line.
    let mut bad = cfg.clone();
    bad.dns.retain(|p| p.name != "filler.test.local");
    let e = bad.validate().unwrap_err().to_string();
    assert!(
        e.contains("zone_filler") && e.contains("filler.test.local"),
        "{e}"
    );
    let mut bad = cfg.clone();
    bad.zone_filler.as_mut().unwrap().upstream = "be".into();
    assert!(
        bad.validate()
            .unwrap_err()
            .to_string()
            .contains("zone_filler.upstream")
    );
}

#[test]
fn client_connections_are_accepted_in_epollexclusive_order() {
    // nginx re-registers a worker on the listening socket after its 1st, 17th, 33rd … accept
    // and Linux wakes the first registered worker: after the lab runner's readiness connect
    // (worker 0's 1st accept), the load's first connection goes to worker 1 (its 1st), the
    // next 16 to worker 0 (its 2nd–17th), then 16 to worker 1, and so on.
    let mut cfg = SimConfig::new(vec![ServerLine::fixed("127.0.0.20", 8080)]);
    cfg.workers = 2;
    cfg.accepts_before_load = 1;
    cfg.rps = 1000.0;
    cfg.duration = Us::ms(100);
    // Every request holds its client connection for 60 ms and logs one error line with its
    // worker's pid: the first 60 requests open 60 connections.
    cfg.latency = Latency::Fixed { value: Us::ms(60) };
    cfg.faults = vec![FaultWindow {
        start: Us(0),
        end: Us::s(10),
        target: None,
        fault: FaultKind::Fail { p: 1.0 },
    }];
    let dir = tempfile::tempdir().unwrap();
    simulate(&cfg, dir.path()).unwrap();
    let err = std::fs::read_to_string(dir.path().join("error.log")).unwrap();
    let mut by_conn = std::collections::BTreeMap::new();
    for l in err.lines() {
        let pid = l
            .split("] ")
            .nth(1)
            .and_then(|s| s.split('#').next())
            .unwrap();
        let conn: u64 = l
            .split(": *")
            .nth(1)
            .unwrap()
            .split(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        by_conn.insert(conn, pid.to_string());
    }
    let order: Vec<&str> = by_conn.values().map(String::as_str).take(49).collect();
    let mut want = vec!["1235"];
    want.extend(["1234"; 16]);
    want.extend(["1235"; 16]);
    want.extend(["1234"; 16]);
    assert_eq!(order, want);
    // Without the readiness connect, worker 0 takes the first connection instead.
    cfg.accepts_before_load = 0;
    let dir = tempfile::tempdir().unwrap();
    simulate(&cfg, dir.path()).unwrap();
    let err = std::fs::read_to_string(dir.path().join("error.log")).unwrap();
    assert!(
        err.lines().next().unwrap().contains("] 1234#0: *1 "),
        "{err:.300}"
    );
}
