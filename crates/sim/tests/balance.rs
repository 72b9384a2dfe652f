//! Seed 004's seven checks and the golden trace of every strategy.

use resolvelab_sim::balance::{
    Backend, BalanceInput, ConnectionSpec, DnsAnswer, RequestSpec, RequestTrace, Strategy,
    golden_input, render_html, render_table, simulate,
};

/// One compact line per request: `id t selected connection reused activeBefore doneAt dns exp`.
fn compact(rows: &[RequestTrace]) -> Vec<String> {
    rows.iter()
        .map(|r| {
            format!(
                "{} t{} {} {} {} a{} d{} [{}]→{}",
                r.id,
                r.arrival,
                r.selected,
                r.connection,
                if r.reused { "reused" } else { "new" },
                r.active_before,
                r.done_at,
                r.dns_returned.join(","),
                r.dns_cache_expires_at
            )
        })
        .collect()
}

const GOLDEN_DNS: [&str; 12] = [
    "req-1 t0 A conn-1 reused a0 d8 [A,B]→5",
    "req-2 t1 B conn-2 reused a0 d2 [A,B]→5",
    "req-3 t2 A conn-1 reused a1 d9 [A,B]→5",
    "req-4 t3 B conn-2 reused a0 d5 [A,B]→5",
    "req-5 t4 A conn-3 new a2 d10 [A,B]→5",
    "req-6 t5 B conn-2 reused a0 d7 [A,B]→10",
    "req-7 t6 A conn-3 reused a3 d15 [A,B]→10",
    "req-8 t7 B conn-2 reused a0 d8 [A,B]→10",
    "req-9 t8 A conn-1 reused a3 d13 [A,B]→10",
    "req-10 t9 B conn-2 reused a0 d12 [A,B]→10",
    "req-11 t10 B conn-2 reused a1 d14 [B,C]→15",
    "req-12 t11 C conn-4 new a0 d13 [B,C]→15",
];

#[test]
fn golden_trace_dns() {
    let rows = simulate(&golden_input(), Strategy::Dns).unwrap();
    assert_eq!(compact(&rows), GOLDEN_DNS);
}

#[test]
fn golden_trace_proxy_weighted_and_rr() {
    // A×5, B, C cycling; connections follow the selection, DNS is only observed.
    let expected = [
        "req-1 t0 A conn-1 reused a0 d8 [A,B]→5",
        "req-2 t1 A conn-1 reused a1 d2 [A,B]→5",
        "req-3 t2 A conn-1 reused a1 d9 [A,B]→5",
        "req-4 t3 A conn-3 new a2 d5 [A,B]→5",
        "req-5 t4 A conn-3 reused a3 d10 [A,B]→5",
        "req-6 t5 B conn-2 reused a0 d7 [A,B]→10",
        "req-7 t6 C conn-4 new a0 d15 [A,B]→10",
        "req-8 t7 A conn-3 reused a3 d8 [A,B]→10",
        "req-9 t8 A conn-1 reused a2 d13 [A,B]→10",
        "req-10 t9 A conn-1 reused a2 d12 [A,B]→10",
        "req-11 t10 A conn-3 reused a2 d14 [B,C]→15",
        "req-12 t11 A conn-3 reused a3 d13 [B,C]→15",
    ];
    let weighted = simulate(&golden_input(), Strategy::ProxyWeighted).unwrap();
    assert_eq!(compact(&weighted), expected);
    let rr = simulate(&golden_input(), Strategy::ProxyRr).unwrap();
    assert_eq!(weighted, rr, "proxy-rr uses the same weight slots");
}

#[test]
fn golden_trace_proxy_least() {
    // Completions at an arrival's instant are released first (t=2: req-2 is done, B is idle
    // again and wins the B/C tie by id).
    let expected = [
        "req-1 t0 A conn-1 reused a0 d8 [A,B]→5",
        "req-2 t1 B conn-2 reused a0 d2 [A,B]→5",
        "req-3 t2 B conn-2 reused a0 d9 [A,B]→5",
        "req-4 t3 C conn-3 new a0 d5 [A,B]→5",
        "req-5 t4 A conn-1 reused a1 d10 [A,B]→5",
        "req-6 t5 C conn-3 reused a0 d7 [A,B]→10",
        "req-7 t6 A conn-4 new a2 d15 [A,B]→10",
        "req-8 t7 C conn-3 reused a0 d8 [A,B]→10",
        "req-9 t8 C conn-3 reused a0 d13 [A,B]→10",
        "req-10 t9 B conn-2 reused a0 d12 [A,B]→10",
        "req-11 t10 A conn-1 reused a1 d14 [B,C]→15",
        "req-12 t11 A conn-1 reused a2 d13 [B,C]→15",
    ];
    let rows = simulate(&golden_input(), Strategy::ProxyLeast).unwrap();
    assert_eq!(compact(&rows), expected);
}

/// Check 1: TTL cache, answer change, address selection and connection reuse.
#[test]
fn check1_ttl_cache_answer_change_and_reuse() {
    let rows = simulate(&golden_input(), Strategy::Dns).unwrap();
    // The cache is refilled at its expiry (t=5) from the authority's answer *then*: still [A,B].
    assert_eq!(rows[5].dns_cache_expires_at, 10);
    assert_eq!(rows[5].dns_returned, ["A", "B"]);
    // At t=7 the authority says [B,C], but the cache wins until 10.
    assert_eq!(rows[7].dns_returned, ["A", "B"]);
    assert_eq!(rows[7].selected, "B");
    // The first [B,C] at t=10; B's existing connection carries it.
    assert_eq!(rows[10].dns_returned, ["B", "C"]);
    assert_eq!(
        (rows[10].selected.as_str(), rows[10].connection.as_str()),
        ("B", "conn-2")
    );
    assert!(rows[10].reused);
    // C needs a new connection.
    assert_eq!(rows[11].selected, "C");
    assert!(!rows[11].reused);
    assert_eq!(rows[11].connection, "conn-4");
}

/// Check 2: the weighted proxy choice does not depend on DNS TTL or answers.
#[test]
fn check2_weighted_independent_of_dns() {
    let base: Vec<String> = simulate(&golden_input(), Strategy::ProxyWeighted)
        .unwrap()
        .into_iter()
        .map(|r| r.selected)
        .collect();
    let mut other = golden_input();
    other.dns = vec![
        DnsAnswer {
            at: 0,
            addresses: vec!["C".into()],
            ttl: 1,
        },
        DnsAnswer {
            at: 3,
            addresses: vec!["B".into(), "A".into()],
            ttl: 100,
        },
    ];
    let changed: Vec<String> = simulate(&other, Strategy::ProxyWeighted)
        .unwrap()
        .into_iter()
        .map(|r| r.selected)
        .collect();
    assert_eq!(base, changed);
    assert_eq!(base.concat(), "AAAAABCAAAAA");
    // ...while the DNS observation did change.
    let rows = simulate(&other, Strategy::ProxyWeighted).unwrap();
    assert_eq!(rows[0].dns_returned, ["C"]);
}

/// Check 3: least-connections follows service durations (long requests keep a backend busy).
#[test]
fn check3_least_connections_uses_service_time() {
    let mut input = golden_input();
    for b in &mut input.backends {
        b.weight = 1;
    }
    // A gets a very long request first, then short ones: B and C alternate while A is busy.
    input.requests = [(0, 100), (1, 1), (2, 1), (3, 1), (4, 1), (5, 1)]
        .into_iter()
        .map(|(arrival, service)| RequestSpec { arrival, service })
        .collect();
    let picks: String = simulate(&input, Strategy::ProxyLeast)
        .unwrap()
        .iter()
        .map(|r| r.selected.clone())
        .collect();
    // t=1: B,C idle (tie → B); t=2: B released at 2 → B again; every short one lands on B.
    assert_eq!(picks, "ABBBBB");
    // Make the short ones overlap: A's one long request still counts as active, so A only gets
    // another request when everyone has one (tie → id), and B/C take turns as they complete.
    for r in &mut input.requests[1..] {
        r.service = 3;
    }
    let picks: String = simulate(&input, Strategy::ProxyLeast)
        .unwrap()
        .iter()
        .map(|r| r.selected.clone())
        .collect();
    assert_eq!(picks, "ABCABC");
}

/// Check 4: DNS does not remove an unhealthy address; the proxy filters it.
#[test]
fn check4_dns_keeps_unhealthy_proxy_filters() {
    let mut input = golden_input();
    input.backends[1].healthy = false;
    let err = simulate(&input, Strategy::Dns).unwrap_err().to_string();
    assert!(
        err.contains("DNS returned unhealthy backend B"),
        "unexpected error: {err}"
    );
    for s in [
        Strategy::ProxyWeighted,
        Strategy::ProxyRr,
        Strategy::ProxyLeast,
    ] {
        let rows = simulate(&input, s).unwrap();
        assert!(rows.iter().all(|r| r.selected != "B"), "{s} selected B");
        // The DNS observation still lists B: filtering is not a DNS change.
        assert!(rows[0].dns_returned.contains(&"B".to_string()));
    }
}

/// Check 5: invalid input is rejected before running, each with its own message.
#[test]
fn check5_invalid_input_rejected() {
    type Mutation = Box<dyn Fn(&mut BalanceInput)>;
    let cases: Vec<(Mutation, &str)> = vec![
        (
            Box::new(|i| i.requests[3].arrival = 1),
            "requests must be in time order",
        ),
        (
            Box::new(|i| i.strategy = Some("random".into())),
            "unknown strategy \"random\"",
        ),
        (Box::new(|i| i.dns[1].ttl = 0), "TTL must be positive"),
        (Box::new(|i| i.dns[0].ttl = -5), "TTL must be positive"),
        (
            Box::new(|i| i.backends[2].id = "A".into()),
            "duplicate backend id",
        ),
        (
            Box::new(|i| i.connections[1].id = "conn-1".into()),
            "duplicate connection id",
        ),
        (
            Box::new(|i| i.max_streams = 0),
            "stream capacity must be at least 1",
        ),
        (
            Box::new(|i| i.dns[1].at = 0),
            "answers must be in time order",
        ),
        (
            Box::new(|i| i.dns[0].addresses = vec!["Z".into()]),
            "not a backend id",
        ),
    ];
    for (mutate, needle) in cases {
        let mut input = golden_input();
        mutate(&mut input);
        let err = input.validate().unwrap_err();
        let msg = format!("{err:#}");
        assert!(msg.contains(needle), "{msg:?} does not mention {needle:?}");
        assert!(!msg.contains('\n'), "one line: {msg:?}");
        // simulate refuses the same input without producing rows.
        assert!(simulate(&input, Strategy::ProxyLeast).is_err());
    }
    assert!("random".parse::<Strategy>().is_err());
}

/// Check 6: supplied connection ids never collide with generated ones.
#[test]
fn check6_supplied_ids_never_collide() {
    let mut input = golden_input();
    input.connections = vec![
        ConnectionSpec {
            id: "conn-1".into(),
            address: "A".into(),
            reusable_until: 20,
        },
        ConnectionSpec {
            id: "conn-3".into(),
            address: "B".into(),
            reusable_until: 20,
        },
        ConnectionSpec {
            id: "conn-4".into(),
            address: "C".into(),
            reusable_until: 0, // expired: never reused, but its id stays taken
        },
    ];
    let rows = simulate(&input, Strategy::Dns).unwrap();
    let new_ids: Vec<&str> = rows
        .iter()
        .filter(|r| !r.reused)
        .map(|r| r.connection.as_str())
        .collect();
    assert!(!new_ids.is_empty());
    for id in &new_ids {
        assert!(
            !["conn-1", "conn-3", "conn-4"].contains(id),
            "generated id {id} collides"
        );
    }
    let mut uniq = new_ids.clone();
    uniq.sort();
    uniq.dedup();
    assert_eq!(uniq.len(), new_ids.len(), "generated ids are unique");
    assert_eq!(new_ids[0], "conn-2");
}

/// Check 7: long streams filling a connection's capacity open a new connection to the same backend.
#[test]
fn check7_long_streams_open_new_connection() {
    let input = BalanceInput {
        strategy: None,
        requests: vec![
            RequestSpec {
                arrival: 0,
                service: 10,
            },
            RequestSpec {
                arrival: 0,
                service: 10,
            },
            RequestSpec {
                arrival: 0,
                service: 1,
            },
        ],
        dns: vec![DnsAnswer {
            at: 0,
            addresses: vec!["A".into()],
            ttl: 30,
        }],
        backends: vec![Backend {
            id: "A".into(),
            weight: 1,
            healthy: true,
        }],
        connections: vec![ConnectionSpec {
            id: "conn-1".into(),
            address: "A".into(),
            reusable_until: 30,
        }],
        connection_lifetime: 30,
        max_streams: 2,
    };
    let rows = simulate(&input, Strategy::Dns).unwrap();
    assert_eq!(rows[0].connection, "conn-1");
    assert_eq!(rows[1].connection, "conn-1");
    assert_eq!(rows[2].connection, "conn-2");
    assert!(!rows[2].reused);
    assert_eq!(rows[2].selected, "A", "same backend, new connection");
}

#[test]
fn input_round_trips_through_json_and_toml() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("in.json");
    std::fs::write(&json, serde_json::to_string(&golden_input()).unwrap()).unwrap();
    assert_eq!(BalanceInput::from_path(&json).unwrap(), golden_input());
    let tml = dir.path().join("in.toml");
    std::fs::write(&tml, toml::to_string(&golden_input()).unwrap()).unwrap();
    assert_eq!(BalanceInput::from_path(&tml).unwrap(), golden_input());
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, r#"{"requests": []}"#).unwrap();
    let err = format!("{:#}", BalanceInput::from_path(&bad).unwrap_err());
    assert!(err.contains("bad.json"), "{err}");
}

#[test]
fn renders_table_and_self_contained_html() {
    let input = golden_input();
    let rows = simulate(&input, Strategy::Dns).unwrap();
    let table = render_table(&rows);
    assert_eq!(table.lines().count(), 13);
    assert!(table.lines().nth(1).unwrap().starts_with("req-1 "));
    let html = render_html(&input, Strategy::Dns, &rows);
    assert!(html.contains("<svg"));
    for lane in [
        "DNS authority",
        "DNS cache",
        "backend A",
        "backend C",
        "conn-1 → A (pre-existing)",
        "conn-4 → C",
    ] {
        assert!(html.contains(lane), "missing lane {lane}");
    }
    // Streams shown: conn-1 carries req-1 and req-3 at the same time, in two stream rows.
    assert!(html.contains("req-3 s2"));
    // Self-contained: no external resources.
    assert!(!html.contains("src=") && !html.contains("<link ") && !html.contains("href="));
}
