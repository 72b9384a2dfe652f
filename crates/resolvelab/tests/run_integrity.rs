//! A verdict is only as good as its run: a run killed (SIGKILL), hung up (SIGHUP) or whose nginx
//! died mid-run is never judged `completed`, and `analyze` exits non-zero for it; an interrupted
//! `run --all --table FILE` leaves FILE as it was.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// Start `resolvelab run swap-only --scale 0.2` (real nginx) into `out`.
fn start_run(out: &Path) -> common::Proc {
    common::Proc(
        common::bin()
            .args([
                "run",
                "swap-only",
                "--variant",
                "base",
                "--scale",
                "0.2",
                "--out",
            ])
            .arg(out)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    )
}

/// The run directory, once the load has sent `n` requests (bounded wait: the test fails rather
/// than hangs).
fn when_loaded(out: &Path, n: usize, child: &mut Child) -> PathBuf {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        assert!(
            Instant::now() < deadline,
            "the load never reached {n} requests"
        );
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the run ended early: {status}");
        }
        if let Some(dir) = std::fs::read_dir(out).ok().and_then(|mut d| d.next()) {
            let dir = dir.unwrap().path();
            let lines = std::fs::read_to_string(dir.join("load.jsonl"))
                .map(|t| t.lines().count())
                .unwrap_or(0);
            if lines > n {
                return dir;
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn signal(pid: u32, sig: libc::c_int) {
    // SAFETY: a process this test started (the run, or the nginx master the run started).
    assert_eq!(unsafe { libc::kill(pid as libc::pid_t, sig) }, 0);
}

/// `analyze DIR --format json`: its exit status and the verdict.
fn analyze(dir: &Path) -> (Option<i32>, serde_json::Value) {
    let out = common::bin()
        .args(["analyze", "--format", "json", "--no-write"])
        .arg(dir)
        .output()
        .unwrap();
    (
        out.status.code(),
        serde_json::from_slice(&out.stdout).unwrap(),
    )
}

fn run_status(dir: &Path) -> String {
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).unwrap()).unwrap();
    v["status"].as_str().unwrap().to_string()
}

#[test]
fn a_killed_run_is_never_judged_completed() {
    let out = tempfile::tempdir().unwrap();
    let mut run = start_run(out.path());
    let dir = when_loaded(out.path(), 300, &mut run.0);
    signal(run.0.id(), libc::SIGKILL);
    run.0.wait().unwrap();
    assert_eq!(
        run_status(&dir),
        "running",
        "a SIGKILL leaves no chance to write"
    );
    let (code, v) = analyze(&dir);
    assert_eq!(code, Some(3), "{v}");
    assert_eq!(v["status"], "aborted", "{}", v["summary"]);
    assert!(v["summary"].as_str().unwrap().contains("did not finish"));
}

#[test]
fn a_hung_up_run_ends_aborted_with_a_complete_directory() {
    let out = tempfile::tempdir().unwrap();
    let mut run = start_run(out.path());
    let dir = when_loaded(out.path(), 300, &mut run.0);
    signal(run.0.id(), libc::SIGHUP);
    let status = run.0.wait().unwrap();
    assert!(!status.success());
    assert_eq!(run_status(&dir), "aborted");
    for f in ["verdict.json", "fingerprint.json", "backends.json"] {
        let len = std::fs::metadata(dir.join(f)).unwrap().len();
        assert!(len > 0, "{f} is whole");
    }
    let (code, v) = analyze(&dir);
    assert_eq!((code, v["status"].as_str()), (Some(3), Some("aborted")));
}

#[test]
fn nginx_dying_mid_run_fails_the_run() {
    let out = tempfile::tempdir().unwrap();
    let mut run = start_run(out.path());
    let dir = when_loaded(out.path(), 300, &mut run.0);
    let pid: u32 = std::fs::read_to_string(dir.join("nginx.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    signal(pid, libc::SIGKILL);
    let o = run.0.wait().unwrap();
    assert!(!o.success());
    assert_eq!(run_status(&dir), "failed");
    let events = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
    assert!(events.contains("engine-died"), "{events}");
    let (code, v) = analyze(&dir);
    assert_eq!(code, Some(3));
    assert_eq!(v["status"], "failed");
    assert!(
        v["summary"].as_str().unwrap().contains("exited mid-run"),
        "{}",
        v["summary"]
    );
}

#[test]
fn an_interrupted_run_all_leaves_the_committed_table_alone() {
    let out = tempfile::tempdir().unwrap();
    let table = out.path().join("REPRODUCTION.md");
    std::fs::write(&table, "the committed table\n").unwrap();
    let runs = out.path().join("runs");
    let mut run = common::Proc(
        common::bin()
            .args(["run", "--all", "--engine", "sim", "--scale", "0.2", "--out"])
            .arg(&runs)
            .arg("--table")
            .arg(&table)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    // Interrupt once the first run directory exists.
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::fs::read_dir(&runs).map(|d| d.count()).unwrap_or(0) == 0 {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(20));
    }
    signal(run.0.id(), libc::SIGINT);
    run.0.wait().unwrap();
    assert_eq!(
        std::fs::read_to_string(&table).unwrap(),
        "the committed table\n"
    );
    let partial = out.path().join("REPRODUCTION.partial.md");
    assert!(partial.exists(), "the partial table goes beside it");
}

/// A small tmpfs mounted for one test, unmounted (lazily, so a panicking test still cleans
/// up) when dropped. None when this process may not mount (not root).
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(at: &Path, size: &str) -> Option<Tmpfs> {
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(at)
            .status()
            .ok()?
            .success();
        ok.then(|| Tmpfs(at.to_path_buf()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

#[test]
fn a_disk_that_fills_up_stops_the_run_at_once() {
    let root = tempfile::tempdir().unwrap();
    let Some(fs) = Tmpfs::mount(root.path(), "40m") else {
        resolvelab_core::testing::missing_prerequisite("cannot mount a tmpfs here (needs root)");
        return;
    };
    // Too small for the run at all: refused before anything starts.
    let tiny = fs.0.join("tiny");
    std::fs::create_dir(&tiny).unwrap();
    let Some(tiny_fs) = Tmpfs::mount(&tiny, "2m") else {
        panic!("the second mount failed after the first worked");
    };
    let o = common::bin()
        .args([
            "run",
            "swap-only",
            "--variant",
            "base",
            "--scale",
            "0.2",
            "--out",
        ])
        .arg(&tiny_fs.0)
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("not enough free space"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    drop(tiny_fs);
    // Room at the start, then the disk fills while the load runs: the run stops within a
    // second and says why.
    let out = fs.0.join("runs");
    let mut run = start_run(&out);
    let dir = when_loaded(&out, 300, &mut run.0);
    let filler = fs.0.join("filler");
    let mut f = std::fs::File::create(&filler).unwrap();
    let chunk = vec![0u8; 1 << 16];
    use std::io::Write;
    while f.write_all(&chunk).is_ok() {}
    let full_us = resolvelab_core::time::now_us();
    // Leave a little room so the run can still record why it stopped.
    drop(f);
    std::fs::OpenOptions::new()
        .write(true)
        .open(&filler)
        .unwrap()
        .set_len(std::fs::metadata(&filler).unwrap().len() - (512 << 10))
        .unwrap();
    run.0.wait().unwrap();
    let events = std::fs::read_to_string(dir.join("events.jsonl")).unwrap_or_default();
    let noticed_us = events
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|e| e["kind"] == "disk-full")
        .and_then(|e| e["t_us"].as_i64())
        .unwrap_or_else(|| panic!("no disk-full event: {events}"));
    // The run's own record: the disk-full stop came after the disk filled and before the
    // load's planned end (12 s after its start at this scale) — the run stopped for the disk,
    // not because the scenario was over.
    let load_start_us = events
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|e| e["kind"] == "phase" && e["target"] == "load" && e["note"] == "start")
        .and_then(|e| e["t_us"].as_i64())
        .unwrap_or_else(|| panic!("no load start event: {events}"));
    assert!(
        noticed_us >= full_us - 1_000 && noticed_us < load_start_us + 12_000_000,
        "disk-full noticed {} ms after the disk filled, {} ms after the load started",
        (noticed_us - full_us) / 1000,
        (noticed_us - load_start_us) / 1000
    );
    let (code, v) = analyze(&dir);
    assert_eq!(code, Some(3), "{}", v["summary"]);
    assert_ne!(v["status"], "completed");
}
