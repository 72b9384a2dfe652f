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
    column(text, "expectations")
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

/// A table's column by its header (the matrix gains columns over time): (section title,
/// engine id) → that column of the engine's row.
fn column(text: &str, header: &str) -> BTreeMap<(String, String), String> {
    let mut cells = BTreeMap::new();
    let (mut title, mut col) = (None, None);
    for l in text.lines() {
        if let Some(t) = l.strip_prefix("### ") {
            title = Some(t.trim().to_string());
            continue;
        }
        let (Some(t), Some(row)) = (&title, l.strip_prefix("| ")) else {
            continue;
        };
        let c = cells_of(row);
        if c[0] == "engine" {
            col = c.iter().position(|h| *h == header);
        } else if let Some(i) = col.filter(|i| *i < c.len() && !c[0].starts_with("---")) {
            cells.insert((t.clone(), c[0].to_string()), c[i].to_string());
        }
    }
    cells
}

/// A Markdown table row's cells (after its leading `| `).
fn cells_of(row: &str) -> Vec<&str> {
    row.trim_end_matches('|')
        .split(" | ")
        .map(str::trim)
        .collect()
}

/// A figure as the runs' table writes it: `1,501–1,502` and `1501–1502 (median 1502)` are
/// both `1501–1502`.
fn figure(s: &str) -> String {
    s.split(" (").next().unwrap_or("").replace([',', ' '], "")
}

/// The decision view's figures, each with the scenario it quotes and the engine of its column:
/// a cell quotes its row's scenario (the first `` `name` `` of the row's first cell), or the
/// `` `[variant]` `` named last before the figure in the same cell. Figures are in bold.
fn decision_figures(page: &str) -> Vec<(String, String, String)> {
    let start = page
        .find("## Decision view")
        .expect("COMPARISON.md has a decision view");
    let mut engines: Vec<&str> = Vec::new();
    let mut out = Vec::new();
    for l in page[start..].lines().skip(1) {
        if l.starts_with("## ") {
            break;
        }
        let Some(row) = l.strip_prefix("| ") else {
            continue;
        };
        let c = cells_of(row);
        if c[0].starts_with("---") {
            continue;
        }
        if engines.is_empty() {
            engines = c[1..]
                .iter()
                .map(|h| engines_named(h).into_iter().next().unwrap_or("?"))
                .collect();
            continue;
        }
        let scenario = c[0].split('`').nth(1).expect("a row names its scenario");
        for (cell, engine) in c[1..].iter().zip(&engines) {
            let mut quoted = scenario.to_string();
            for (i, part) in cell.split("**").enumerate() {
                if i % 2 == 1 {
                    out.push((quoted.clone(), engine.to_string(), figure(part)));
                    continue;
                }
                for (j, name) in part.split('`').enumerate() {
                    if j % 2 == 1 && name.starts_with('[') && name.ends_with(']') {
                        quoted = format!("{} {name}", scenario.split(" [").next().unwrap());
                    }
                }
            }
        }
    }
    out
}

/// Every figure of the decision view is the client-error figure of its engine's row in the
/// three-run tables it quotes (docs/DECISION-RUNS.md, else the repeated matrix
/// docs/COMPARISON-REPEATS.md), and every row it quotes there played three runs.
#[test]
fn the_decision_view_quotes_its_three_run_tables() {
    let (runs, repeats) = (doc("DECISION-RUNS.md"), doc("COMPARISON-REPEATS.md"));
    let mut errors = column(&repeats, "client errors");
    errors.extend(column(&runs, "client errors"));
    let mut requests = column(&repeats, "requests");
    requests.extend(column(&runs, "requests"));
    assert!(errors.len() >= 15, "{} rows read", errors.len());
    let figures = decision_figures(&doc("COMPARISON.md"));
    assert!(figures.len() >= 15, "{} figures read", figures.len());
    for (scenario, engine, fig) in &figures {
        let key = (scenario.clone(), engine.clone());
        let Some(got) = errors.get(&key) else {
            panic!(
                "the decision view quotes `{scenario}` on {engine}: not in DECISION-RUNS.md or COMPARISON-REPEATS.md"
            );
        };
        assert_eq!(&figure(got), fig, "`{scenario}` on {engine}");
        assert!(
            requests[&key].contains("3 runs") || requests[&key].contains("median"),
            "`{scenario}` on {engine}: {}",
            requests[&key]
        );
    }
}

#[test]
fn the_decision_check_reads_variants_and_figures() {
    let page = "## Decision view\n\n| event | nginx 1.28.3 | HAProxy 2.6.12 |\n|---|---|---|\n\
| NXDOMAIN (`nxdomain`) | **1,800** | **0**; with `[hold]`: **1,501–1,502** |\n## Next\n| x | y |\n";
    let f = |a: &str, b: &str, c: &str| (a.to_string(), b.to_string(), c.to_string());
    assert_eq!(
        decision_figures(page),
        [
            f("nxdomain", "nginx", "1800"),
            f("nxdomain", "haproxy", "0"),
            f("nxdomain [hold]", "haproxy", "1501–1502"),
        ]
    );
    assert_eq!(figure("1501–1502 (median 1502)"), "1501–1502");
}
