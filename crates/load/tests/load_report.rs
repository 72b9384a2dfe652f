//! `load report`: result files written by a real run and by hand are merged and rendered.

mod common;

use resolvelab_load::record::{Header, SCHEMA, read_file};
use resolvelab_load::report::{self, Format};
use resolvelab_load::{
    CancellationToken, ErrorKind, JsonlSink, Live, LoadConfig, Output, RatePlan, Record,
    RecordSink, run_load,
};
use std::io::Write;
use std::path::PathBuf;

fn rec(seq: u64, t_us: i64, status: Option<u16>, error: Option<ErrorKind>) -> Record {
    let sent = error.is_none().then_some(t_us + 100);
    Record {
        t_us,
        sent_us: sent,
        latency_us: sent.map(|_| 2_500 + seq as i64),
        uncorrected_us: sent.map(|_| 2_400 + seq as i64),
        status,
        bytes: if status.is_some() { 5 } else { 0 },
        error,
        conn: sent.map(|_| 1),
        method: "GET".into(),
        header: status.map(|_| "b2".to_string()),
        seq,
        retried: false,
    }
}

fn hand_file(dir: &std::path::Path, name: &str, t0: i64, n: u64, status: u16) -> PathBuf {
    let p = dir.join(name);
    let h = Header {
        schema: SCHEMA.into(),
        target: "http://127.0.0.1:9/x".into(),
        plan: "10".into(),
        start_us: t0,
        seed: 1,
        connections: 1,
        header_capture: Some("x-backend".into()),
        engine: None,
    };
    let mut sink = JsonlSink::create(&p, &h).unwrap();
    // Completion order, not schedule order, as a real run writes them.
    for i in (0..n).rev() {
        let (st, err) = if i % 5 == 4 {
            (None, Some(ErrorKind::Reset))
        } else {
            (Some(status), None)
        };
        sink.record(&rec(i, t0 + i as i64 * 100_000, st, err))
            .unwrap();
    }
    sink.flush().unwrap();
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_run_reads_back_identically() {
    let srv = common::start("127.0.0.51", None).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("load.jsonl");
    let mut cfg = LoadConfig::new(&srv.url(), RatePlan::parse("200").unwrap(), false).unwrap();
    cfg.requests = Some(50);
    cfg.header_capture = Some("x-backend".parse().unwrap());
    let live = Live::new();
    let s = run_load(
        &cfg,
        Output::File(out.clone()),
        live,
        CancellationToken::new(),
    )
    .await
    .unwrap();
    let text = std::fs::read_to_string(&out).unwrap();
    let first: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(first["schema"], SCHEMA);
    assert_eq!(first["header_capture"], "x-backend");
    assert_eq!(
        text.lines().count(),
        51,
        "schema line + one line per request"
    );
    for line in text.lines().skip(1) {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        for field in [
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
        ] {
            assert!(v.get(field).is_some(), "missing {field} in {line}");
        }
        assert_eq!(v["header"], "b1");
    }
    let f = read_file(&out).unwrap();
    assert_eq!(f.records.len(), 50);
    let m = report::merge(&[out]).unwrap();
    assert_eq!(m.summary.requests, s.requests);
    assert_eq!(m.summary.latency.p99_us, s.latency.p99_us);
    assert_eq!(m.summary.classes, s.classes);
    assert_eq!(m.summary.headers["b1"], 50);
}

#[test]
fn merging_files_and_every_format() {
    let dir = tempfile::tempdir().unwrap();
    let t0 = 1_796_000_000_000_000i64;
    let a = hand_file(dir.path(), "a.jsonl", t0, 20, 200);
    let b = hand_file(dir.path(), "b.jsonl", t0 + 50_000, 10, 502);
    // A malformed line is counted, never fatal.
    std::fs::OpenOptions::new()
        .append(true)
        .open(&b)
        .unwrap()
        .write_all(b"{not json\n")
        .unwrap();
    let m = report::merge(&[a.clone(), b.clone()]).unwrap();
    let s = &m.summary;
    assert_eq!(s.requests, 30);
    assert_eq!(s.malformed_lines, 1);
    assert!(m.records.windows(2).all(|w| w[0].1.t_us <= w[1].1.t_us));
    assert_eq!(s.statuses[&200], 16);
    assert_eq!(s.statuses[&502], 8);
    assert_eq!(s.errors["reset"], 6);
    assert_eq!(s.per_second.len(), 2);
    assert_eq!(s.per_second[0].requests, 10 + 10);
    assert_eq!(s.per_second[1].requests, 10);

    let text = report::render(&m, Format::Text).unwrap();
    assert!(text.contains("502:8") && text.contains("reset:6"), "{text}");
    let json: serde_json::Value =
        serde_json::from_str(&report::render(&m, Format::Json).unwrap()).unwrap();
    assert_eq!(json["requests"], 30);
    assert_eq!(json["classes"]["c5xx"], 8);

    let csv = report::render(&m, Format::Csv).unwrap();
    let rows: Vec<Vec<&str>> = csv.lines().map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 30);
    assert!(rows.iter().all(|r| r.len() == 12), "vegeta has 12 columns");
    assert_eq!(
        rows[0][0],
        (t0 as i128 * 1000).to_string(),
        "timestamp in ns"
    );
    assert_eq!(rows[0][1], "200");
    assert_eq!(rows[0][2], "2500000", "latency in ns");
    assert_eq!(rows[0][7], "a.jsonl");
    let reset = rows.iter().find(|r| r[5] == "reset").unwrap();
    assert_eq!(reset[1], "0");

    let html = report::render(&m, Format::Html).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert_eq!(html.matches("<svg").count(), 2);
    // No external assets (the SVG namespace URI is the one `http` that may appear).
    for external in [
        "src=\"http",
        "href=\"http",
        "url(http",
        "@import",
        "src=\"//",
    ] {
        assert!(!html.contains(external), "external asset: {external}");
    }
    assert!(!html.contains("<script src") && !html.contains("<link"));
    assert!(html.contains("Status classes per second"));
}

#[test]
fn foreign_files_are_refused_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.jsonl");
    std::fs::write(&p, "{\"schema\":\"resolvelab.dns/v1\"}\n").unwrap();
    let e = report::merge(std::slice::from_ref(&p))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("x.jsonl:1") && e.contains("resolvelab.load/v1"),
        "{e}"
    );
    std::fs::write(&p, "hello\n").unwrap();
    assert!(
        report::merge(&[p])
            .unwrap_err()
            .to_string()
            .contains("not a load result file")
    );
    let missing = dir.path().join("nope.jsonl");
    assert!(
        report::merge(&[missing])
            .unwrap_err()
            .to_string()
            .contains("cannot read")
    );
}
