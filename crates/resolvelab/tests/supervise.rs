//! The no-orphans guarantee: SIGKILL of the tool leaves no process of its run behind.

use resolvelab_core::supervise::group_members;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn sigkill_of_the_tool_leaves_no_process_of_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let mut tool = Command::new(env!("CARGO_BIN_EXE_resolvelab"))
        .args([
            "__supervise-selftest",
            "--listen",
            "127.18.91.1:8080", // an address of this test's own: no fixed port shared with others
            "--seconds",
            "60",
            "--run-dir",
        ])
        .arg(dir.path())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(tool.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let pgid: i32 = line
        .trim()
        .strip_prefix("pgid=")
        .unwrap_or_else(|| panic!("unexpected output {line:?}"))
        .parse()
        .unwrap();
    let before = group_members(pgid);
    // watchdog + nginx master + 2 workers + sleep
    assert!(
        before.len() >= 5,
        "expected the run's processes, got {before:?}"
    );
    unsafe { libc::kill(tool.id() as i32, libc::SIGKILL) };
    tool.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !group_members(pgid).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        group_members(pgid),
        Vec::<i32>::new(),
        "orphans of group {pgid}"
    );
}
