//! deploy/systemd/resolvelab-watch.service: systemd's own verifier accepts it without a word,
//! and its ExecStart, run as written (paths moved to a temporary root), starts `watch`.

use std::path::{Path, PathBuf};
use std::process::Command;

fn unit() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/systemd/resolvelab-watch.service")
}

/// `systemd-analyze verify` on the unit with its binary at `bin`: its complaints, if any.
fn verify(text: &str, dir: &Path) -> String {
    let f = dir.join("resolvelab-watch.service");
    std::fs::write(
        &f,
        text.replace(
            "/usr/local/bin/resolvelab",
            env!("CARGO_BIN_EXE_resolvelab"),
        ),
    )
    .unwrap();
    let o = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&f)
        .output()
        .unwrap();
    format!(
        "{}{}{}",
        if o.status.success() { "" } else { "failed: " },
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn the_unit_verifies_and_its_command_runs() {
    if Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_err()
    {
        resolvelab_core::testing::missing_prerequisite("systemd-analyze (Debian's systemd)");
        return;
    }
    let text = std::fs::read_to_string(unit()).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    assert_eq!(verify(&text, tmp.path()), "", "systemd-analyze verify");
    // The verifier does complain about a mistake.
    assert!(!verify(&text.replace("StateDirectory", "StateDirectry"), tmp.path()).is_empty());

    // ExecStart, its continuation lines joined, its paths under the temporary root.
    let exec: String = text
        .split("ExecStart=")
        .nth(1)
        .unwrap()
        .lines()
        .map(|l| l.trim().trim_end_matches('\\').to_string())
        .take_while(|l| !l.contains('='))
        .collect::<Vec<_>>()
        .join(" ");
    let root = tmp.path();
    for d in [
        "var/log/nginx",
        "etc/nginx",
        "var/lib/resolvelab-watch",
        "var/log/resolvelab-watch",
    ] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    std::fs::write(root.join("var/log/nginx/access.log"), "").unwrap();
    std::fs::write(root.join("var/log/nginx/error.log"), "").unwrap();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/diagnose/real/nxdomain/nginx.conf"),
        root.join("etc/nginx/nginx.conf"),
    )
    .unwrap();
    let args: Vec<String> = exec
        .split_whitespace()
        .skip(1)
        .map(|a| match a.strip_prefix('/') {
            Some(rel) => root.join(rel).display().to_string(),
            None => a.replace("127.0.0.1:9469", "127.0.0.1:0"),
        })
        .collect();
    assert_eq!(args[0], "watch", "{exec}");
    let o = Command::new(env!("CARGO_BIN_EXE_resolvelab"))
        .args(&args)
        .args(["--duration", "1s"])
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{exec}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(root.join("var/lib/resolvelab-watch/state.json").is_file());
    assert!(
        root.join("var/log/resolvelab-watch/incidents.jsonl")
            .is_file()
    );
}
