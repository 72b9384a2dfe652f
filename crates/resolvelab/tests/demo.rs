//! The README's main command, end to end: `resolvelab demo` reproduces the generation race and an
//! NXDOMAIN outage with the real nginx and prints the verdict and the report's path — started, as
//! a new user starts it, from a directory that is not the repository, with the default (relative)
//! `--out runs`.

use std::process::Command;

#[test]
fn demo_from_a_fresh_directory_with_the_default_out_reproduces_two_classes() {
    let cwd = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_resolvelab"))
        .arg("demo")
        .current_dir(cwd.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(text.contains("verdict: completed"), "{text}");
    assert!(text.contains("generation-race-retry"), "{text}");
    assert!(text.contains("dns-nxdomain"), "{text}");
    let report = text
        .lines()
        .find_map(|l| l.strip_prefix("report:"))
        .map(|p| std::path::PathBuf::from(p.trim()))
        .expect("a report line");
    let runs = cwd.path().canonicalize().unwrap().join("runs");
    assert!(
        report.starts_with(&runs),
        "the run directory is under ./runs of the working directory: {}",
        report.display()
    );
    let html = std::fs::read_to_string(&report).unwrap();
    assert!(html.contains("<svg"), "the report has charts");
}
