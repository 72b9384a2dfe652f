//! `resolvelab diagnose --instance NAME --partial FILE` and `resolvelab merge`, as
//! docs/diagnose.md's fleet recipes run them: 8 instances diagnosed in parallel by `xargs -P 4`,
//! merged flat and as a tree to one byte-identical report; refusals in one line with exit 2.
//! (What the report says about a fleet: `crates/diagnose/tests/fleet.rs`.)

mod common;
use common::bin;
use std::io::Read;
use std::path::Path;
use std::process::Command;

/// Eight real-nginx lab runs, each standing for one instance.
const RUNS: [&str; 8] = [
    "nxdomain",
    "generation-race",
    "swap-only",
    "dns-silent",
    "dual-resolve",
    "zone-churn",
    "zone-exhaustion",
    "backup.max_fails_0",
];

/// `logs/NAME/{access,error}.log` for every run, decompressed as nginx writes them.
fn logs(root: &Path) {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/diagnose/real");
    for run in RUNS {
        let to = root.join("logs").join(run);
        std::fs::create_dir_all(&to).unwrap();
        for name in ["access.log", "error.log"] {
            let plain = fixtures.join(run).join(name);
            let text = if plain.exists() {
                std::fs::read_to_string(plain).unwrap()
            } else {
                let gz =
                    std::fs::File::open(fixtures.join(run).join(format!("{name}.gz"))).unwrap();
                let mut s = String::new();
                flate2::read::GzDecoder::new(gz)
                    .read_to_string(&mut s)
                    .unwrap();
                s
            };
            std::fs::write(to.join(name), text).unwrap();
        }
    }
    std::fs::create_dir(root.join("parts")).unwrap();
}

fn sh(root: &Path, script: &str) -> std::process::Output {
    let dir = Path::new(env!("CARGO_BIN_EXE_resolvelab"))
        .parent()
        .unwrap();
    let path = format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    Command::new("sh")
        .args(["-c", script])
        .current_dir(root)
        .env("PATH", path)
        .output()
        .unwrap()
}

fn ok(o: std::process::Output) -> String {
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

#[test]
fn eight_instances_diagnosed_in_parallel_merge_to_one_report() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    logs(root);
    // The recipe of docs/diagnose.md ("Fleets"), with the lab's log format and clock.
    ok(sh(
        root,
        "ls logs | xargs -P 4 -I{} resolvelab diagnose --instance {} \
         --access logs/{}/access.log --error logs/{}/error.log \
         --log-format lab --tz-offset +00:00 --partial parts/{}.json",
    ));
    let flat = ok(sh(root, "resolvelab merge parts/*.json --format json"));
    let v: serde_json::Value = serde_json::from_str(&flat).unwrap();
    assert_eq!(v["schema"], "resolvelab.fleet/v1");
    let names: Vec<&str> = v["instances"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["name"].as_str().unwrap())
        .collect();
    let mut want = RUNS.to_vec();
    want.sort();
    assert_eq!(names, want);
    // The merged partial holds each instance's own `diagnose` report (its NLU events cut to
    // the first 1,000: the one field a partial changes).
    ok(sh(root, "resolvelab merge parts/*.json --partial all.json"));
    let all: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("all.json")).unwrap()).unwrap();
    for run in ["generation-race", "nxdomain"] {
        let alone = ok(sh(
            root,
            &format!(
                "resolvelab diagnose --access logs/{run}/access.log --error logs/{run}/error.log \
                 --log-format lab --tz-offset +00:00 --format json"
            ),
        ));
        let mut alone: serde_json::Value = serde_json::from_str(&alone).unwrap();
        let mut kept = all["instances"][run].clone();
        let events = alone["nlu_events"].as_array().unwrap().len();
        assert_eq!(
            kept["nlu_events"].as_array().unwrap().len(),
            events.min(1000),
            "{run}"
        );
        assert_eq!(kept["nlu_events_truncated"], events > 1000, "{run}");
        for v in [&mut alone, &mut kept] {
            v["nlu_events"].as_array_mut().unwrap().truncate(1000);
            v["nlu_events_truncated"] = serde_json::Value::Null;
        }
        assert_eq!(kept, alone, "{run}");
    }
    let sum: u64 = v["instances"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["requests"].as_u64().unwrap())
        .sum();
    assert_eq!(v["requests"].as_u64(), Some(sum));
    // A tree of merges, in another order, writes the same report byte for byte.
    ok(sh(
        root,
        "resolvelab merge parts/z*.json parts/s*.json parts/n*.json --partial left.json && \
         resolvelab merge parts/g*.json parts/d*.json parts/b*.json --partial right.json",
    ));
    let tree = ok(sh(
        root,
        "resolvelab merge right.json left.json --format json",
    ));
    assert_eq!(tree, flat);
    // The SSH recipe's shape: the partial on standard output, nothing else there.
    ok(sh(
        root,
        "resolvelab diagnose --instance nxdomain --access logs/nxdomain/access.log \
         --error logs/nxdomain/error.log --log-format lab --tz-offset +00:00 \
         --partial /dev/stdout > stdout.json && cmp stdout.json parts/nxdomain.json",
    ));
    let html = ok(sh(root, "resolvelab merge parts/*.json --format html"));
    assert!(html.contains("id=\"chart-fleet\"") && html.contains("<svg"));
    let md = ok(sh(root, "resolvelab merge parts/*.json"));
    assert!(
        md.starts_with("# resolvelab fleet diagnosis — 8 instances"),
        "{md}"
    );
    // --fail-on: a class found on any instance.
    let o = sh(
        root,
        "resolvelab merge parts/*.json --fail-on dns-nxdomain -o /dev/null",
    );
    assert_eq!(o.status.code(), Some(1));
}

#[test]
fn refused_partials_and_names_say_so_in_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    logs(root);
    let diagnose = |name: &str| {
        sh(
            root,
            &format!(
                "resolvelab diagnose --instance '{name}' --access logs/swap-only/access.log \
                 --error logs/swap-only/error.log --log-format lab --tz-offset +00:00 \
                 --partial parts/a.json"
            ),
        )
    };
    ok(diagnose("web-1"));
    let refused = |o: std::process::Output, says: &str| {
        let err = String::from_utf8_lossy(&o.stderr).to_string();
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(err.contains(says), "{err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    };
    refused(
        sh(root, "resolvelab merge parts/a.json parts/a.json"),
        "instance `web-1` is in two partials",
    );
    std::fs::write(
        root.join("old.json"),
        std::fs::read_to_string(root.join("parts/a.json"))
            .unwrap()
            .replacen(env!("CARGO_PKG_VERSION"), "0.0.1", 1),
    )
    .unwrap();
    refused(
        sh(root, "resolvelab merge old.json"),
        "old.json: written by resolvelab 0.0.1",
    );
    refused(
        sh(root, "resolvelab merge logs/swap-only/access.log"),
        "not a resolvelab partial",
    );
    // A usage error, in clap's words (its hint on a line of its own).
    let o = diagnose("two words");
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.lines().next().unwrap().contains(
            "'two words' for '--instance <NAME>': give 1 to 253 printable characters without spaces"
        ),
        "{err}"
    );
    let o = bin()
        .args(["diagnose", "--partial", "x.json", "--access", "a.log"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--instance"));
}

/// One instance diagnosed in three time slices (`--since`/`--until`, each reading the whole
/// logs as context), merged: the merged partial is byte for byte the partial of one
/// diagnosis over everything, and so is the fleet report; slices with a gap are refused.
#[test]
fn time_slices_of_one_instance_merge_into_its_whole_diagnosis() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    logs(root);
    let args = "--instance web-1 --access logs/nxdomain/access.log \
                --error logs/nxdomain/error.log --log-format lab --tz-offset +00:00";
    ok(sh(
        root,
        &format!("resolvelab diagnose {args} --partial whole.json"),
    ));
    let whole: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("whole.json")).unwrap()).unwrap();
    let d = &whole["instances"]["web-1"];
    let (s, e) = (
        d["start_ms"].as_i64().unwrap() / 1000,
        d["end_ms"].as_i64().unwrap() / 1000,
    );
    // The first cut one second into the NXDOMAIN incident, so that it straddles.
    let first = d["incidents"][0]["start_ms"].as_i64().unwrap() / 1000 + 1;
    let at = |t: i64| resolvelab_core::time::rfc3339(t * 1_000_000);
    let (c1, c2) = (at(first), at((first + e) / 2 + 1));
    assert!(s < first && first < e);
    for (i, range) in [
        format!("--until {c1}"),
        format!("--since {c1} --until {c2}"),
        format!("--since {c2}"),
    ]
    .iter()
    .enumerate()
    {
        ok(sh(
            root,
            &format!("resolvelab diagnose {args} {range} --partial parts/{i}.json"),
        ));
    }
    ok(sh(
        root,
        "resolvelab merge parts/2.json parts/0.json parts/1.json --partial merged.json",
    ));
    assert_eq!(
        std::fs::read_to_string(root.join("merged.json")).unwrap(),
        std::fs::read_to_string(root.join("whole.json")).unwrap()
    );
    assert_eq!(
        ok(sh(root, "resolvelab merge parts/*.json --format json")),
        ok(sh(root, "resolvelab merge whole.json --format json"))
    );
    let o = sh(root, "resolvelab merge parts/0.json parts/2.json");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("instance `web-1`: time slices") && err.contains("leave the time between"),
        "{err}"
    );
}
