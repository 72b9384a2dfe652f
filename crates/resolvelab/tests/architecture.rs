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
