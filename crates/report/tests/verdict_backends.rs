//! A lab verdict with a slow dependency shows what the client saw of each backend (table and
//! chart) and the readiness probes, in Markdown and HTML alike.

use resolvelab_diagnose::verdict::{BackendBin, BackendStats, ClientStats, ProbeStats};
use resolvelab_diagnose::{Options, Verdict, diagnose};
use resolvelab_history::logformat::LogFormat;
use resolvelab_report::{Format, render_verdict};

fn verdict(client: ClientStats) -> Verdict {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("access.log");
    std::fs::write(
        &a,
        "1796018401.100 200 \"127.0.0.20:8080\" \"200\" 1.900 GET 1 1 \"1.900\" \"0.000\" \"GET / HTTP/1.1\" 127.0.0.1\n",
    )
    .unwrap();
    let mut o = Options::new(vec![a], vec![]);
    o.log_format = LogFormat::lab();
    o.tz_offset_s = Some(0);
    Verdict {
        verdict_schema: "resolvelab.verdict/v1".into(),
        scenario: Some("slow-dependency".into()),
        status: resolvelab_core::evidence::run::VerdictStatus::Completed,
        summary: String::new(),
        injections: vec![],
        expectations: vec![],
        client: Some(client),
        fleet: None,
        diagnosis: diagnose(&o).unwrap(),
    }
}

fn backend(min: f64, max: f64, pool: Option<f64>) -> BackendStats {
    BackendStats {
        requests: 3,
        min_ms: min,
        p50_ms: min,
        p90_ms: max,
        p99_ms: max,
        max_ms: max,
        pool_wait_max_ms: pool,
        pool_timeouts: pool.map(|_| 0),
        bin_ms: 100,
        bins: vec![
            BackendBin {
                t_ms: 1_796_018_401_000,
                requests: 2,
                max_ms: min,
            },
            BackendBin {
                t_ms: 1_796_018_401_100,
                requests: 1,
                max_ms: max,
            },
        ],
        ..Default::default()
    }
}

#[test]
fn backend_and_probe_tables_and_the_latency_chart() {
    let mut c = ClientStats::default();
    c.backends
        .insert("app-slow".into(), backend(1815.6, 10428.4, Some(8609.8)));
    c.backends
        .insert("<b>fast</b>".into(), backend(1.5, 8.0, None));
    c.probes.insert(
        "app-slow".into(),
        ProbeStats {
            probes: 32,
            ok: 19,
            failed: 13,
            timeouts: 13,
            max_ms: 1002.6,
        },
    );
    let v = verdict(c);
    let md = render_verdict(&v, Format::Md).unwrap();
    assert!(
        md.contains(
            "| app-slow | 3 | 0 | 1815.6 | 1815.6 | 10428.4 | 10428.4 | 10428.4 | 8609.8 | 0 |"
        ),
        "{md}"
    );
    assert!(
        md.contains("| app-slow | 32 | 19 | 13 | 13 | 1002.6 |"),
        "{md}"
    );
    let html = render_verdict(&v, Format::Html).unwrap();
    assert!(html.contains("id=\"backends\"") && html.contains("id=\"probes\""));
    let chart = &html[html.find("id=\"backend-latency\"").expect("chart")..];
    assert!(chart.contains("<svg") && chart.contains("app-slow"));
    assert!(
        !html.contains("<b>fast</b>"),
        "a header value became markup"
    );

    // Nothing slow to see: no chart, the tables stay.
    let mut c = ClientStats::default();
    c.backends.insert("b1".into(), backend(1.0, 3.0, None));
    let html = render_verdict(&verdict(c), Format::Html).unwrap();
    assert!(!html.contains("backend-latency") && html.contains("id=\"backends\""));
}
