//! docs/COMPARISON.md never leans on a run marked not interpretable: every finding (a bullet of
//! the page) that cites a scenario whose cell on an engine it names is *not interpretable* in
//! the generated matrix (docs/COMPARISON-RUNS.md) says so in the same bullet.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

fn doc(name: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../docs")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The matrix's cells: (`scenario [variant]`, engine id) → the expectations column
/// (`held/checks status`).
fn matrix(text: &str) -> BTreeMap<(String, String), String> {
    let mut cells = BTreeMap::new();
    let mut title = None;
    // The column is found by its header: the matrix gains columns over time.
    let mut col = None;
    for l in text.lines() {
        if let Some(t) = l.strip_prefix("### ") {
            title = Some(t.trim().to_string());
            continue;
        }
        let (Some(t), Some(row)) = (&title, l.strip_prefix("| ")) else {
            continue;
        };
        let c: Vec<&str> = row
            .trim_end_matches('|')
            .split(" | ")
            .map(str::trim)
            .collect();
        if c[0] == "engine" {
            col = c.iter().position(|h| *h == "expectations");
        } else if let Some(i) = col.filter(|i| *i < c.len() && !c[0].starts_with("---")) {
            cells.insert((t.clone(), c[0].to_string()), c[i].to_string());
        }
    }
    cells
}

/// How the prose names each engine.
const ENGINES: [(&str, &[&str]); 5] = [
    ("nginx-1.31", &["1.31"]),
    ("nginx", &["1.28"]),
    ("haproxy", &["HAProxy"]),
    ("envoy", &["Envoy"]),
    ("caddy", &["Caddy"]),
];

fn engines_named(text: &str) -> BTreeSet<&'static str> {
    ENGINES
        .iter()
        .filter(|(_, words)| words.iter().any(|w| text.contains(w)))
        .map(|(id, _)| *id)
        .collect()
}

/// The page's bullets, whitespace joined, each with the engines its bold section heading
/// (`**HAProxy 2.6.12 with its defaults**`) names.
fn bullets(text: &str) -> Vec<(BTreeSet<&'static str>, String)> {
    let mut out = Vec::new();
    let mut section = BTreeSet::new();
    let mut cur: Option<String> = None;
    for l in text.lines() {
        let ends = l.starts_with("- ")
            || l.starts_with('#')
            || l.starts_with("**")
            || l.trim().is_empty()
            || l.starts_with('|');
        if ends && let Some(b) = cur.take() {
            out.push((section.clone(), b));
        }
        if l.starts_with("**") || l.starts_with('#') {
            section = engines_named(l);
        }
        if l.starts_with("- ") {
            cur = Some(l.to_string());
        } else if let Some(b) = &mut cur {
            b.push(' ');
            b.push_str(l.trim());
        }
    }
    out.extend(cur.map(|b| (section, b)));
    out
}

/// The scenarios a bullet cites: `` `name` `` or `` `name [variant]` `` as the matrix titles
/// them, and `` `[variant]` `` alone for the scenario cited last.
fn cited(bullet: &str, titles: &BTreeSet<&str>) -> Vec<String> {
    let mut out = Vec::new();
    let mut last: Option<String> = None;
    for (i, part) in bullet.split('`').enumerate() {
        if i % 2 == 0 {
            continue;
        }
        let t = part.trim();
        if titles.contains(t) {
            out.push(t.to_string());
            last = Some(t.split(" [").next().unwrap().to_string());
        } else if t.starts_with('[')
            && t.ends_with(']')
            && let Some(base) = &last
            && titles.contains(format!("{base} {t}").as_str())
        {
            out.push(format!("{base} {t}"));
        }
    }
    out
}

/// The (scenario, engine) pairs a bullet leans on without saying they are not interpretable.
fn unsaid(
    cells: &BTreeMap<(String, String), String>,
    section: &BTreeSet<&str>,
    bullet: &str,
) -> Vec<(String, String)> {
    let titles: BTreeSet<&str> = cells.keys().map(|(t, _)| t.as_str()).collect();
    let words = bullet
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('*', "");
    if words.contains("not interpretable") {
        return Vec::new();
    }
    let mut engines = section.clone();
    engines.extend(engines_named(bullet));
    let mut out = Vec::new();
    for t in cited(bullet, &titles) {
        for e in &engines {
            let key = (t.clone(), e.to_string());
            if cells
                .get(&key)
                .is_some_and(|s| s.contains("not-interpretable"))
                && !out.contains(&key)
            {
                out.push(key);
            }
        }
    }
    out
}

#[test]
fn no_finding_leans_on_a_run_marked_not_interpretable() {
    let cells = matrix(&doc("COMPARISON-RUNS.md"));
    let marked = cells
        .values()
        .filter(|s| s.contains("not-interpretable"))
        .count();
    // A matrix that could not be read would make this test pass on nothing.
    assert!(
        cells.len() >= 200 && marked > 0,
        "{} cells, {marked} not interpretable",
        cells.len()
    );
    let page = doc("COMPARISON.md");
    let found = bullets(&page);
    assert!(found.len() >= 30, "only {} bullets read", found.len());
    let bad: Vec<String> = found
        .iter()
        .filter_map(|(section, b)| {
            let u = unsaid(&cells, section, b);
            (!u.is_empty()).then(|| format!("{u:?} in: {}", &b[..b.len().min(120)]))
        })
        .collect();
    assert!(
        bad.is_empty(),
        "findings citing not-interpretable runs:\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_check_finds_a_bullet_that_leans_on_one() {
    let cells = matrix(
        "### rto\n\n| engine | version | requests | client errors | NLU | classes | without | outage | period | follow | p99 | expectations | run |\n\
|---|---|---|---|---|---|---|---|---|---|---|---|---|\n\
| haproxy | haproxy/2.6 | 1 | 0 | 0 | none | none | — | 1.0 s | 665 ms | 0.6 ms | 1/1 not-interpretable | `r` |\n\
| envoy | envoy/1.40 | 1 | 0 | 0 | none | none | — | 5.0 s | 4.7 s | 0.6 ms | 1/1 completed | `r` |\n",
    );
    assert_eq!(cells.len(), 2);
    let none = BTreeSet::new();
    let leans = "- In `rto` HAProxy followed in 665 ms.";
    assert_eq!(
        unsaid(&cells, &none, leans),
        [("rto".to_string(), "haproxy".to_string())]
    );
    let says = "- In `rto` HAProxy's run is *not\n  interpretable*.";
    assert!(unsaid(&cells, &none, says).is_empty());
    assert!(unsaid(&cells, &none, "- In `rto` Envoy followed in 4.7 s.").is_empty());
    // The section heading names the engine for its bullets.
    let haproxy: BTreeSet<&str> = ["haproxy"].into();
    assert_eq!(unsaid(&cells, &haproxy, "- `rto`: 665 ms.").len(), 1);
    let (sections, _): (Vec<_>, Vec<_>) = bullets("**HAProxy 2.6**\n\n- `rto`: 665\n  ms.\n")
        .into_iter()
        .unzip();
    assert_eq!(sections, [haproxy]);
}
