//! A recorded real-nginx run written again second by second into growing files while a
//! watcher follows them (its clock stepped by the test, one tick per second of log time): what
//! it counts live equals what `diagnose` says of the whole files afterwards, and a restart from
//! the state file in the middle loses and doubles no line.

use resolvelab_diagnose::{Diagnosis, Options};
use resolvelab_watch::live::{Kind, Timing};
use resolvelab_watch::totals::{Totals, status_class};
use resolvelab_watch::{Config, Input, Watcher};
use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/diagnose/real")
        .join(name)
}

/// Lines of a gzipped log, each with its epoch second (`$msec` first in the lab's format; the
/// error log's local time at the run's +00:00).
fn seconds(path: &Path, access: bool) -> Vec<(i64, String)> {
    let r = resolvelab_history::open_maybe_gz(path).unwrap();
    r.lines()
        .map(|l| {
            let l = l.unwrap();
            let t = if access {
                l.split('.').next().unwrap().parse().unwrap()
            } else {
                resolvelab_history::errorlog::parse_line(&l, 0, 0)
                    .map(|r| r.t_us.div_euclid(1_000_000))
                    .unwrap_or(i64::MIN)
            };
            (t, l)
        })
        .collect()
}

fn append(p: &Path, lines: &[&str]) {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(p)
        .unwrap();
    for l in lines {
        writeln!(f, "{l}").unwrap();
    }
}

fn config(dir: &Path, template: &Options) -> Config {
    Config {
        inputs: vec![
            (Kind::Access, Input::File(dir.join("access.log"))),
            (Kind::Error, Input::File(dir.join("error.log"))),
        ],
        template: template.clone(),
        timing: Timing {
            settle: Duration::from_secs(5),
            ..Timing::default()
        },
        interval: Duration::from_secs(1),
        max_upstreams: 20,
        from_start: true,
        state: Some(dir.join("state.json")),
        events: Some(dir.join("events.jsonl")),
        duration: None,
    }
}

/// Replay `run` into `dir`, ticking the watcher once per second of log time; restart it from
/// its state file after `restart_at` seconds when given.
fn replay(run: &str, dir: &Path, restart_at: Option<usize>) -> (Totals, Diagnosis, u64) {
    let src = fixture(run);
    let mut template = resolvelab_diagnose::run::production_options(&src).unwrap();
    let access = seconds(&src.join("access.log.gz"), true);
    let error = seconds(&src.join("error.log.gz"), false);
    template.access.clear();
    template.error.clear();
    std::fs::write(dir.join("access.log"), "").unwrap();
    std::fs::write(dir.join("error.log"), "").unwrap();
    let (first, last) = (access[0].0, access.last().unwrap().0);
    let mut w = Watcher::new(config(dir, &template)).unwrap();
    let t0 = Instant::now();
    let at = |k: i64| t0 + Duration::from_secs(k as u64);
    let pick = |v: &[(i64, String)], s: i64| -> Vec<String> {
        v.iter()
            .filter(|(t, _)| *t == s || (s == first && *t < first))
            .map(|(_, l)| l.clone())
            .collect()
    };
    for (k, s) in (first..=last).enumerate() {
        let e = pick(&error, s);
        append(
            &dir.join("error.log"),
            &e.iter().map(String::as_str).collect::<Vec<_>>(),
        );
        let a = pick(&access, s);
        append(
            &dir.join("access.log"),
            &a.iter().map(String::as_str).collect::<Vec<_>>(),
        );
        w.step(at(k as i64), false).unwrap();
        if restart_at == Some(k) {
            // A crash: nothing is closed or saved beyond what the state file holds.
            w = Watcher::new(config(dir, &template)).unwrap();
        }
    }
    // The rest of the error lines (those after the last access second), then the end.
    let rest: Vec<&str> = error
        .iter()
        .filter(|(t, _)| *t > last)
        .map(|(_, l)| l.as_str())
        .collect();
    append(&dir.join("error.log"), &rest);
    let live = Totals::sum(&w.shared.lock().unwrap().totals.failed);
    w.step(at(last - first + 60), true).unwrap();
    let totals = w.shared.lock().unwrap().totals.clone();
    let batch = resolvelab_diagnose::diagnose(&Options {
        access: vec![dir.join("access.log")],
        error: vec![dir.join("error.log")],
        ..template
    })
    .unwrap();
    (totals, batch, live)
}

fn by_class(t: &resolvelab_watch::totals::Two) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for inner in t.values() {
        for (c, n) in inner {
            *m.entry(c.clone()).or_default() += n;
        }
    }
    m
}

fn check(totals: &Totals, d: &Diagnosis) {
    let mut req: BTreeMap<String, u64> = BTreeMap::new();
    for (s, n) in &d.http_status {
        *req.entry(status_class(s).to_string()).or_default() += n;
    }
    assert_eq!(totals.requests, req, "requests by status class");
    let classes: BTreeMap<String, u64> = d
        .classes
        .iter()
        .map(|c| (c.class.id().to_string(), c.requests))
        .collect();
    assert!(!classes.is_empty(), "the run has failures to class");
    assert_eq!(by_class(&totals.failed), classes, "failures by class");
    let incidents: BTreeMap<String, u64> = d
        .classes
        .iter()
        .map(|c| (c.class.id().to_string(), c.incidents))
        .collect();
    assert_eq!(by_class(&totals.incidents), incidents, "incidents by class");
    assert_eq!(
        Totals::sum(&totals.failed),
        d.failures,
        "every failure counted once"
    );
    let errors: u64 = totals.error_lines.values().sum();
    let batch_errors: u64 = d.signatures.iter().map(|s| s.count).sum();
    assert_eq!(errors, batch_errors, "error lines by signature");
}

#[test]
fn live_counts_equal_the_batch_diagnosis_of_the_same_lines() {
    for run in ["nxdomain", "dual-resolve"] {
        let dir = tempfile::tempdir().unwrap();
        let (totals, d, live) = replay(run, dir.path(), None);
        check(&totals, &d);
        assert_eq!(
            live, d.failures,
            "{run}: classed while the logs grew, not at the end"
        );
        let events = std::fs::read_to_string(dir.path().join("events.jsonl")).unwrap();
        let incidents: u64 = d.classes.iter().map(|c| c.incidents).sum();
        assert_eq!(
            events.lines().count() as u64,
            incidents + 1,
            "{run}: a schema line, then one line per incident"
        );
    }
}

#[test]
fn a_restart_from_the_state_file_loses_and_doubles_no_line() {
    let dir = tempfile::tempdir().unwrap();
    // 20 s in, an incident window is open: the restarted watcher reads it again from the
    // state saved before it opened.
    let (totals, d, _) = replay("nxdomain", dir.path(), Some(20));
    let mut req: BTreeMap<String, u64> = BTreeMap::new();
    for (s, n) in &d.http_status {
        *req.entry(status_class(s).to_string()).or_default() += n;
    }
    assert_eq!(totals.requests, req, "requests by status class");
    assert_eq!(
        Totals::sum(&totals.failed),
        d.failures,
        "every failure counted once"
    );
}
