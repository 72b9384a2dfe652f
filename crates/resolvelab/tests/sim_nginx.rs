//! `resolvelab sim nginx` and `resolvelab sim predict` end to end.

mod common;
use common::{bin, run_json, run_ok};

#[test]
fn example_config_runs_and_writes_a_lab_shaped_run_directory() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("sim.toml");
    let out = bin()
        .args(["sim", "nginx", "--print-example"])
        .output()
        .unwrap();
    assert!(out.status.success());
    std::fs::write(&cfg, &out.stdout).unwrap();
    let run = dir.path().join("run");
    let out = run_ok(
        bin()
            .args(["sim", "nginx", "--duration", "30s", "--config"])
            .arg(&cfg)
            .arg("--out")
            .arg(&run),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("requests 9000"), "{text}");
    for f in [
        "access.log",
        "error.log",
        "dns.jsonl",
        "events.jsonl",
        "load.jsonl",
    ] {
        assert!(run.join(f).is_file(), "missing {f}");
    }
    let access = std::fs::read_to_string(run.join("access.log")).unwrap();
    assert_eq!(access.lines().count(), 9000);
    // JSON summary, same seed → same numbers.
    let json = |seed: &str| {
        let out = bin()
            .args([
                "sim",
                "nginx",
                "--count-only",
                "--format",
                "json",
                "--seed",
                seed,
                "--config",
            ])
            .arg(&cfg)
            .output()
            .unwrap();
        assert!(out.status.success());
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    assert_eq!(json("5"), json("5"));
    assert_eq!(json("5")["requests"], 36000);
}

#[test]
fn bad_config_is_one_line_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("bad.toml");
    std::fs::write(&cfg, "rps = 100\nduration = \"10x\"\nservers = []\n").unwrap();
    let out = bin()
        .args(["sim", "nginx", "--count-only", "--config"])
        .arg(&cfg)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.toml"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
}

#[test]
fn predict_compares_mitigations() {
    let v = run_json(bin().args([
        "sim",
        "predict",
        "--rps",
        "500",
        "--first-try-failure",
        "0.05",
        "--sample",
        "2m",
        "--format",
        "json",
    ]));
    let rows = v.as_array().unwrap();
    let get = |name: &str| {
        rows.iter()
            .find(|r| r["variant"] == name)
            .unwrap_or_else(|| panic!("no {name}"))
    };
    let base = get("baseline")["total"]["count"].as_u64().unwrap();
    assert!(base > 0, "the baseline must show the race");
    assert_eq!(get("per-dc")["total"]["count"], 0);
    assert_eq!(get("retry-shim")["total"]["count"], 0);
    let lo = get("baseline")["total"]["lo"].as_f64().unwrap();
    let hi = get("baseline")["total"]["hi"].as_f64().unwrap();
    let mid = get("baseline")["total"]["per_day"].as_f64().unwrap();
    assert!(lo < mid && mid < hi);

    // The user's own config as the baseline.
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("sim.toml");
    let ex = bin()
        .args(["sim", "nginx", "--print-example"])
        .output()
        .unwrap();
    std::fs::write(&cfg, &ex.stdout).unwrap();
    let v = run_json(
        bin()
            .args([
                "sim", "predict", "--sample", "30s", "--format", "json", "--config",
            ])
            .arg(&cfg),
    );
    let rows = v.as_array().unwrap();
    assert_eq!(rows.len(), 6);
    assert_eq!(rows[0]["requests"], 9000);
    assert!(rows[0]["total"]["count"].as_u64().unwrap() > 0);
    assert_eq!(rows[1]["variant"], "per-dc");
    assert_eq!(rows[1]["total"]["count"], 0);

    let out = bin()
        .args(["sim", "predict", "--swap-interval", "1s"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--swap-interval"));
}

#[test]
fn predict_moves_compares_the_ways_of_using_a_name() {
    let v = run_json(bin().args([
        "sim",
        "predict",
        "--moves-per-day",
        "12",
        "--rps",
        "100",
        "--reload-after",
        "2m",
        "--moves",
        "4",
        "--format",
        "json",
    ]));
    let rows = v.as_array().unwrap();
    let get = |name: &str| {
        rows.iter()
            .find(|r| r["setup"] == name)
            .unwrap_or_else(|| panic!("no {name}"))
    };
    // The pin lasts until the reload: 120 s of every request.
    let once = get("resolve-once")["outage_s"].as_f64().unwrap();
    assert!((once - 120.0).abs() < 2.0, "{once}");
    for s in ["per-request", "resolve"] {
        let o = get(s)["outage_s"].as_f64().unwrap();
        assert!(o > 0.0 && o <= 6.5, "{s}: {o}");
    }
    let per_move = get("resolve-once")["per_move"].as_f64().unwrap();
    let per_day = get("resolve-once")["per_day"]["per_day"].as_f64().unwrap();
    assert!((per_day - per_move * 12.0).abs() < 1e-6);

    let out = bin()
        .args(["sim", "predict", "--moves-per-day", "5", "--valid", "0s"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--valid"));
}

#[test]
fn predict_a_fleet_sums_its_instances_and_shows_their_spread() {
    let out = bin()
        .args([
            "sim",
            "predict",
            "--rps",
            "400",
            "--first-try-failure",
            "0.3",
            "--sample",
            "30s",
            "--instances",
            "4",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("Summed over a fleet of 4 instances at "),
        "{text}"
    );
    assert!(text.lines().any(|l| l.contains("per instance")), "{text}");
    let v = run_json(bin().args([
        "sim",
        "predict",
        "--moves-per-day",
        "12",
        "--rps",
        "400",
        "--moves",
        "3",
        "--instances",
        "4",
        "--format",
        "json",
    ]));
    for r in v.as_array().unwrap() {
        assert_eq!(r["instances"], 4, "{r}");
        let (o, last) = (
            r["outage_s"].as_f64().unwrap(),
            r["last_followed_s"].as_f64().unwrap(),
        );
        assert!(last >= o, "{r}");
    }
    // Another proxy's model has no fleet: refused in one line.
    let out = bin()
        .args(["sim", "predict", "--engine", "haproxy", "--instances", "4"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--instances is the nginx model's fleet"),
        "{err}"
    );
}
