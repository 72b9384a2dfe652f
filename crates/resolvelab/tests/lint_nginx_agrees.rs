//! The linter and the real nginx agree: every corpus case that lint says nginx refuses
//! (`resolve-no-zone`, `resolve-no-resolver`, a zone below 32k) is refused by `nginx -t` with the
//! matching message, and every other case is accepted. Uses the lab's nginx (built from the
//! `nginx-src` crate on first use, cached and shared with the other lab tests).

use resolvelab_nginx::Nginx;
use std::path::{Path, PathBuf};
use std::process::Command;

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/lint-corpus")
}

/// What `nginx -t` says about a corpus case: Ok, or its `[emerg]` line.
fn nginx_t(nginx: &Nginx, case: &Path) -> Result<(), String> {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("logs")).unwrap();
    let main = dir.path().join("main.conf");
    let conf = case.join("nginx.conf");
    let text = std::fs::read_to_string(&conf).unwrap();
    // Corpus cases are http{} snippets; a case with its own events{} is a complete file.
    let target = if text.contains("events") {
        conf
    } else {
        std::fs::write(&main, format!("events {{}}\ninclude {};\n", conf.display())).unwrap();
        main
    };
    let out = Command::new(&nginx.path)
        .arg("-t")
        .arg("-p")
        .arg(dir.path())
        .arg("-c")
        .arg(&target)
        .output()
        .unwrap();
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

#[test]
fn nginx_refuses_exactly_what_lint_says_it_refuses() {
    let nginx = Nginx::obtain(None).expect("the lab's nginx");
    let refusals = [
        ("resolve-no-zone", "to be in shared memory"),
        (
            "resolve-no-resolver",
            "no resolver defined to resolve names at run time",
        ),
        ("zone-too-small", "is too small"),
    ];
    let mut checked = 0;
    let mut entries: Vec<PathBuf> = std::fs::read_dir(corpus())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("nginx.conf").is_file() && p.join("expected.txt").is_file())
        .collect();
    entries.sort();
    for case in entries {
        let text = std::fs::read_to_string(case.join("nginx.conf")).unwrap();
        // Not about the configuration: the lab build has no SSL or stream module, and
        // /var/log/nginx may not exist here.
        if text.contains("https://") || text.contains("/var/log/") || text.contains("stream {") {
            continue;
        }
        let expected = std::fs::read_to_string(case.join("expected.txt")).unwrap();
        // A name nginx resolves at start (`resolve-once`) must resolve on this machine, or
        // `nginx -t` stops with `host not found in upstream`: exactly the rule's point, but
        // the test machine has no DNS for the corpus's names.
        if expected.lines().any(|l| l.contains(" resolve-once ")) {
            continue;
        }
        let refused_by_lint: Vec<&str> = refusals
            .iter()
            .filter(|(rule, _)| {
                expected
                    .lines()
                    .any(|l| l.starts_with(&format!("error {rule} ")))
            })
            .map(|(_, msg)| *msg)
            .collect();
        let result = nginx_t(&nginx, &case);
        match (refused_by_lint.is_empty(), result) {
            (true, Ok(())) => {}
            (true, Err(e)) => panic!(
                "{}: lint finds no refusal but nginx -t fails: {e}",
                case.display()
            ),
            (false, Ok(())) => panic!(
                "{}: lint says nginx refuses it, nginx -t accepts",
                case.display()
            ),
            (false, Err(e)) => assert!(
                refused_by_lint.iter().any(|m| e.contains(m)),
                "{}: nginx -t failed differently: {e}",
                case.display()
            ),
        }
        checked += 1;
    }
    assert!(checked >= 30, "only {checked} cases checked");
}
