//! What the watch tests share: a recorded real-nginx run written again second by second into
//! growing files while a watcher follows them, its clock stepped by the test (one tick per
//! second of log time).
// Each test file uses the part it needs.
#![allow(dead_code)]

use resolvelab_diagnose::{Diagnosis, Options};
use resolvelab_watch::live::{Kind, Timing};
use resolvelab_watch::totals::{Totals, Two, status_class};
use resolvelab_watch::{Config, Input, Watcher};
use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A recorded run of tests/fixtures/diagnose/real.
pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/diagnose/real")
        .join(name)
}

/// Lines of a (gzipped) log, each with its epoch second (`$msec` first in the lab's format; the
/// error log's local time at the run's +00:00).
fn seconds(path: &Path, access: bool) -> Vec<(i64, String)> {
    resolvelab_history::open_maybe_gz(path)
        .unwrap()
        .lines()
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

/// The watcher's configuration for `dir`'s access.log and error.log.
pub fn config(dir: &Path, template: &Options) -> Config {
    let inputs = vec![
        (Kind::Access, Input::File(dir.join("access.log"))),
        (Kind::Error, Input::File(dir.join("error.log"))),
    ];
    config_of(inputs, template, dir)
}

/// The watcher's configuration for these inputs, its state and events in `dir`: every file
/// from its start, 5 s to settle, one tick a second.
pub fn config_of(inputs: Vec<(Kind, Input)>, template: &Options, dir: &Path) -> Config {
    Config {
        inputs,
        template: template.clone(),
        timing: Timing {
            settle: Duration::from_secs(5),
            ..Timing::default()
        },
        interval: Duration::from_secs(1),
        max_upstreams: 20,
        instance: None,
        max_instances: 100,
        from_start: true,
        state: Some(dir.join("state.json")),
        events: Some(dir.join("events.jsonl")),
        duration: None,
        dns: None,
    }
}

/// A replay of `run` into `dir`.
pub struct Replay {
    /// The options every diagnosis used (the run's format, clock, version, configuration).
    pub template: Options,
    /// The watcher, after its last step.
    pub watcher: Watcher,
    /// Seconds of log time replayed (ticks before the last).
    pub ticks: usize,
    /// Failures counted by class before the last step (classed while the logs grew).
    pub live_before_end: u64,
}

/// A recorded run cut into seconds of log time: each second's access and error lines (the
/// error lines after the last request in the last second).
pub struct Seconds {
    /// The options every diagnosis of the run uses (its format, clock, version, configuration).
    pub template: Options,
    /// Each second's (access, error) lines, from the run's first request to its last.
    pub batches: Vec<(Vec<String>, Vec<String>)>,
}

impl Seconds {
    /// Cut `run` of tests/fixtures/diagnose/real.
    pub fn of(run: &str) -> Seconds {
        let src = fixture(run);
        let mut template = resolvelab_diagnose::run::production_options(&src).unwrap();
        let read = |paths: &mut Vec<PathBuf>, access: bool| {
            let mut v: Vec<(i64, String)> = std::mem::take(paths)
                .iter()
                .flat_map(|p| seconds(p, access))
                .collect();
            v.sort_by_key(|(t, _)| *t);
            v
        };
        let access = read(&mut template.access, true);
        let error = read(&mut template.error, false);
        let (first, last) = (access[0].0, access.last().unwrap().0);
        let pick = |v: &[(i64, String)], s: i64| -> Vec<String> {
            v.iter()
                .filter(|(t, _)| *t == s || (s == first && *t < first) || (s == last && *t > last))
                .map(|(_, l)| l.clone())
                .collect()
        };
        let batches = (first..=last)
            .map(|s| (pick(&access, s), pick(&error, s)))
            .collect();
        Seconds { template, batches }
    }
}

/// Append lines to a file (created when missing).
pub fn append_lines(p: &Path, lines: &[String]) {
    append(p, &lines.iter().map(String::as_str).collect::<Vec<_>>());
}

impl Replay {
    /// Replay `run` into `dir`, calling `each(watcher, k)` after tick `k`; a watcher it returns
    /// replaces the old one (a restart). The last step, 60 s after the last second, closes.
    pub fn run(
        run: &str,
        dir: &Path,
        mut each: impl FnMut(&mut Watcher, usize, &Options) -> Option<Watcher>,
    ) -> Replay {
        let Seconds { template, batches } = Seconds::of(run);
        std::fs::write(dir.join("access.log"), "").unwrap();
        std::fs::write(dir.join("error.log"), "").unwrap();
        let mut w = Watcher::new(config(dir, &template)).unwrap();
        let t0 = Instant::now();
        let at = |k: usize| t0 + Duration::from_secs(k as u64);
        for (k, (a, e)) in batches.iter().enumerate() {
            append_lines(&dir.join("error.log"), e);
            append_lines(&dir.join("access.log"), a);
            w.step(at(k), false).unwrap();
            if let Some(next) = each(&mut w, k, &template) {
                w = next;
            }
        }
        let ticks = batches.len();
        let live_before_end =
            resolvelab_watch::totals::Totals::sum(&w.shared.lock().unwrap().totals().failed);
        w.step(at(ticks - 1 + 60), true).unwrap();
        Replay {
            template,
            watcher: w,
            ticks,
            live_before_end,
        }
    }

    /// `diagnose` of the replayed files with the same options.
    pub fn batch(&self, dir: &Path) -> Diagnosis {
        resolvelab_diagnose::diagnose(&Options {
            access: vec![dir.join("access.log")],
            error: vec![dir.join("error.log")],
            ..self.template.clone()
        })
        .unwrap()
    }
}

pub fn by_class(t: &Two) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for inner in t.values() {
        for (c, n) in inner {
            *m.entry(c.clone()).or_default() += n;
        }
    }
    m
}

/// The watcher's counters equal a batch diagnosis of the same lines: requests by status class,
/// failures and incidents by class, error lines.
pub fn check(totals: &Totals, d: &Diagnosis) {
    let mut req: BTreeMap<String, u64> = BTreeMap::new();
    for (s, n) in &d.http_status {
        *req.entry(status_class(s).to_string()).or_default() += n;
    }
    assert_eq!(totals.requests_by_class(), req, "requests by status class");
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
