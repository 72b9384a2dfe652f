//! One watch over several nginx instances: two recorded real-nginx runs written again second by
//! second as two instances — as a central log host's files (`{instance}` in the path, the second
//! host appearing later) and as one `kubectl logs --prefix` stream — each instance's counters
//! equal `diagnose` of that instance's lines, and the series carry its name.

mod common;
use common::{Seconds, append_lines, check, config_of};
use resolvelab_diagnose::Options;
use resolvelab_watch::instances::Pattern;
use resolvelab_watch::live::Kind;
use resolvelab_watch::metrics::Snapshot;
use resolvelab_watch::{Input, Watcher};
use std::path::Path;
use std::time::{Duration, Instant};

const RUNS: [(&str, &str); 2] = [("web-1", "nxdomain"), ("web-2", "dual-resolve")];

/// Both runs written tick by tick by `write(instance, k, access, error)`, the watcher stepped
/// after each tick (and replaced by `restart` after it returns one: a crash, resumed from the
/// state file) and closed 60 s after the longer run's end; its last snapshot.
fn play(
    w: &mut Watcher,
    runs: &[(&str, Seconds)],
    mut write: impl FnMut(&str, usize, &[String], &[String]),
    restart: impl Fn(usize) -> Option<Watcher>,
) -> Snapshot {
    let t0 = Instant::now();
    let n = runs.iter().map(|(_, s)| s.batches.len()).max().unwrap();
    for k in 0..n {
        for (name, s) in runs {
            if let Some((a, e)) = s.batches.get(k) {
                write(name, k, a, e);
            }
        }
        w.step(t0 + Duration::from_secs(k as u64), false).unwrap();
        if let Some(next) = restart(k) {
            *w = next;
        }
    }
    w.step(t0 + Duration::from_secs(n as u64 + 60), true)
        .unwrap();
    w.shared.lock().unwrap().clone()
}

/// Each instance's part of the snapshot equals `diagnose` of its own files in `truth`.
fn each_equals_its_batch(s: &Snapshot, runs: &[(&str, Seconds)], truth: &Path) {
    assert_eq!(s.parts.len(), runs.len(), "one part per instance");
    for (name, seconds) in runs {
        let part = s
            .parts
            .iter()
            .find(|p| p.instance.as_deref() == Some(name))
            .unwrap_or_else(|| panic!("{name} has its part"));
        let d = resolvelab_diagnose::diagnose(&Options {
            access: vec![truth.join(name).join("access.log")],
            error: vec![truth.join(name).join("error.log")],
            ..seconds.template.clone()
        })
        .unwrap();
        check(&part.totals, &d);
    }
}

#[test]
fn files_named_by_instance_are_each_diagnosed_apart_and_a_host_added_later_is_followed() {
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("remote");
    let runs: Vec<(&str, Seconds)> = RUNS.iter().map(|(n, r)| (*n, Seconds::of(r))).collect();
    std::fs::create_dir_all(logs.join("web-1")).unwrap();
    std::fs::write(logs.join("web-1/access.log"), "").unwrap();
    std::fs::write(logs.join("web-1/error.log"), "").unwrap();
    let pattern = |f: &str| {
        Input::Instances(
            Pattern::parse(&logs.join("{instance}").join(f))
                .unwrap()
                .unwrap(),
        )
    };
    let cfg = config_of(
        vec![
            (Kind::Access, pattern("access.log")),
            (Kind::Error, pattern("error.log")),
        ],
        &runs[0].1.template,
        dir.path(),
    );
    let mut w = Watcher::new(cfg.clone()).unwrap();
    assert_eq!(w.instances(), ["web-1"]);
    // 20 s in, both instances have an incident open: each resumes from what the state file
    // kept before its window opened.
    let restart = |k: usize| (k == 20).then(|| Watcher::new(cfg.clone()).unwrap());
    let s = play(
        &mut w,
        &runs,
        |name, k, a, e| {
            let d = logs.join(name);
            // web-2's host starts sending 10 s in: its error log first, its access log a tick later.
            if name == "web-2" && k < 10 {
                return;
            }
            std::fs::create_dir_all(&d).unwrap();
            append_lines(&d.join("error.log"), e);
            if name == "web-2" && k == 10 {
                return;
            }
            append_lines(&d.join("access.log"), a);
        },
        restart,
    );
    assert_eq!(w.instances(), ["web-1", "web-2"]);
    // The truth: each instance's lines as written (web-2's files were found once created and
    // read from their first line).
    let truth = dir.path().join("truth");
    for (name, seconds) in &runs {
        let d = truth.join(name);
        std::fs::create_dir_all(&d).unwrap();
        for (k, (a, e)) in seconds.batches.iter().enumerate() {
            if *name == "web-2" && k < 10 {
                continue;
            }
            append_lines(&d.join("error.log"), e);
            if *name == "web-2" && k == 10 {
                continue;
            }
            append_lines(&d.join("access.log"), a);
        }
    }
    each_equals_its_batch(&s, &runs, &truth);
    let text =
        resolvelab_watch::metrics::encode(&resolvelab_watch::metrics::registry(w.shared.clone()));
    for name in ["web-1", "web-2"] {
        let want = format!("resolvelab_requests_total{{nginx_instance=\"{name}\",upstream=");
        assert!(text.contains(&want), "{want} not in\n{text}");
    }
    let events = std::fs::read_to_string(dir.path().join("events.jsonl")).unwrap();
    for name in ["web-1", "web-2"] {
        assert!(
            events.contains(&format!("\"instance\":\"{name}\"")),
            "{name}'s incidents name it:\n{events}"
        );
    }
}

#[test]
fn a_kubectl_prefix_stream_splits_by_pod() {
    let dir = tempfile::tempdir().unwrap();
    let runs: Vec<(&str, Seconds)> = RUNS.iter().map(|(n, r)| (*n, Seconds::of(r))).collect();
    let stream = dir.path().join("kubectl.log");
    std::fs::write(&stream, "").unwrap();
    let mut w = Watcher::new(config_of(
        vec![(Kind::Mixed, Input::File(stream.clone()))],
        &runs[0].1.template,
        dir.path(),
    ))
    .unwrap();
    let truth = dir.path().join("truth");
    let s = play(
        &mut w,
        &runs,
        |name, _, a, e| {
            let prefixed: Vec<String> = e
                .iter()
                .chain(a)
                .map(|l| format!("[pod/{name}/nginx] {l}"))
                .collect();
            append_lines(&stream, &prefixed);
            let d = truth.join(name);
            std::fs::create_dir_all(&d).unwrap();
            append_lines(&d.join("error.log"), e);
            append_lines(&d.join("access.log"), a);
        },
        |_| None,
    );
    assert_eq!(w.instances(), ["web-1", "web-2"]);
    each_equals_its_batch(&s, &runs, &truth);
}
