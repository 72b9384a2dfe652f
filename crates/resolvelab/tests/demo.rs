//! The README's main command, end to end: `resolvelab demo` reproduces the generation race and an
//! NXDOMAIN outage with the real nginx and prints the verdict and the report's path.

use std::process::Command;

#[test]
fn demo_reproduces_two_classes_and_prints_the_report_path() {
    let out = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_resolvelab"))
        .args(["demo", "--out"])
        .arg(out.path())
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
        .map(|p| p.trim().to_string())
        .expect("a report line");
    let html = std::fs::read_to_string(&report).unwrap();
    assert!(html.contains("<svg"), "the report has charts");
}
