//! Stale addresses end to end on the model (`--engine sim`, no network): every setup of the
//! `stale-address` scenario holds its expectations, the linter flags the configurations that pin
//! a name at the line that does it (and only those), and the checker without a DNS log calls
//! the pin *probable* and says what would decide it. The real-nginx run is in scenarios.rs.

use serde_json::Value;
use std::path::{Path, PathBuf};

mod common;
use common::bin;

/// Every variant of stale-address on the model; (variant, run directory) pairs.
fn sim_runs(out: &Path) -> Vec<(String, PathBuf)> {
    let o = bin()
        .args(["run", "stale-address", "--engine", "sim", "-q", "--out"])
        .arg(out)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "run stale-address --engine sim: {:?}\n{}\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let mut runs: Vec<(String, PathBuf)> = std::fs::read_dir(out)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .map(|p| {
            let run = json(&p, "run.json");
            let variant = run["variant"].as_str().unwrap_or("base").to_string();
            (variant, p)
        })
        .collect();
    runs.sort();
    runs
}

fn json(dir: &Path, file: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join(file)).unwrap()).unwrap()
}

fn classes(v: &Value) -> Vec<(String, u64)> {
    v["incidents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["class"].as_str().unwrap().to_string(),
                i["count"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn every_setup_recovers_as_nginx_does_and_lint_flags_the_pins_at_their_line() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = sim_runs(tmp.path());
    let names: Vec<&str> = runs.iter().map(|(v, _)| v.as_str()).collect();
    assert_eq!(
        names,
        [
            "base",
            "proxy-pass",
            "reload",
            "resolve",
            "resolve-restart",
            "variable",
            "variable-no-resolver",
            "variable-servfail"
        ]
    );
    for (variant, dir) in &runs {
        let v = json(dir, "verdict.json");
        let held = v["expectations"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["held"].as_bool() == Some(true));
        assert!(held, "{variant}: {}", v["expectations"]);
        // The rule fires where the configuration pins the name, and nowhere else.
        let o = bin()
            .args(["lint", "--format", "json"])
            .arg(dir.join("nginx.conf"))
            .output()
            .unwrap();
        let lint: Value = serde_json::from_slice(&o.stdout).unwrap();
        let conf = std::fs::read_to_string(dir.join("nginx.conf")).unwrap();
        let at = |rule: &str| -> Vec<usize> {
            lint["findings"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|f| f["rule"] == rule)
                .map(|f| f["line"].as_u64().unwrap() as usize)
                .collect()
        };
        let pins = match variant.as_str() {
            "base" | "reload" => line_of(&conf, "server app.test.local:8080;"),
            "proxy-pass" => line_of(&conf, "proxy_pass http://app.test.local:8080;"),
            _ => Vec::new(),
        };
        assert_eq!(at("resolve-once"), pins, "{variant}\n{conf}");
        let unresolvable = match variant.as_str() {
            "variable-no-resolver" => line_of(&conf, "proxy_pass http://$backend:8080;"),
            _ => Vec::new(),
        };
        assert_eq!(
            at("variable-proxy-pass-no-resolver"),
            unresolvable,
            "{variant}\n{conf}"
        );
    }
    let by = |name: &str| &runs.iter().find(|(v, _)| v == name).unwrap().1;
    // Resolved at start: every request after the move fails, to the end of the run.
    let base = json(by("base"), "verdict.json");
    assert_eq!(classes(&base), [("stale-address".to_string(), 4000)]);
    // A reload 10 s later ends it; per request, the resolver's cache does (within valid).
    let reload = classes(&json(by("reload"), "verdict.json"));
    assert_eq!(reload.len(), 1);
    assert!((1900..=2100).contains(&reload[0].1), "{reload:?}");
    let variable = classes(&json(by("variable"), "verdict.json"));
    assert!(variable[0].1 <= 1000, "{variable:?}");
    // No resolver in scope: every request fails on its own resolution, moved or not.
    let none = classes(&json(by("variable-no-resolver"), "verdict.json"));
    assert!(
        none.iter().all(|(c, _)| c == "dns-request-failure"),
        "{none:?}"
    );
    assert_eq!(none.iter().map(|(_, n)| n).sum::<u64>(), 6000, "{none:?}");
    // SERVFAIL while resolving per request: the requests fail on their own lookups.
    let servfail = json(by("variable-servfail"), "verdict.json");
    assert!(
        classes(&servfail)
            .iter()
            .any(|(c, n)| c == "dns-request-failure" && *n >= 800),
        "{:?}",
        classes(&servfail)
    );
}

#[test]
fn without_a_dns_log_the_pin_is_probable_and_the_report_says_what_decides_it() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = sim_runs(tmp.path());
    let base = &runs.iter().find(|(v, _)| v == "base").unwrap().1;
    let diagnose = |extra: &[&str]| -> Value {
        let o = bin()
            .args(["diagnose", "--format", "json", "--log-format", "lab"])
            .arg("--access")
            .arg(base.join("access.log"))
            .arg("--error")
            .arg(base.join("error.log"))
            .args(extra)
            .output()
            .unwrap();
        serde_json::from_slice(&o.stdout).unwrap()
    };
    // Production: access and error logs only.
    let v = diagnose(&[]);
    let inc = &v["incidents"][0];
    assert_eq!(inc["class"], "stale-address");
    assert_eq!(inc["confidence"], 0.5);
    let text = inc["explanation"].as_str().unwrap();
    assert!(text.contains("Probable, not decided"), "{text}");
    assert!(text.contains("resolvelab dns watch"), "{text}");
    // The configuration pins the name: still probable, now saying so.
    let conf = base.join("nginx.conf");
    let v = diagnose(&["--nginx-conf", conf.to_str().unwrap()]);
    let text = v["incidents"][0]["explanation"].as_str().unwrap();
    assert!(text.contains("resolves a name only at start"), "{text}");
    // A DNS log of nginx's own queries (only at start: nothing asked again) cannot tell.
    let dns = base.join("dns.jsonl");
    let v = diagnose(&["--dns", dns.to_str().unwrap()]);
    assert_eq!(v["incidents"][0]["confidence"], 0.5);
    // The run directory (its DNS log and the authority's mode changes) decides it.
    let o = bin()
        .args(["analyze", "--format", "json", "--no-write"])
        .arg(base)
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["incidents"][0]["class"], "stale-address");
    assert_eq!(v["incidents"][0]["confidence"], 0.9);
    // A configuration that follows the name (`resolve`) rules the probable pin out.
    let resolve = &runs.iter().find(|(v, _)| v == "resolve").unwrap().1;
    let o = bin()
        .args(["diagnose", "--format", "json", "--log-format", "lab"])
        .arg("--access")
        .arg(resolve.join("access.log"))
        .arg("--error")
        .arg(resolve.join("error.log"))
        .arg("--nginx-conf")
        .arg(resolve.join("nginx.conf"))
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["incidents"][0]["class"], "upstream-failure");
    // … and says what it cannot tell: a failed backend, or one that moved and is followed
    // within `valid`; the command that decides it.
    let text = v["incidents"][0]["explanation"].as_str().unwrap();
    assert!(
        text.contains("Undetermined") && text.contains("resolvelab dns watch"),
        "{text}"
    );
}

/// 1-based numbers of the lines that contain `needle`.
fn line_of(text: &str, needle: &str) -> Vec<usize> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| l.contains(needle))
        .map(|(i, _)| i + 1)
        .collect()
}

#[test]
fn the_stale_address_page_is_one_compare_command_with_the_production_view() {
    let tmp = tempfile::tempdir().unwrap();
    let page = tmp.path().join("STALE-ADDRESS.md");
    std::fs::write(
        &page,
        "# Stale addresses\n\nprose before\n\n<!-- BEGIN GENERATED x -->\nold\n<!-- END GENERATED -->\n\nprose after\n",
    )
    .unwrap();
    let o = bin()
        .args([
            "compare",
            "stale-address",
            "--engines",
            "sim",
            "-q",
            "--out",
        ])
        .arg(tmp.path().join("runs"))
        .arg("--table")
        .arg(&page)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&page).unwrap();
    // The hand-written prose stays around the generated part, which names its command.
    assert!(
        text.starts_with("# Stale addresses\n\nprose before\n"),
        "{text}"
    );
    assert!(text.trim_end().ends_with("prose after"), "{text}");
    assert!(
        text.contains("<!-- BEGIN GENERATED by resolvelab compare stale-address --engines sim -->")
    );
    // One section per setup, saying what the variant changes.
    for v in [
        "reload",
        "proxy-pass",
        "variable",
        "variable-servfail",
        "resolve",
    ] {
        assert!(
            text.contains(&format!("### stale-address [{v}]")),
            "{v}\n{text}"
        );
    }
    assert!(text.contains("This variant: `server app.test.local:8080 resolve;`"));
    // The production view of the pinned base run: probable (0.50), where the run's own verdict
    // decided it from the answer history.
    let base = text
        .lines()
        .skip_while(|l| *l != "### stale-address")
        .find(|l| l.starts_with("| sim |"))
        .unwrap();
    let cols: Vec<&str> = base.split(" | ").collect();
    assert_eq!(cols[5], "`stale-address` 4000", "{base}");
    assert_eq!(cols[6], "`stale-address` 4000 (0.50)", "{base}");
}
