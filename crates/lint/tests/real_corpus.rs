//! The linter on real configurations (`tests/lint-corpus/real/`, each with its public source and
//! a `truth.toml` written from reading it before any tool ran): every rule the linter has fires
//! exactly where the truth says it must (at the directive's line) and stays silent where it must
//! not; and the count of findings per rule over the corpus is pinned in `counts.txt`, so a change
//! in precision shows in review. Rules the truth names that the linter does not have yet are
//! listed, not failed.

use resolvelab_lint::{Context, LintOptions, RULES, Severity, Version};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/lint-corpus/real")
}

fn strs(v: Option<&toml::Value>) -> Vec<String> {
    v.and_then(|v| v.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// `(file relative to the case, line)` of a truth entry: a line number in the entry file, or
/// `"path:line"` for an included file.
fn place(entry: &toml::Value, file: &str) -> (String, u32) {
    match entry {
        toml::Value::Integer(n) => (file.to_string(), *n as u32),
        toml::Value::String(s) => {
            let (p, l) = s.rsplit_once(':').expect("path:line");
            (p.trim_start_matches("./").to_string(), l.parse().unwrap())
        }
        other => panic!("a truth line is a number or \"path:line\": {other}"),
    }
}

struct Case {
    name: String,
    /// (rule, file, line) the linter gave, with its severity.
    found: BTreeMap<(String, String, u32), Severity>,
    truth: toml::Value,
    entry: String,
}

fn lint(dir: &Path) -> Case {
    let text = std::fs::read_to_string(dir.join("truth.toml")).unwrap();
    let truth: toml::Value = toml::from_str(&text).unwrap();
    let entry = truth["file"].as_str().unwrap().to_string();
    let mut opts = LintOptions {
        // "unknown" means a configuration written for nginx 1.28 (the corpus README).
        nginx_version: Version::parse(
            truth["nginx_version"]
                .as_str()
                .filter(|v| *v != "unknown")
                .unwrap_or("1.28.3"),
        ),
        ..LintOptions::default()
    };
    opts.context = match truth.get("context").and_then(|c| c.as_str()) {
        Some("http") => Context::Http,
        Some("stream") => Context::Stream,
        Some("main") => Context::Main,
        _ => Context::Auto,
    };
    if let Some(root) = truth.get("sysroot").and_then(|s| s.as_str()) {
        opts.sysroot = Some(dir.join(root));
    }
    let report = resolvelab_lint::lint_paths(&[dir.join(&entry)], &opts)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let prefix = format!("{}/", dir.display());
    let found = report
        .findings
        .iter()
        .map(|f| {
            let file = f
                .file
                .strip_prefix(&prefix)
                .unwrap_or(&f.file)
                .trim_start_matches("./")
                .replace("/./", "/")
                .to_string();
            ((f.rule.clone(), file, f.line), f.severity)
        })
        .collect();
    Case {
        name: dir.file_name().unwrap().to_string_lossy().into_owned(),
        found,
        truth,
        entry,
    }
}

/// Disagreements of one case with its truth, for the rules the linter has.
fn disagreements(c: &Case, known: &BTreeSet<&str>) -> Vec<String> {
    let mut bad = Vec::new();
    let mut expected: BTreeSet<(String, String, u32)> = BTreeSet::new();
    if let Some(t) = c.truth.get("must_fire").and_then(|m| m.as_table()) {
        for (rule, lines) in t.iter().filter(|(r, _)| known.contains(r.as_str())) {
            for l in lines.as_array().unwrap() {
                let (file, line) = place(l, &c.entry);
                expected.insert((rule.clone(), file, line));
            }
        }
    }
    for e in &expected {
        if !c.found.contains_key(e) {
            bad.push(format!("{} must fire at {}:{}", e.0, e.1, e.2));
        }
    }
    let silent: BTreeSet<String> = strs(c.truth.get("must_not_fire")).into_iter().collect();
    let undecided: BTreeSet<String> = strs(c.truth.get("undecided")).into_iter().collect();
    for (k, sev) in &c.found {
        if expected.contains(k) {
            let want = c
                .truth
                .get("severity")
                .and_then(|s| s.get(format!("{}@{}", k.0, k.2)).or_else(|| s.get(&k.0)))
                .and_then(|v| v.as_str());
            if let Some(w) = want.filter(|w| *w != sev.as_str()) {
                bad.push(format!(
                    "{} at {}:{} is {}, truth {w}",
                    k.0,
                    k.1,
                    k.2,
                    sev.as_str()
                ));
            }
            continue;
        }
        if undecided.contains(&k.0) {
            continue;
        }
        if silent.contains(&k.0) {
            bad.push(format!("{} must not fire, fired at {}:{}", k.0, k.1, k.2));
        } else if !expected.iter().any(|e| e.0 == k.0) && known.contains(k.0.as_str()) {
            // Neither listed as firing nor as silent: the truth did not check this rule.
            bad.push(format!(
                "{} fired at {}:{}, which the truth does not mention",
                k.0, k.1, k.2
            ));
        }
    }
    bad
}

#[test]
fn real_configurations_agree_with_their_truth_and_the_counts_are_pinned() {
    let known: BTreeSet<&str> = RULES.iter().map(|r| r.id).collect();
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(corpus())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("truth.toml").exists())
        .collect();
    dirs.sort();
    assert!(dirs.len() >= 53, "{} cases", dirs.len());
    let mut bad = Vec::new();
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let mut not_yet: BTreeSet<String> = BTreeSet::new();
    for d in &dirs {
        let c = lint(d);
        for (rule, ..) in c.found.keys() {
            *counts.entry(rule.clone()).or_default() += 1;
        }
        if let Some(t) = c.truth.get("must_fire").and_then(|m| m.as_table()) {
            not_yet.extend(t.keys().filter(|r| !known.contains(r.as_str())).cloned());
        }
        for b in disagreements(&c, &known) {
            bad.push(format!("{}: {b}", c.name));
        }
    }
    let table: String = counts.iter().map(|(r, n)| format!("{r} {n}\n")).collect();
    let pinned = std::fs::read_to_string(corpus().join("counts.txt")).unwrap_or_default();
    println!(
        "findings per rule:\n{table}rules the truth names that the linter does not have yet: {not_yet:?}"
    );
    assert!(
        bad.is_empty(),
        "{} disagreements:\n{}",
        bad.len(),
        bad.join("\n")
    );
    assert_eq!(
        pinned, table,
        "the findings per rule changed: review, then update tests/lint-corpus/real/counts.txt"
    );
}
