//! The corpus under `tests/lint-corpus/`: every case directory holds `nginx.conf` (or an
//! `nginx -T` dump in `nginx-T.txt`), optional `options` (`nginx_version = …`, `rps = …`) and
//! `expected.txt` with one `SEVERITY RULE FILE:LINE` per finding, exactly — so a case checks both
//! what is found and that nothing else is. `RULE-pos` / `RULE-neg` cases exist for every rule.
//! Set `LINT_CORPUS_BLESS=1` to (re)write `expected.txt` files; review the diff before keeping it.

use resolvelab_lint::{LintOptions, RULES, Report, Version, lint_paths};
use std::path::{Path, PathBuf};

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/lint-corpus")
}

fn cases() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(corpus())
        .expect("corpus directory")
        .map(|e| e.expect("entry").path())
        .filter(|p| input(p).is_some())
        .collect();
    out.sort();
    out
}

fn input(case: &Path) -> Option<PathBuf> {
    ["nginx.conf", "nginx-T.txt"]
        .iter()
        .map(|n| case.join(n))
        .find(|p| p.is_file())
}

fn options(case: &Path) -> LintOptions {
    let mut opts = LintOptions::default();
    if let Ok(text) = std::fs::read_to_string(case.join("options")) {
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let (k, v) = line.split_once('=').expect("key = value");
            match k.trim() {
                "nginx_version" => opts.nginx_version = Version::parse(v.trim()),
                "rps" => opts.rps = v.trim().parse().ok(),
                other => panic!("unknown option {other} in {}", case.display()),
            }
        }
    }
    opts
}

fn summarize(report: &Report, case: &Path) -> String {
    let prefix = format!("{}/", case.display());
    let mut out = String::new();
    for f in &report.findings {
        let file = f.file.strip_prefix(&prefix).unwrap_or(&f.file);
        out.push_str(&format!(
            "{} {} {}:{}\n",
            f.severity.as_str(),
            f.rule,
            file,
            f.line
        ));
    }
    for s in &report.suppressed {
        let file = s
            .finding
            .file
            .strip_prefix(&prefix)
            .unwrap_or(&s.finding.file);
        out.push_str(&format!(
            "suppressed {} {}:{}\n",
            s.finding.rule, file, s.finding.line
        ));
    }
    out
}

fn run_case(case: &Path) -> (Report, String) {
    let report = lint_paths(&[input(case).unwrap()], &options(case))
        .unwrap_or_else(|e| panic!("{}: {e}", case.display()));
    let got = summarize(&report, case);
    (report, got)
}

#[test]
fn every_case_matches_its_expected_findings_exactly() {
    let bless = std::env::var_os("LINT_CORPUS_BLESS").is_some();
    let mut failures = Vec::new();
    for case in cases() {
        let (_, got) = run_case(&case);
        let path = case.join("expected.txt");
        if bless {
            std::fs::write(&path, &got).unwrap();
            continue;
        }
        let want = std::fs::read_to_string(&path)
            .unwrap_or_else(|_| panic!("{} is missing", path.display()));
        if want != got {
            failures.push(format!(
                "{}:\n--- expected\n{want}--- got\n{got}",
                case.display()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_rule_has_a_positive_and_a_negative_case() {
    for rule in RULES {
        for (suffix, must_have) in [("pos", true), ("neg", false)] {
            let case = corpus().join(format!("{}-{suffix}", rule.id));
            assert!(
                input(&case).is_some(),
                "missing corpus case {}",
                case.display()
            );
            let (_, got) = run_case(&case);
            let has = got
                .lines()
                .any(|l| l.split(' ').nth(1) == Some(rule.id) && !l.starts_with("suppressed"));
            assert_eq!(
                has,
                must_have,
                "{}: rule {} {} expected\n{got}",
                case.display(),
                rule.id,
                if must_have { "is" } else { "is not" }
            );
        }
    }
}

#[test]
fn the_seed_problem_is_flagged_and_the_recommendation_is_clean() {
    let (problem, got) = run_case(&corpus().join("seed-001-problem"));
    for id in ["resolve-single-name", "resolve-max-fails", "resolver-ipv6"] {
        assert!(got.contains(id), "{id} missing:\n{got}");
    }
    assert_eq!(problem.exit_code(resolvelab_lint::Severity::Warning), 1);
    let (rec, got) = run_case(&corpus().join("seed-001-recommended"));
    assert!(rec.findings.is_empty(), "{got}");
    assert_eq!(rec.exit_code(resolvelab_lint::Severity::Info), 0);
    // The mitigation keeps the GSLB name: still exposed, plus the valid=30s trade-off as info.
    let (_, got) = run_case(&corpus().join("seed-001-mitigation"));
    assert!(got.contains("info resolver-valid-long"), "{got}");
    assert!(got.contains("warning resolve-single-name"), "{got}");
    assert!(!got.contains("resolve-max-fails"), "{got}");
}

#[test]
fn includes_and_nginx_dump_give_the_same_findings() {
    let (files, a) = run_case(&corpus().join("includes"));
    let (dump, b) = run_case(&corpus().join("nginx-T"));
    assert!(!a.is_empty());
    assert_eq!(
        a.replace("conf.d/", "/etc/nginx/conf.d/")
            .replace("upstreams/", "/etc/nginx/upstreams/"),
        b
    );
    assert_eq!(files.findings.len(), dump.findings.len());
    // The same tree dumped by a real nginx 1.28.3 (see nginx-T-real/README.md).
    let (_, c) = run_case(&corpus().join("nginx-T-real"));
    assert_eq!(
        b.replace("/etc/nginx/", "/tmp/resolvelab-lint-fixture/nginx/"),
        c
    );
    assert!(
        files.notes.iter().any(|n| n.contains("matched no file")),
        "{:?}",
        files.notes
    );
}

fn malformed(name: &str) -> String {
    let path = corpus().join("malformed").join(name);
    lint_paths(&[path], &LintOptions::default())
        .expect_err("malformed input must be an error")
        .to_string()
}

#[test]
fn malformed_input_is_one_error_with_file_and_line() {
    let dir = corpus().join("malformed");
    let d = dir.display();
    let cases = [
        (
            "unclosed-block.conf",
            format!("{d}/unclosed-block.conf:5:1: unexpected end of file, expecting \"}}\""),
        ),
        (
            "stray-brace.conf",
            format!("{d}/stray-brace.conf:3:1: unexpected \"}}\""),
        ),
        (
            "unterminated-quote.conf",
            format!("{d}/unterminated-quote.conf:2:18: unterminated quoted string"),
        ),
        (
            "missing-semicolon.conf",
            format!("{d}/missing-semicolon.conf:4:5: unexpected \"}}\""),
        ),
        (
            "include-missing/nginx.conf",
            format!(
                "{d}/include-missing/nginx.conf:2: include: cannot read \"{d}/include-missing/sites/missing.conf\""
            ),
        ),
        (
            "include-loop.conf",
            format!("{d}/loop.conf:1: include \"{d}/loop.conf\" includes itself"),
        ),
    ];
    for (name, want) in cases {
        let got = malformed(name);
        assert!(
            got.starts_with(&want),
            "{name}:\n got: {got}\nwant: {want}…"
        );
        assert!(!got.contains('\n'), "one line: {got}");
    }
}

#[test]
fn docs_name_every_rule_and_show_current_output_for_the_seed_configs() {
    let doc = std::fs::read_to_string(corpus().join("../../docs/lint.md")).expect("docs/lint.md");
    for rule in RULES {
        assert!(
            doc.contains(&format!("`{}`", rule.id)),
            "docs/lint.md misses {}",
            rule.id
        );
    }
    let opts = LintOptions {
        nginx_version: Version::parse("1.28.3"),
        ..LintOptions::default()
    };
    for case in [
        "seed-001-problem",
        "seed-001-recommended",
        "seed-001-recommended-verbatim",
        "seed-001-mitigation",
        "suppressions",
    ] {
        let name = format!("{case}/nginx.conf");
        let text = std::fs::read_to_string(corpus().join(&name)).unwrap();
        let report = resolvelab_lint::lint_text(&name, text, &opts).unwrap();
        let out = resolvelab_lint::render_text(&report);
        // The output right under its own command line: `clean: no findings` found anywhere
        // on the page would not say which case printed it.
        let shown = format!("$ resolvelab lint --nginx-version 1.28.3 {name}\n{out}");
        assert!(
            doc.contains(&shown),
            "docs/lint.md shows stale output for {case}; current output:\n{shown}"
        );
    }
}
