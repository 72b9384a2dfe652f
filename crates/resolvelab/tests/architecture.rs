//! docs/ARCHITECTURE.md matches the workspace: its dependency block is what `cargo metadata`
//! says, and its crate table has one row per crate, each cell at most two lines long.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .parent()
        .unwrap()
}

fn architecture() -> String {
    std::fs::read_to_string(repo().join("docs/ARCHITECTURE.md")).unwrap()
}

/// `crate → dep, dep` per workspace member, normal dependencies inside the workspace only.
fn dependency_block() -> String {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(repo())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let m: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let packages = m["packages"].as_array().unwrap();
    let ours: BTreeSet<&str> = packages.iter().filter_map(|p| p["name"].as_str()).collect();
    let short = |n: &str| n.trim_start_matches("resolvelab-").to_string();
    let mut lines: Vec<String> = packages
        .iter()
        .map(|p| {
            let deps: BTreeSet<String> = (p["dependencies"].as_array().unwrap().iter())
                .filter(|d| d["kind"].is_null())
                .filter_map(|d| d["name"].as_str())
                .filter(|n| ours.contains(n))
                .map(short)
                .collect();
            let deps: Vec<String> = deps.into_iter().collect();
            let name = short(p["name"].as_str().unwrap());
            match deps.is_empty() {
                true => format!("{name} → —"),
                false => format!("{name} → {}", deps.join(", ")),
            }
        })
        .collect();
    lines.sort();
    lines.join("\n")
}

#[test]
fn the_dependency_block_is_what_cargo_metadata_says() {
    let doc = architecture();
    let (_, rest) = doc.split_once("<!-- deps:begin -->\n```text\n").unwrap();
    let (written, _) = rest.split_once("\n```\n<!-- deps:end -->").unwrap();
    let actual = dependency_block();
    assert_eq!(
        written, actual,
        "docs/ARCHITECTURE.md's dependency block is out of date; replace it with:\n{actual}"
    );
    // What the architecture promises of the shape: the format needs no runner.
    assert!(actual.lines().any(|l| l == "scenario → core"), "{actual}");
}

#[test]
fn the_crate_table_has_one_short_row_per_crate() {
    let doc = architecture();
    let rows: Vec<(&str, &str)> = doc
        .lines()
        .filter_map(|l| l.strip_prefix("| `crates/"))
        .filter_map(|l| l.split_once("` | "))
        .collect();
    let named: BTreeSet<&str> = rows.iter().map(|(c, _)| *c).collect();
    let dirs: BTreeSet<String> = std::fs::read_dir(repo().join("crates"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let dirs: BTreeSet<&str> = dirs.iter().map(String::as_str).collect();
    assert_eq!(named, dirs, "one row per crates/ folder");
    for (c, cell) in rows {
        // Two lines of a 100-column page.
        assert!(
            cell.chars().count() <= 220,
            "crates/{c}: {} chars",
            cell.len()
        );
    }
}

/// The modules a lab file imports: `crate::m` (a top-level module) and, inside a folder, its
/// siblings through `super::` (`super::f` alone is the folder's `mod.rs`). Tests are left out.
fn lab_imports(module: &str, text: &str) -> BTreeSet<String> {
    let code = text.split("#[cfg(test)]\nmod tests").next().unwrap();
    let code: String = (code.lines())
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut out = BTreeSet::new();
    for (i, _) in code.match_indices("crate::") {
        out.insert(ident(&code[i + 7..]));
    }
    if let Some(parent) = module.strip_suffix(&format!("::{}", module.rsplit("::").next().unwrap()))
    {
        for (i, _) in code.match_indices("super::") {
            let next = ident(&code[i + 7..]);
            let sibling = code[i + 7 + next.len()..].starts_with("::");
            out.insert(match sibling {
                true => format!("{parent}::{next}"),
                false => parent.to_string(),
            });
        }
    }
    // A folder's mod.rs using its children (`haproxy::config`).
    let children = repo().join("crates/lab/src").join(module);
    if children.is_dir() {
        for e in std::fs::read_dir(children).unwrap() {
            let n = e.unwrap().file_name().to_string_lossy().replace(".rs", "");
            if n != "mod" && code.contains(&format!("{n}::")) {
                out.insert(format!("{module}::{n}"));
            }
        }
    }
    out.remove(module);
    out.remove("");
    out
}

#[test]
fn no_module_of_the_lab_imports_one_that_imports_it_back() {
    let src = repo().join("crates/lab/src");
    let mut graph: Vec<(String, BTreeSet<String>)> = Vec::new();
    let mut add = |module: String, path: &Path| {
        let text = std::fs::read_to_string(path).unwrap();
        graph.push((module.clone(), lab_imports(&module, &text)));
    };
    for e in std::fs::read_dir(&src).unwrap() {
        let p = e.unwrap().path();
        let stem = p.file_stem().unwrap().to_string_lossy().into_owned();
        if p.is_dir() {
            for c in std::fs::read_dir(&p).unwrap() {
                let c = c.unwrap().path();
                let n = c.file_stem().unwrap().to_string_lossy().into_owned();
                let module = if n == "mod" {
                    stem.clone()
                } else {
                    format!("{stem}::{n}")
                };
                add(module, &c);
            }
        } else if stem != "lib" {
            add(stem, &p);
        }
    }
    assert!(graph.len() > 10, "{graph:?}");
    // Depth-first search for a cycle.
    let edges = |m: &str| graph.iter().find(|(n, _)| n == m).map(|(_, e)| e.clone());
    fn visit(
        m: &str,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
        edges: &dyn Fn(&str) -> Option<BTreeSet<String>>,
    ) {
        if let Some(i) = path.iter().position(|p| p == m) {
            panic!(
                "import circle in crates/lab: {}",
                path[i..].join(" → ") + " → " + m
            );
        }
        if !done.insert(m.to_string()) {
            return;
        }
        path.push(m.to_string());
        for n in edges(m).unwrap_or_default() {
            visit(&n, path, done, edges);
        }
        path.pop();
    }
    let mut done = BTreeSet::new();
    for (m, _) in &graph {
        visit(m, &mut Vec::new(), &mut done, &edges);
    }
}
