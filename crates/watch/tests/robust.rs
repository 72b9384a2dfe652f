//! What a followed log can do to a watcher, and the watcher keeps serving: binary garbage,
//! a line still being written, a very long line, the file replaced by a directory, deleted,
//! created again, and times that jump back an hour and forward a day. Every tick succeeds,
//! what could not be read is counted, and the lines that parse are counted once.

mod common;
use resolvelab_watch::Watcher;
use resolvelab_watch::totals::Totals;
use std::io::Write;
use std::time::{Duration, Instant};

fn lab_line(t: f64, status: u16) -> String {
    format!(
        "{t:.3} {status} \"127.0.0.20:8080\" \"{status}\" 0.001 GET 1 1 \"0.001\" \"0.000\" \"GET / HTTP/1.1\" 127.0.0.1\n"
    )
}

#[test]
fn garbage_a_vanished_file_and_clock_jumps_are_counted_never_fatal() {
    let dir = tempfile::tempdir().unwrap();
    let mut template = resolvelab_diagnose::Options::new(Vec::new(), Vec::new());
    template.log_format = resolvelab_history::logformat::LogFormat::lab();
    template.tz_offset_s = Some(0);
    let (a, e) = (dir.path().join("access.log"), dir.path().join("error.log"));
    std::fs::write(&a, "").unwrap();
    std::fs::write(&e, "").unwrap();
    let mut w = Watcher::new(common::config(dir.path(), &template)).unwrap();
    let t0 = Instant::now();
    let mut k = 0u64;
    let mut step = |w: &mut Watcher| {
        k += 1;
        w.step(t0 + Duration::from_secs(k), false).unwrap();
    };
    let append = |s: &[u8]| {
        std::fs::OpenOptions::new()
            .append(true)
            .open(&a)
            .unwrap()
            .write_all(s)
            .unwrap()
    };
    let base = 1_796_018_400.0;
    append(lab_line(base, 200).as_bytes());
    append(b"\x00\xff\xfe garbage \x1b[31m not a log line\n");
    append(&vec![b'x'; 1 << 20]);
    append(b"\n");
    append(lab_line(base + 1.0, 200).as_bytes());
    // Half a line: not read until its newline comes.
    let half = lab_line(base + 2.0, 502);
    append(&half.as_bytes()[..20]);
    step(&mut w);
    append(&half.as_bytes()[20..]);
    // An hour back, a day forward.
    append(lab_line(base - 3600.0, 200).as_bytes());
    append(lab_line(base + 86_400.0, 200).as_bytes());
    step(&mut w);
    // The file becomes a directory, then goes, then comes back.
    std::fs::remove_file(&a).unwrap();
    std::fs::create_dir(&a).unwrap();
    step(&mut w);
    let unreadable = w.shared.lock().unwrap().unreadable.clone();
    assert_eq!(unreadable.get("access"), Some(&1), "{unreadable:?}");
    std::fs::remove_dir(&a).unwrap();
    step(&mut w);
    std::fs::write(&a, lab_line(base + 86_401.0, 200)).unwrap();
    step(&mut w);
    w.step(t0 + Duration::from_secs(k + 60), true).unwrap();
    let s = w.shared.lock().unwrap().clone();
    assert!(s.unreadable.is_empty(), "{:?}", s.unreadable);
    let t = &s.totals();
    assert_eq!(Totals::sum(&t.requests), 6, "{:?}", t.requests);
    let malformed: u64 = t.lines.values().filter_map(|m| m.get("malformed")).sum();
    assert_eq!(malformed, 2, "{:?}", t.lines);
    assert_eq!(t.requests_by_class().get("5xx"), Some(&1));
}
