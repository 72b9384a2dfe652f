//! `resolvelab watch` beside a real-nginx run, as a user runs it next to a scenario: a watcher
//! follows the run's access and error logs while nginx writes them, classes the NXDOMAIN
//! window's failures while the run still plays, and at the end its counters equal the batch
//! diagnosis of the same files with the same options.

mod common;
use common::Play;
use resolvelab_core::evidence::file;
use resolvelab_watch::live::{Kind, Timing};
use resolvelab_watch::totals::{Totals, status_class};
use resolvelab_watch::{Config, Input, Watcher};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The run directory `out` gets once its configuration is written (the runner makes one).
fn run_dir(out: &Path, playing: &AtomicBool) -> Option<PathBuf> {
    while playing.load(Ordering::SeqCst) {
        let found = std::fs::read_dir(out)
            .ok()?
            .flatten()
            .map(|e| e.path())
            .find(|p| p.join(file::NGINX_CONF).is_file());
        if found.is_some() {
            return found;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

#[test]
fn watch_classes_a_real_nginx_nxdomain_while_it_plays_and_agrees_with_diagnose() {
    let out = tempfile::tempdir().unwrap();
    let playing = AtomicBool::new(true);
    let (judged, watched) = std::thread::scope(|s| {
        let player = s.spawn(|| {
            let j = Play::new("nxdomain", "nginx")
                .variant("base")
                .scale(0.5)
                .into(out.path());
            playing.store(false, Ordering::SeqCst);
            j
        });
        let dir = run_dir(out.path(), &playing).expect("the run made its directory");
        let mut template = resolvelab_diagnose::Options::new(Vec::new(), Vec::new());
        template.log_format = resolvelab_diagnose::run::run_log_format(&dir).unwrap();
        template.config = resolvelab_diagnose::NginxConf::read(
            &dir.join(file::NGINX_CONF),
            &dir.join(file::NGINX_CONF),
        )
        .unwrap()
        .facts()
        .ok();
        let mut w = Watcher::new(Config {
            inputs: vec![
                (Kind::Access, Input::File(dir.join(file::ACCESS_LOG))),
                (Kind::Error, Input::File(dir.join(file::ERROR_LOG))),
            ],
            template: template.clone(),
            timing: Timing {
                // The run serves ~3 s after its NXDOMAIN window: settle within that.
                settle: Duration::from_secs(2),
                reclass: Duration::from_millis(500),
                ..Timing::default()
            },
            interval: Duration::from_millis(250),
            max_upstreams: 20,
            instance: None,
            max_instances: 100,
            from_start: true,
            state: None,
            events: None,
            duration: None,
            dns: None,
        })
        .unwrap();
        // Bounded: the run plays for well under its own limits; 10 minutes is a broken run.
        let deadline = Instant::now() + Duration::from_secs(600);
        let mut classed_while_playing = 0;
        while playing.load(Ordering::SeqCst) && Instant::now() < deadline {
            w.step(Instant::now(), false).unwrap();
            classed_while_playing = Totals::sum(&w.shared.lock().unwrap().totals().failed);
            std::thread::sleep(Duration::from_millis(250));
        }
        let judged = player.join().unwrap();
        w.step(Instant::now(), true).unwrap();
        let totals = w.shared.lock().unwrap().totals();
        (judged, (dir, template, totals, classed_while_playing))
    });
    let (dir, template, totals, live) = watched;
    assert_eq!(judged.len(), 1);
    assert_eq!(judged[0].record.dir, dir);
    let d = resolvelab_diagnose::diagnose(&resolvelab_diagnose::Options {
        access: vec![dir.join(file::ACCESS_LOG)],
        error: vec![dir.join(file::ERROR_LOG)],
        ..template
    })
    .unwrap();
    assert!(
        live > 0,
        "the NXDOMAIN window was classed while nginx still served"
    );
    let mut req: BTreeMap<String, u64> = BTreeMap::new();
    for (s, n) in &d.http_status {
        *req.entry(status_class(s).to_string()).or_default() += n;
    }
    assert_eq!(totals.requests_by_class(), req);
    let mut failed: BTreeMap<String, u64> = BTreeMap::new();
    for inner in totals.failed.values() {
        for (c, n) in inner {
            *failed.entry(c.clone()).or_default() += n;
        }
    }
    let want: BTreeMap<String, u64> = d
        .classes
        .iter()
        .map(|c| (c.class.id().to_string(), c.requests))
        .collect();
    assert_eq!(failed, want);
    assert!(want.contains_key("dns-nxdomain"), "{want:?}");
    // The lab's own verdict (with its DNS log) names the same class.
    assert!(
        judged[0]
            .verdict
            .diagnosis
            .incidents
            .iter()
            .any(|i| i.class.id() == "dns-nxdomain")
    );
}
