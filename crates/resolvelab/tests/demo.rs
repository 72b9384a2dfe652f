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
    // The verdict itself, not the printed text (which lists every expectation, held or not):
    // one completed run of the `demo` scenario, every expectation held, and the two classes
    // among its incidents.
    let mut classes = Vec::new();
    let mut runs_seen = 0;
    for e in std::fs::read_dir(&runs).unwrap().flatten() {
        let Ok(text) = std::fs::read_to_string(e.path().join("verdict.json")) else {
            continue;
        };
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        runs_seen += 1;
        assert_eq!(v["status"], "completed", "{}", e.path().display());
        let exp = v["expectations"].as_array().unwrap();
        assert!(!exp.is_empty(), "{}: no expectations", e.path().display());
        for x in exp {
            assert_eq!(x["held"], true, "{}: {x}", e.path().display());
        }
        for i in v["incidents"].as_array().unwrap() {
            classes.push(i["class"].as_str().unwrap().to_string());
        }
    }
    assert_eq!(runs_seen, 1, "the demo plays one scenario");
    for c in ["generation-race-retry", "dns-nxdomain"] {
        assert!(classes.iter().any(|x| x == c), "{c} not in {classes:?}");
    }
}
