//! The shipped alerting rules against real parts: Debian's Prometheus and promtool, fetched and
//! cached by the project (`provision::monitoring`).
//!
//! - `promtool test rules`: the series `watch` exported, second by second, while recorded
//!   real-nginx runs were written again under it; each run's classes (as `diagnose` names them
//!   for the same lines) fire their alert, with its labels and annotations, and every other
//!   alert stays silent.
//! - A real Prometheus scrapes a watcher's `/metrics` while a run is replayed under it, loads
//!   the rules, stores the counts `diagnose` gives, and fires the run's alert; every query of
//!   the Grafana dashboard runs on it and the panels that the run feeds get data.
//! - The shipped dashboard is what `deploy/grafana/dashboard.py` builds with Grafana's own
//!   Foundation SDK, pinned from PyPI.

mod common;
use common::Replay;
use resolvelab_core::testing;
use resolvelab_diagnose::classes::CLASSES;
use resolvelab_provision::Provisioned;
use resolvelab_provision::monitoring::{prometheus, promtool};
use resolvelab_provision::pytool::GRAFANA_FOUNDATION_SDK;
use resolvelab_watch::alerts::{Alert, RUNBOOK_BASE, all, rules_yaml};
use resolvelab_watch::metrics::{encode, registry};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Recorded nginx runs, each with failures of some classes.
const RUNS: [&str; 7] = [
    "nxdomain",
    "dual-resolve",
    "dual-resolve.max_fails_0",
    "zone-exhaustion",
    "port-exhaustion.netns",
    "backup.max_fails_0",
    "generation-race",
];

fn rules_file() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/prometheus/resolvelab-alerts.yml")
}

fn dashboard_file() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/grafana/resolvelab-dashboard.json")
}

#[test]
fn the_shipped_dashboard_is_what_grafanas_sdk_builds() {
    let sdk = match GRAFANA_FOUNDATION_SDK.ensure(&|l| eprintln!("{l}")) {
        Ok(s) => s,
        Err(e) => {
            testing::missing_prerequisite(&format!("grafana-foundation-sdk from PyPI: {e:#}"));
            return;
        }
    };
    let script = dashboard_file().with_file_name("dashboard.py");
    let out = testing::output_ok(sdk.python().arg(&script));
    let built: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let shipped: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dashboard_file()).unwrap()).unwrap();
    assert_eq!(
        built, shipped,
        "deploy/grafana/resolvelab-dashboard.json is out of date: python3 deploy/grafana/dashboard.py > deploy/grafana/resolvelab-dashboard.json"
    );
}

/// Every panel query of the dashboard, with Grafana's variables as a query API gets them.
fn dashboard_queries() -> Vec<(String, String)> {
    let d: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dashboard_file()).unwrap()).unwrap();
    let mut out = Vec::new();
    for p in d["panels"].as_array().unwrap() {
        for t in p["targets"].as_array().into_iter().flatten() {
            let expr = t["expr"]
                .as_str()
                .unwrap()
                .replace("$__rate_interval", "1m")
                .replace("$__range", "10m")
                .replace("$nginx_instance", ".*")
                .replace("$instance", ".*");
            out.push((p["title"].as_str().unwrap().to_string(), expr));
        }
    }
    out
}

/// A query's URL-encoded form (only what PromQL uses needs escaping).
fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn provisioned() -> Option<Provisioned> {
    match resolvelab_provision::ensure(&prometheus(), &|l| eprintln!("{l}")) {
        Ok(p) => Some(p),
        Err(e) => {
            testing::missing_prerequisite(&format!("Debian's prometheus package: {e:#}"));
            None
        }
    }
}

#[test]
fn the_shipped_rules_are_the_ones_watch_prints() {
    assert_eq!(
        std::fs::read_to_string(rules_file()).unwrap(),
        rules_yaml(RUNBOOK_BASE),
        "deploy/prometheus/resolvelab-alerts.yml is out of date: `resolvelab watch --print-rules > deploy/prometheus/resolvelab-alerts.yml`"
    );
}

#[test]
fn every_alert_links_to_its_runbook_section() {
    let doc = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/diagnose.md"),
    )
    .unwrap();
    for a in all(RUNBOOK_BASE) {
        // GitHub's anchor of `### Runbook: CLASS` is `runbook-CLASS`.
        assert!(
            doc.lines()
                .any(|l| l == format!("### Runbook: {}", a.class)),
            "docs/diagnose.md has no `### Runbook: {}` for {}",
            a.class,
            a.name
        );
    }
}

/// The samples of an exposition: series (name and labels as written) → value.
fn samples(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|l| {
            l.starts_with("resolvelab_failed_requests_total{")
                || l.starts_with("resolvelab_open_incident_failures{")
        })
        .map(|l| {
            let (series, v) = l.rsplit_once(' ').unwrap();
            (series.to_string(), v.parse().unwrap())
        })
        .collect()
}

/// Series (name and labels) → a value per second; the (upstream, class) pairs that fire; the
/// number of seconds.
type Recorded = (
    BTreeMap<String, Vec<String>>,
    BTreeSet<(String, String)>,
    usize,
);

/// A run replayed under a watcher: its series, one value per second, and the (upstream, class) pairs the batch diagnosis names.
fn recorded(run: &str) -> Recorded {
    let dir = tempfile::tempdir().unwrap();
    let mut steps: Vec<BTreeMap<String, f64>> = Vec::new();
    let r = Replay::run(run, dir.path(), |w, _, _| {
        steps.push(samples(&encode(&registry(w.shared.clone()))));
        None
    });
    steps.push(samples(&encode(&registry(r.watcher.shared.clone()))));
    let names: BTreeSet<String> = steps.iter().flat_map(|s| s.keys().cloned()).collect();
    // Before a series exists: no sample (`_`); once it has gone from the exposition: a
    // staleness marker, as Prometheus writes for a series a scrape no longer has.
    let series = names
        .into_iter()
        .map(|n| {
            let mut seen = false;
            let v = steps
                .iter()
                .map(|s| match s.get(&n) {
                    Some(v) => {
                        seen = true;
                        v.to_string()
                    }
                    None if seen => "stale".to_string(),
                    None => "_".to_string(),
                })
                .collect();
            (n, v)
        })
        .collect();
    let d = r.batch(dir.path());
    let fired = d
        .incidents
        .iter()
        .map(|i| (i.upstream.clone(), i.class.id().to_string()))
        .collect();
    (series, fired, steps.len())
}

fn q(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

/// One promtool test group: the run's series, then at its last second each alert's expected
/// firing (with labels and annotations) or silence.
fn group(run: &str) -> String {
    let (series, fired, n) = recorded(run);
    assert!(!fired.is_empty(), "{run} has failures");
    let mut y = format!("  - name: {run}\n    interval: 1s\n    input_series:\n");
    for (s, v) in &series {
        y += &format!(
            "      - series: {}\n        values: {}\n",
            q(s),
            q(&v.join(" "))
        );
    }
    y += "    alert_rule_test:\n";
    let at = format!("{}s", n - 1);
    for a in all(RUNBOOK_BASE) {
        y += &format!("      - eval_time: {at}\n        alertname: {}\n", a.name);
        let on: Vec<&String> = fired
            .iter()
            .filter(|(_, c)| c == a.class)
            .map(|(u, _)| u)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        if on.is_empty() {
            y += "        exp_alerts: []\n";
            continue;
        }
        y += "        exp_alerts:\n";
        for u in on {
            y += &expected(&a, u);
        }
    }
    y
}

fn expected(a: &Alert, upstream: &str) -> String {
    format!(
        "          - exp_labels: {{severity: {}, upstream: {}, class: {}}}\n            exp_annotations:\n              summary: {}\n              description: {}\n              runbook_url: {}\n",
        a.severity,
        q(upstream),
        a.class,
        q(&a.summary_for(upstream)),
        q(a.description()),
        q(&a.runbook_url)
    )
}

#[test]
fn promtool_fires_each_runs_class_and_nothing_else() {
    let Some(p) = provisioned() else { return };
    let tool = promtool(&p.path);
    testing::output_ok(
        Command::new(&tool)
            .args(["check", "rules"])
            .arg(rules_file()),
    );
    let mut y = format!(
        "rule_files:\n  - {}\nevaluation_interval: 1s\ntests:\n",
        q(&rules_file().display().to_string())
    );
    for run in RUNS {
        y += &group(run);
    }
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("resolvelab-alerts.test.yml");
    std::fs::write(&t, &y).unwrap();
    let out = Command::new(&tool)
        .args(["test", "rules"])
        .arg(&t)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "promtool test rules failed:\n{}{}\n(the test file: {})",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        t.display()
    );
    // The runs cover these classes; the rest have no recorded nginx run (the other proxies'
    // classes need their events).
    for c in [
        "dns-nxdomain",
        "maxfails-wipeout",
        "upstream-failure",
        "zone-memory-exhausted",
        "port-exhaustion",
        "tries-exhausted",
        "generation-race-retry",
    ] {
        assert!(CLASSES.contains(&c));
        assert!(y.contains(&format!("class: {c}}}")), "{c} fired in no run");
    }
}

/// A free loopback port (bound, read, released).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// GET on loopback; the body.
fn get(port: u16, path: &str) -> String {
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return String::new();
    };
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let _ = write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    );
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out.split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default()
}

#[test]
fn a_real_prometheus_scrapes_watch_and_fires_the_runs_alert() {
    let Some(p) = provisioned() else { return };
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("logs");
    std::fs::create_dir(&logs).unwrap();
    // The watcher's endpoints, served while the run is replayed under it.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let watch_port = listener.local_addr().unwrap().port();
    let prom_port = free_port();
    std::fs::write(
        dir.path().join("prometheus.yml"),
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  - {}\nscrape_configs:\n  - job_name: resolvelab\n    static_configs:\n      - targets: ['127.0.0.1:{watch_port}']\n",
            q(&rules_file().display().to_string())
        ),
    )
    .unwrap();
    let mut cmd = Command::new(&p.path);
    cmd.arg(format!(
        "--config.file={}",
        dir.path().join("prometheus.yml").display()
    ))
    .arg(format!(
        "--storage.tsdb.path={}",
        dir.path().join("tsdb").display()
    ))
    .arg(format!("--web.listen-address=127.0.0.1:{prom_port}"))
    .envs(p.env())
    .stdout(Stdio::null())
    .stderr(std::fs::File::create(dir.path().join("prometheus.log")).unwrap());
    let _prom = testing::KillOnDrop(cmd.spawn().unwrap());
    let mut started = false;
    let replay = Replay::run("nxdomain", &logs, |w, k, _| {
        if k == 0 {
            resolvelab_watch::serve::spawn(
                listener.try_clone().unwrap(),
                w.shared.clone(),
                w.report.clone(),
            )
            .unwrap();
            started = true;
        }
        // Wall time for the scrapes: Prometheus samples what the watcher shows each second.
        std::thread::sleep(Duration::from_millis(250));
        None
    });
    assert!(started);
    let want = replay.batch(&logs).failures;
    // Bounded: a scrape and a rule evaluation each second; 60 s is a broken setup.
    let deadline = Instant::now() + Duration::from_secs(60);
    let (mut stored, mut alerts) = (String::new(), String::new());
    while Instant::now() < deadline {
        stored = get(
            prom_port,
            "/api/v1/query?query=sum(resolvelab_failed_requests_total)",
        );
        alerts = get(prom_port, "/api/v1/alerts");
        if stored.contains(&format!("\"{want}\"")) && alerts.contains("\"state\":\"firing\"") {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let log = std::fs::read_to_string(dir.path().join("prometheus.log")).unwrap_or_default();
    assert!(
        stored.contains(&format!("\"{want}\"")),
        "stored: {stored}\n{log}"
    );
    let v: serde_json::Value = serde_json::from_str(&alerts).unwrap();
    let firing: Vec<&serde_json::Value> = v["data"]["alerts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["state"] == "firing")
        .collect();
    assert_eq!(firing.len(), 1, "{alerts}");
    assert_eq!(firing[0]["labels"]["alertname"], "ResolvelabDnsNxdomain");
    assert_eq!(firing[0]["labels"]["upstream"], "be");
    assert!(
        firing[0]["annotations"]["runbook_url"]
            .as_str()
            .unwrap()
            .ends_with("#runbook-dns-nxdomain")
    );
    // The dashboard's queries: each one runs, and the panels this run feeds show data.
    let empty_ok = ["Open incidents", "DNS answer changes"];
    for (title, expr) in dashboard_queries() {
        let body = get(
            prom_port,
            &format!("/api/v1/query?query={}", urlencode(&expr)),
        );
        let v: serde_json::Value =
            serde_json::from_str(&body).unwrap_or_else(|e| panic!("{title}: {expr}: {e}: {body}"));
        assert_eq!(v["status"], "success", "{title}: {expr}: {body}");
        let n = v["data"]["result"].as_array().map_or(0, Vec::len);
        assert!(
            n > 0 || empty_ok.contains(&title.as_str()),
            "{title}: {expr} has no data"
        );
    }
}
