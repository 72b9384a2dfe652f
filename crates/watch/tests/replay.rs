//! A recorded real-nginx run written again second by second into growing files while a
//! watcher follows them (its clock stepped by the test, one tick per second of log time): what
//! it counts live equals what `diagnose` says of the whole files afterwards, and a restart from
//! the state file in the middle loses and doubles no line.

mod common;
use common::Replay;
use resolvelab_diagnose::Diagnosis;
use resolvelab_watch::Watcher;
use resolvelab_watch::totals::{Totals, status_class};
use std::collections::BTreeMap;
use std::path::Path;

/// Replay `run`, restarted from its state file after `restart_at` seconds when given; the
/// totals, the batch diagnosis, the failures classed before the last step and the bytes still
/// spooled on disk after it.
fn replay(run: &str, dir: &Path, restart_at: Option<usize>) -> (Totals, Diagnosis, u64, u64) {
    let r = Replay::run(run, dir, |_, k, template| {
        // A crash: nothing is closed or saved beyond what the state file holds.
        (restart_at == Some(k)).then(|| Watcher::new(common::config(dir, template)).unwrap())
    });
    let totals = r.watcher.shared.lock().unwrap().totals();
    let d = r.batch(dir);
    let live = r.live_before_end;
    (totals, d, live, r.watcher.spooled_bytes())
}

#[test]
fn live_counts_equal_the_batch_diagnosis_of_the_same_lines() {
    for run in ["nxdomain", "dual-resolve"] {
        let dir = tempfile::tempdir().unwrap();
        let (totals, d, live, spooled) = replay(run, dir.path(), None);
        common::check(&totals, &d);
        assert_eq!(
            live, d.failures,
            "{run}: classed while the logs grew, not at the end"
        );
        // Every window closed and the lines ended: none of them is left on disk.
        assert_eq!(spooled, 0, "{run}: spool left after the windows closed");
        let events = std::fs::read_to_string(dir.path().join("events.jsonl")).unwrap();
        let incidents: u64 = d.classes.iter().map(|c| c.incidents).sum();
        assert_eq!(
            events.lines().count() as u64,
            incidents + 1,
            "{run}: a schema line, then one line per incident"
        );
    }
}

/// Once classed, an open window's failures stay in the gauge on every tick until it closes
/// (an alert on the gauge must not flap between two classings).
#[test]
fn the_open_gauge_holds_for_the_whole_window() {
    let dir = tempfile::tempdir().unwrap();
    let (mut shown, mut gaps) = (0, 0);
    let mut seen = false;
    Replay::run("nxdomain", dir.path(), |w, _, _| {
        let open = !w.shared.lock().unwrap().open().is_empty();
        seen |= open;
        shown += open as usize;
        gaps += (seen && w.is_open() && !open) as usize;
        None
    });
    assert!(shown >= 5, "the window was shown open for {shown} ticks");
    assert_eq!(
        gaps, 0,
        "ticks of an open, classed window without its gauge"
    );
}

#[test]
fn a_restart_from_the_state_file_loses_and_doubles_no_line() {
    let dir = tempfile::tempdir().unwrap();
    // 20 s in, an incident window is open: the restarted watcher reads it again from the
    // state saved before it opened.
    let (totals, d, _, _) = replay("nxdomain", dir.path(), Some(20));
    let mut req: BTreeMap<String, u64> = BTreeMap::new();
    for (s, n) in &d.http_status {
        *req.entry(status_class(s).to_string()).or_default() += n;
    }
    assert_eq!(totals.requests_by_class(), req, "requests by status class");
    assert_eq!(
        Totals::sum(&totals.failed),
        d.failures,
        "every failure counted once"
    );
}
