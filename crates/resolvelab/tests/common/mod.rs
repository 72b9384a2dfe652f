//! Helpers shared by the CLI tests: the binary under test, a child process that never outlives
//! its test, and a raw HTTP/1.1 request.
// Each test file uses the part it needs.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::time::Duration;

/// The `resolvelab` binary built for these tests.
pub fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_resolvelab"))
}

/// A child process killed (by its own handle, nothing else) when the test ends.
// Each test file uses the part it needs (a re-export is not dead code to the compiler).
#[allow(unused_imports)]
pub use resolvelab_core::testing::KillOnDrop as Proc;

/// Raw HTTP/1.1 with `Connection: close`; the tests only look for substrings.
pub fn http(addr: SocketAddr, method: &str, path: &str, body: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: lab\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

/// Run a command that must succeed; its stderr is the failure message.
pub use resolvelab_core::testing::output_ok as run_ok;

/// The classes of a diagnosis (`--format json`) with their failed requests.
pub fn class_requests(d: &serde_json::Value) -> std::collections::BTreeMap<String, u64> {
    d["classes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["class"].as_str().unwrap().to_string(),
                c["requests"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// Run a command that must succeed and parse its stdout as JSON.
pub fn run_json(cmd: &mut Command) -> serde_json::Value {
    serde_json::from_slice(&run_ok(cmd).stdout).unwrap()
}

/// Run the simulator on the config `toml` (written to `dir/sim.toml`) with `dir` as its run
/// directory (access.log, error.log, dns.jsonl, …); return its `--format json` summary.
pub fn sim_nginx(dir: &std::path::Path, toml: &str) -> serde_json::Value {
    let cfg = dir.join("sim.toml");
    std::fs::write(&cfg, toml).unwrap();
    run_json(
        bin()
            .args(["sim", "nginx", "--format", "json", "--config"])
            .arg(&cfg)
            .arg("--out")
            .arg(dir),
    )
}

/// The binary under test inside an empty network namespace of its own (`unshare -n`: not even
/// loopback is up), for tests of a refusal to reach a non-loopback address: were the refusal
/// broken, no packet could leave. `None` where namespaces cannot be made (not root): the test is
/// skipped, or fails under `CI=true`.
pub fn bin_offline() -> Option<Command> {
    if !resolvelab_core::testing::can_unshare_net() {
        resolvelab_core::testing::missing_prerequisite(
            "cannot create a network namespace here (needs root)",
        );
        return None;
    }
    let mut c = Command::new("unshare");
    c.args(["-n", env!("CARGO_BIN_EXE_resolvelab")]);
    Some(c)
}
