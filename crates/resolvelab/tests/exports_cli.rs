//! `resolvelab diagnose --logs EXPORT`: log-store exports read as they come, split by the
//! instance their labels name, each instance diagnosed on its own (tests/fixtures/exports).
//!
//! Truth, written from how the fixtures were made (their README): every export holds the same
//! two instances — a 4 s cut of the real-nginx `nxdomain` run and the same cut 2 s later — so
//! each instance's diagnosis must equal the one of its plain logs (`plain/NAME/`) in everything
//! but the file references, and every reference must name the export record holding the very
//! line the plain report cites. The fleet: one incident, 2 of 2 instances, starts 2,000 ms apart;
//! with the run's nginx.conf (`valid=5s`: a 6,000 ms re-query period) a DNS answer change.

mod common;
use common::bin;
use serde_json::Value;
use std::io::Read;
use std::path::{Path, PathBuf};

fn exports() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/exports")
}

fn gunzip(p: &Path) -> String {
    let mut s = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(p).unwrap())
        .read_to_string(&mut s)
        .unwrap();
    s
}

/// One export: its format, the files given to --logs, extra arguments, its instances' names.
type Case = (
    &'static str,
    Vec<PathBuf>,
    Vec<&'static str>,
    [&'static str; 2],
);

fn formats() -> Vec<Case> {
    let x = exports();
    let cri = |n: &str, k: char| {
        x.join(format!(
            "cri/var/log/pods/web_{n}_6f1c2a9e-{k}000-4b5c-9d8e-0123456789ab/nginx/0.log.gz"
        ))
    };
    vec![
        (
            "loki",
            vec![x.join("loki.jsonl.gz")],
            vec![],
            ["web-1", "web-2"],
        ),
        (
            "elasticsearch",
            vec![x.join("elasticsearch.json.gz")],
            vec![],
            ["web-1", "web-2"],
        ),
        (
            "cloudwatch",
            vec![
                x.join("cloudwatch-access.json.gz"),
                x.join("cloudwatch-error.json.gz"),
            ],
            vec![],
            ["i-0a1b2c3d4e5f60001", "i-0a1b2c3d4e5f60002"],
        ),
        (
            "clickhouse",
            vec![x.join("clickhouse.jsonl.gz")],
            vec!["--message-field", "message", "--instance-field", "hostname"],
            ["web-1", "web-2"],
        ),
        (
            "cri",
            vec![cri("web-1", '1'), cri("web-2", '2')],
            vec![],
            ["web-1", "web-2"],
        ),
    ]
}

/// The fleet report (JSON) and the partial with every instance's diagnosis.
fn fleet(args: &[&str], logs: &[PathBuf]) -> (Value, Value) {
    let tmp = tempfile::tempdir().unwrap();
    let part = tmp.path().join("all.json");
    let mut a = args.to_vec();
    a.extend(["--partial", part.to_str().unwrap(), "-o", "/dev/stdout"]);
    let report = diagnose(&a, logs);
    let p = serde_json::from_str(&std::fs::read_to_string(&part).unwrap()).unwrap();
    (report, p)
}

/// `resolvelab diagnose` in the lab's format and clock, as JSON, with these inputs.
fn lab_json(inputs: &[std::ffi::OsString]) -> Value {
    let o = bin()
        .args(["diagnose", "--log-format", "lab", "--tz-offset", "+00:00"])
        .args(["--format", "json"])
        .args(inputs)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    serde_json::from_slice(&o.stdout).unwrap()
}

fn diagnose(args: &[&str], logs: &[PathBuf]) -> Value {
    let mut a: Vec<std::ffi::OsString> = vec!["--logs".into()];
    a.extend(logs.iter().map(|l| l.into()));
    a.extend(args.iter().map(|x| x.into()));
    lab_json(&a)
}

fn plain(n: usize) -> Value {
    let dir = exports().join(format!("plain/web-{n}"));
    lab_json(&[
        "--access".into(),
        dir.join("access.log.gz").into(),
        "--error".into(),
        dir.join("error.log.gz").into(),
    ])
}

/// The diagnosis without what names files: inputs, parse accounting and every `at`.
fn content(d: &Value) -> Value {
    let mut d = d.clone();
    let o = d.as_object_mut().unwrap();
    o.remove("inputs");
    o.remove("parse");
    strip_at(&mut d);
    d
}

fn strip_at(v: &mut Value) {
    match v {
        Value::Object(o) => {
            o.remove("at");
            o.values_mut().for_each(strip_at);
        }
        Value::Array(a) => a.iter_mut().for_each(strip_at),
        _ => {}
    }
}

/// The log line an export reference names: `FILE:LINE` or `FILE:hits.hits[I]`/`FILE:events[I]`.
fn line_at(at: &str) -> String {
    if let Some((file, item)) = at.rsplit_once(':')
        && let Some(i) = item
            .strip_suffix(']')
            .and_then(|s| s.rsplit_once('['))
            .map(|x| x.1)
    {
        let doc: Value = serde_json::from_str(&gunzip(Path::new(file))).unwrap();
        let i: usize = i.parse().unwrap();
        return match &doc.get("events") {
            Some(ev) => ev[i]["message"].as_str().unwrap().to_string(),
            None => doc["hits"]["hits"][i]["_source"]["message"]
                .as_str()
                .unwrap()
                .to_string(),
        };
    }
    let (file, n) = at.rsplit_once(':').unwrap();
    let n: usize = n.parse().unwrap();
    let raw = gunzip(Path::new(file))
        .lines()
        .nth(n - 1)
        .unwrap()
        .to_string();
    if file.ends_with(".jsonl.gz") {
        let v: Value = serde_json::from_str(&raw).unwrap();
        let key = if v.get("line").is_some() {
            "line"
        } else {
            "message"
        };
        return v[key].as_str().unwrap().to_string();
    }
    // A central syslog file: `MMM DD HH:MM:SS HOST nginx: <line>`.
    if file.ends_with("syslog.log.gz") {
        return raw.split_once(" nginx: ").unwrap().1.to_string();
    }
    // kubectl --prefix --timestamps: `[pod/NAME/CONTAINER] <time> <line>`.
    if let Some(rest) = raw.strip_prefix("[pod/") {
        return rest.splitn(3, ' ').nth(2).unwrap().to_string();
    }
    // CRI: `<time> <stream> <tag> <line>` (a joined line: its first part starts it).
    raw.splitn(4, ' ').nth(3).unwrap().to_string()
}

fn plain_line(at: &str) -> String {
    let (file, n) = at.rsplit_once(':').unwrap();
    gunzip(Path::new(file))
        .lines()
        .nth(n.parse::<usize>().unwrap() - 1)
        .unwrap()
        .to_string()
}

#[test]
fn every_export_splits_into_its_instances_and_names_their_records() {
    let plains = [plain(1), plain(2)];
    for (format, logs, args, names) in formats() {
        let (fleet, partial) = fleet(&args, &logs);
        assert_eq!(fleet["schema"], "resolvelab.fleet/v1", "{format}");
        let got: Vec<&str> = fleet["instances"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["name"].as_str().unwrap())
            .collect();
        assert_eq!(got, names, "{format}");
        for (k, name) in names.iter().enumerate() {
            let d = &partial["instances"][name];
            assert_eq!(content(d), content(&plains[k]), "{format}: {name}");
            let ev = d["incidents"][0]["evidence"].as_array().unwrap();
            let want = plains[k]["incidents"][0]["evidence"].as_array().unwrap();
            for (e, w) in ev.iter().zip(want) {
                let at = e["at"].as_str().unwrap();
                assert!(
                    !at.contains("resolvelab-input-"),
                    "{format}: a temporary file: {at}"
                );
                // The joined CRI line starts with its first part's text.
                let (got, want) = (line_at(at), plain_line(w["at"].as_str().unwrap()));
                assert!(
                    want.starts_with(&got) && !got.is_empty(),
                    "{format} {at}: `{got}` vs `{want}`"
                );
            }
        }
        let i = &fleet["incidents"].as_array().unwrap()[..];
        assert_eq!(i.len(), 1, "{format}");
        assert_eq!(
            (i[0]["hit"].as_u64(), i[0]["start_spread_ms"].as_i64()),
            (Some(2), Some(2000))
        );
        assert_eq!(
            i[0]["reading"]["kind"], "undetermined",
            "{format}: no re-query period"
        );
    }
}

#[test]
fn with_the_configuration_the_fleet_reads_an_answer_change() {
    let conf = exports().join("../diagnose/real/nxdomain/nginx.conf");
    let conf = conf.to_str().unwrap();
    let fleet = diagnose(&["--nginx-conf", conf], &[exports().join("loki.jsonl.gz")]);
    let i = &fleet["incidents"][0];
    assert_eq!(
        i["reading"]["kind"], "dns-answer-change",
        "{}",
        i["reading"]["text"]
    );
    assert!(i["reading"]["text"].as_str().unwrap().contains("(6000 ms)"));
}

#[test]
fn one_instance_of_an_export_is_one_diagnosis() {
    let tmp = tempfile::tempdir().unwrap();
    let part = tmp.path().join("p.json");
    let d = diagnose(
        &[
            "--instance",
            "web-2",
            "--partial",
            part.to_str().unwrap(),
            "-o",
            "/dev/stdout",
        ],
        &[exports().join("loki.jsonl.gz")],
    );
    assert_eq!(d["schema"], "resolvelab.diagnosis/v1");
    assert_eq!(content(&d), content(&plain(2)));
    let p: Value = serde_json::from_str(&std::fs::read_to_string(&part).unwrap()).unwrap();
    assert_eq!(
        p["instances"]
            .as_object()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        ["web-2"]
    );
}

#[test]
fn what_cannot_be_split_is_refused_in_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    // network-safe: `06:00:00` is a log record's time; the runs read files only.
    let nolabel = tmp.path().join("nolabel.jsonl");
    std::fs::write(
        &nolabel,
        "{\"labels\":{\"job\":\"nginx\"},\"line\":\"x\",\"timestamp\":\"2026-11-30T06:00:00Z\"}\n",
    )
    .unwrap();
    let plain = exports().join("plain/web-1/access.log.gz");
    for (logs, extra, says) in [
        (
            vec![nolabel.clone()],
            vec![],
            "nolabel.jsonl:1: none of pod, instance",
        ),
        (
            vec![nolabel.clone()],
            vec!["--instance-field", "pod"],
            "no field `pod` among the labels (job)",
        ),
        (
            vec![exports().join("loki.jsonl.gz"), plain],
            vec![],
            "is a plain log beside",
        ),
        (
            vec![exports().join("loki.jsonl.gz")],
            vec!["--instance", "web-9"],
            "holds no such instance; it holds web-1, web-2",
        ),
    ] {
        let o = bin()
            .args(["diagnose", "--log-format", "lab", "--logs"])
            .args(&logs)
            .args(&extra)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(err.contains(says), "{says}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    }
}

/// An access log two hosts wrote (a shared volume, a central collector), its format holding
/// `$hostname`: split by that field. Truth, from how it is made: the fixtures' two plain
/// instances, each line prefixed by its host — so each host's diagnosis is its plain one (the
/// access log alone in the fleet; with its own error log under `--instance`), and each
/// reference names the shared file's line holding that host's line.
#[test]
fn an_access_log_with_hostname_splits_into_its_hosts() {
    let tmp = tempfile::tempdir().unwrap();
    let shared = tmp.path().join("access.log");
    let mut text = String::new();
    for n in [1, 2] {
        let access = exports().join(format!("plain/web-{n}/access.log.gz"));
        for l in gunzip(&access).lines() {
            text.push_str(&format!("web-{n} {l}\n"));
        }
    }
    std::fs::write(&shared, text).unwrap();
    let format = format!("$hostname {}", resolvelab_core::evidence::LAB_LOG_FORMAT);
    let run = |extra: &[&std::ffi::OsStr]| {
        bin()
            .args(["diagnose", "--tz-offset", "+00:00", "--format", "json"])
            .arg("--log-format")
            .arg(&format)
            .arg("--access")
            .arg(&shared)
            .args(extra)
            .output()
            .unwrap()
    };
    // The fleet: both hosts, each with its plain access log's requests and failures.
    let o = run(&[]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let f: Value = serde_json::from_slice(&o.stdout).unwrap();
    let rows = f["instances"].as_array().unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["web-1", "web-2"], "{f}");
    for (n, r) in [1, 2].iter().zip(rows) {
        let alone = lab_json(&[
            "--access".into(),
            exports()
                .join(format!("plain/web-{n}/access.log.gz"))
                .into(),
        ]);
        assert_eq!(r["requests"], alone["requests"], "web-{n}");
        assert_eq!(r["failures"], alone["failures"], "web-{n}");
    }
    // One host with its own error log: its plain diagnosis, references into the shared file.
    let err = exports().join("plain/web-2/error.log.gz");
    let o = run(&[
        "--instance".as_ref(),
        "web-2".as_ref(),
        "--error".as_ref(),
        err.as_os_str(),
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let d: Value = serde_json::from_slice(&o.stdout).unwrap();
    // Quoted access lines carry their host, as the shared file has them.
    fn unprefixed(v: &mut Value) {
        match v {
            Value::String(t) if t.starts_with("web-2 ") => *t = t["web-2 ".len()..].to_string(),
            Value::Object(o) => o.values_mut().for_each(unprefixed),
            Value::Array(a) => a.iter_mut().for_each(unprefixed),
            _ => {}
        }
    }
    let mut got = content(&d);
    unprefixed(&mut got);
    assert!(
        got == content(&plain(2)),
        "web-2 alone differs from its plain diagnosis"
    );
    let shared_text = std::fs::read_to_string(&shared).unwrap();
    let mut checked = 0;
    for e in d["incidents"][0]["evidence"].as_array().unwrap() {
        let at = e["at"].as_str().unwrap();
        if let Some(n) = at.strip_prefix(&format!("{}:", shared.display())) {
            let line = shared_text
                .lines()
                .nth(n.parse::<usize>().unwrap() - 1)
                .unwrap();
            assert!(line.starts_with("web-2 "), "{at}: {line}");
            checked += 1;
        }
    }
    assert!(
        checked > 0,
        "an access line is cited: {}",
        d["incidents"][0]
    );
    // Every host's error lines in one run cannot be paired: refused in one line.
    let o = run(&["--error".as_ref(), err.as_os_str()]);
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("--instance HOST") && e.contains("2 hosts ($hostname)"),
        "{e}"
    );
}
