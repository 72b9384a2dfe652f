//! `resolvelab … | head`: a reader that went away ends the command quietly (status 141, the
//! shell's SIGPIPE status), never with a panic and a backtrace.

use std::process::{Command, Stdio};

#[test]
fn a_closed_stdout_ends_quietly() {
    // The read end is gone before the child writes, so its first write fails with EPIPE.
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = Command::new(env!("CARGO_BIN_EXE_resolvelab"))
        .args(["run", "--list"])
        .stdout(writer)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
        .wait_with_output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(141), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}
