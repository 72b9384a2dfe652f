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

/// More error lines within one request's span than the pairing window holds: the watcher
/// counts what `diagnose` of the same files reports as its pairing loss (lines dropped, and the
/// long request that lost its own line), and exports both.
#[test]
fn lines_the_pairing_window_drops_are_counted_as_diagnose_counts_them() {
    let dir = tempfile::tempdir().unwrap();
    let mut template = resolvelab_diagnose::Options::new(Vec::new(), Vec::new());
    template.log_format = resolvelab_history::logformat::LogFormat::lab();
    template.tz_offset_s = Some(0);
    let s0: i64 = 1_796_018_400;
    // s0 is 2026-11-30 06:00:00 UTC; every line falls within its first minute.
    let stamp = |s: i64| format!("2026/11/30 06:00:{:02}", s - s0);
    let line = |s: i64, cid: u64, msg: &str| {
        format!(
            "{} [error] 1#1: *{cid} {msg} while connecting to upstream, client: 127.0.0.1, server: , request: \"GET / HTTP/1.1\", upstream: \"http://127.0.0.20:8080/\", host: \"x\"\n",
            stamp(s)
        )
    };
    let refused = "connect() failed (111: Connection refused)";
    // A 50 s request refused at its start, then more lines of other connections than the
    // window holds while it is pending, then a short request with its own line.
    let mut err = line(s0 + 6, 1, refused);
    let extra = resolvelab_diagnose::checker::MAX_BUFFERED as u64 + 10;
    for k in 0..extra {
        let s = s0 + 7 + (k * 40 / extra) as i64;
        err += &line(s, 10 + k, "upstream timed out (110: Connection timed out)");
    }
    err += &line(s0 + 55, 5, refused);
    let acc = format!(
        "{}.000 502 \"127.0.0.20:8080\" \"502\" 50.000 GET 1 1 \"50.000\" \"-\" \"GET / HTTP/1.1\" 127.0.0.1\n\
         {}.500 502 \"127.0.0.20:8080\" \"502\" 0.000 GET 5 1 \"-\" \"-\" \"GET / HTTP/1.1\" 127.0.0.1\n",
        s0 + 55,
        s0 + 55
    );
    let (a, e) = (dir.path().join("access.log"), dir.path().join("error.log"));
    std::fs::write(&e, &err).unwrap();
    std::fs::write(&a, &acc).unwrap();
    let d = resolvelab_diagnose::diagnose(&resolvelab_diagnose::Options {
        access: vec![a.clone()],
        error: vec![e.clone()],
        ..template.clone()
    })
    .unwrap();
    let loss = d.parse.pairing_loss.expect("diagnose drops lines here");
    assert_eq!((loss.lines, loss.unpaired), (12, 1));
    let mut w = Watcher::new(common::config(dir.path(), &template)).unwrap();
    let t0 = Instant::now();
    // A tick reads up to 1 MB of each file: enough of them to read both to their ends (the
    // error log is about 40 MB).
    for k in 0..100 {
        w.step(t0 + Duration::from_secs(k), false).unwrap();
    }
    w.step(t0 + Duration::from_secs(120), true).unwrap();
    let t = w.shared.lock().unwrap().totals();
    assert_eq!((t.pairing_loss.lines, t.pairing_loss.unpaired), (12, 1));
    assert_eq!(Totals::sum(&t.failed), d.failures);
    let text =
        resolvelab_watch::metrics::encode(&resolvelab_watch::metrics::registry(w.shared.clone()));
    assert!(
        text.contains("resolvelab_pairing_dropped_lines_total 12\n"),
        "{text}"
    );
    assert!(
        text.contains("resolvelab_pairing_unpaired_failures_total 1\n"),
        "{text}"
    );
}
