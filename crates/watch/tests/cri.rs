//! A container's log file as the kubelet writes it (CRI: `<time> <stream> <P|F> <line>`),
//! followed as a mixed stream: lines are read behind their prefix, a line split into `P` parts
//! across two ticks is joined, and the counts equal those of the same lines without the prefix.

mod common;
use resolvelab_watch::live::Kind;
use resolvelab_watch::{Input, Watcher};
use std::io::{BufRead, Write};
use std::time::{Duration, Instant};

#[test]
fn cri_lines_are_unwrapped_and_partial_lines_joined_across_ticks() {
    let fx = common::fixture("nxdomain");
    let access: Vec<String> = resolvelab_history::open_maybe_gz(&fx.join("access.log.gz"))
        .unwrap()
        .lines()
        .take(400)
        .map(Result::unwrap)
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let mut template = resolvelab_diagnose::run::production_options(&fx).unwrap();
    template.access.clear();
    template.error.clear();
    let cri = dir.path().join("0.log");
    std::fs::write(&cri, "").unwrap();
    let mut cfg = common::config(dir.path(), &template);
    cfg.inputs = vec![(Kind::Mixed, Input::File(cri.clone()))];
    let mut w = Watcher::new(cfg).unwrap();
    let t0 = Instant::now();
    let write = |s: &str| {
        std::fs::OpenOptions::new()
            .append(true)
            .open(&cri)
            .unwrap()
            .write_all(s.as_bytes())
            .unwrap()
    };
    let prefix = "2026-11-30T08:00:00.000000000Z stdout";
    let (head, tail) = access.split_at(200);
    for l in head {
        write(&format!("{prefix} F {l}\n"));
    }
    // The 201st line in two parts, the first in this tick, the rest in the next.
    let (a, b) = tail[0].split_at(20);
    write(&format!("{prefix} P {a}\n"));
    w.step(t0, false).unwrap();
    write(&format!("{prefix} F {b}\n"));
    for l in &tail[1..] {
        write(&format!("{prefix} F {l}\n"));
    }
    w.step(t0 + Duration::from_secs(1), false).unwrap();
    w.step(t0 + Duration::from_secs(2), true).unwrap();
    let t = w.shared.lock().unwrap().totals();
    assert_eq!(
        resolvelab_watch::totals::Totals::sum(&t.requests),
        400,
        "{:?}",
        t.requests
    );
    // A mixed stream is read by both readers: its access lines parse, none is malformed.
    assert_eq!(t.lines["access"]["parsed"], 400, "{:?}", t.lines);
    let malformed: u64 = t.lines.values().filter_map(|m| m.get("malformed")).sum();
    assert_eq!(malformed, 0, "{:?}", t.lines);
}
