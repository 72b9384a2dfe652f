//! The checker ([`analyze_run`]) on small cuts of the first full lab runs (`run --all`): the fixes of the
//! checker's first findings — offsets from the swap before the failing selection, generation
//! race vs tries-exhausted vs wipeout, injections meant to miss, the retry shim's passes, the
//! load generator's unsent requests, ordinary 502s beside NLU lines, and the evidence counts.

use resolvelab_diagnose::analyze_run;
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/diagnose/followup")
}

fn run_copy(rel: &str) -> tempfile::TempDir {
    let src = fixtures().join(rel);
    let dst = tempfile::tempdir().unwrap();
    for e in std::fs::read_dir(&src).unwrap_or_else(|e| panic!("{}: {e}", src.display())) {
        let e = e.unwrap();
        std::fs::copy(e.path(), dst.path().join(e.file_name())).unwrap();
    }
    dst
}

/// The verdict on a run, as its JSON.
fn analyze(dir: &Path) -> serde_json::Value {
    let v = analyze_run(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    serde_json::to_value(&v).unwrap()
}

fn all_held(v: &serde_json::Value, rel: &str) {
    assert_eq!(v["status"], "completed", "{rel}: {}", v["summary"]);
    let ex = v["expectations"].as_array().unwrap();
    assert!(!ex.is_empty(), "{rel}: no expectations");
    for e in ex {
        assert!(
            e["held"].as_bool().unwrap(),
            "{rel}: {} → {}",
            e["text"],
            e["measured"]
        );
    }
}

fn incidents<'a>(v: &'a serde_json::Value, class: &str) -> Vec<&'a serde_json::Value> {
    v["incidents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["class"] == class)
        .collect()
}

/// Demo run, swap at 445.145 and NXDOMAIN at 448.146: the race NLUs are measured from the
/// change that precedes their failure (a few ms), not from the previous one (~3 s), the
/// incidents agree with their NLU events, and the multi-hop NLUs right after the NXDOMAIN
/// removal (through the pre-change peer) are the generation race, not tries-exhausted.
#[test]
fn race_offsets_and_classes_follow_the_failing_selection() {
    let dir = run_copy("demo-nxdomain-race");
    let v = analyze(dir.path());
    all_held(&v, "demo-nxdomain-race");
    let race = incidents(&v, "generation-race-retry");
    assert_eq!(race.len(), 2, "{race:#?}");
    assert!(incidents(&v, "tries-exhausted").is_empty());
    let events = v["nlu_events"].as_array().unwrap();
    for i in &race {
        let after = i["after_swap_ms"].as_i64().unwrap();
        assert!(
            (0..100).contains(&after),
            "incident {} after {after}",
            i["id"]
        );
        // The request started before the change; the offset must not go negative or jump a period.
        assert!(i["start_ms"].as_i64().unwrap() <= i["end_ms"].as_i64().unwrap());
        assert!(
            events
                .iter()
                .any(|e| e["class"] == "generation-race-retry" && e["after_swap_ms"] == after),
            "no NLU event with the incident's offset {after}"
        );
    }
    for e in events
        .iter()
        .filter(|e| e["class"] == "generation-race-retry")
    {
        assert!(e["after_swap_ms"].as_i64().unwrap() < 100, "{e}");
    }
    // The second race incident goes through the pre-NXDOMAIN peer, 3-hop included.
    let nx_race = race
        .iter()
        .find(|i| i["swap_direction"].as_str().unwrap().contains("NXDOMAIN"))
        .expect("a race incident at the NXDOMAIN removal");
    assert_eq!(nx_race["hops"]["multi_hop"], 1);
    assert!(nx_race["hops"]["two_hop"].as_u64().unwrap() >= 2);
    // The 1-hop burst is still the NXDOMAIN class.
    assert_eq!(incidents(&v, "dns-nxdomain").len(), 1);
    // Evidence counts: every NLU is paired, and `present` says so.
    let m = v["expectations"][0]["measured"].as_str().unwrap();
    assert!(m.contains("8/8 NLU paired"), "{m}");
    assert!(!m.contains("0 error lines"), "{m}");
}

/// The 2-hop NLU whose own failed try disabled the last live peer starts the wipeout.
#[test]
fn the_first_nlu_of_a_wipeout_is_the_wipeout() {
    let dir = run_copy("wipeout-start");
    let v = analyze(dir.path());
    all_held(&v, "wipeout-start");
    assert_eq!(v["nlu"]["two_hop"], 2);
    let w = incidents(&v, "maxfails-wipeout");
    assert_eq!(w.len(), 1);
    assert_eq!(w[0]["nlu"], v["nlu"]["total"]);
}

/// The first failure of the dual-resolve wipeout is an ordinary `IP, IP` `502, 502` on the
/// same connection and second as an NLU line: it is an upstream failure, not an NLU.
#[test]
fn an_ordinary_502_beside_an_nlu_line_is_not_an_nlu() {
    let dir = run_copy("dual-resolve-start");
    let v = analyze(dir.path());
    all_held(&v, "dual-resolve-start");
    assert_eq!(v["nlu"]["unknown_hops"], 0);
    assert_eq!(v["nlu"]["total"], v["nlu"]["paired"]);
    let up = incidents(&v, "upstream-failure");
    assert_eq!(up.len(), 1);
    assert_eq!(up[0]["count"], 1);
    assert_eq!(up[0]["nlu"], 0);
}

/// Retry shim: NLUs inside the first pass are counted and classified even though the client
/// got 200; `rescued` and `max_passes` are measurable.
#[test]
fn retry_shim_passes_are_counted_and_classified() {
    let dir = run_copy("retry-shim");
    let v = analyze(dir.path());
    all_held(&v, "retry-shim");
    assert_eq!(v["nlu"]["total"], 0, "the client saw no NLU");
    let p = &v["passes"];
    assert_eq!(p["max_passes"], 2);
    let internal = p["internal_nlu"].as_u64().unwrap();
    assert!(internal > 0);
    assert_eq!(p["rescued"].as_u64().unwrap(), internal);
    assert_eq!(
        p["internal_paired"], internal,
        "each with its own error line"
    );
    assert_eq!(p["internal_by_class"]["generation-race-retry"], internal);
    let ev: Vec<_> = v["nlu_events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["internal"] == true)
        .collect();
    assert_eq!(ev.len() as u64, internal);
    assert!(ev.iter().all(|e| e["status"] == 200 && e["hops"] == 2));
}

/// `late`/`dropped` records of a CPU-starved load generator are not client errors.
#[test]
fn unsent_requests_are_not_client_errors() {
    let dir = run_copy("first-pick-unsent");
    let v = analyze(dir.path());
    all_held(&v, "first-pick-unsent");
    let c = &v["client"];
    assert_eq!(c["errors"], 0);
    assert!(c["unsent"].as_u64().unwrap() > 0);
    assert!(c["status"].get("error").is_none(), "{c}");
}

fn set_events(dir: &Path, f: impl Fn(&mut serde_json::Value)) {
    let p = dir.join("events.jsonl");
    let text = std::fs::read_to_string(&p).unwrap();
    let mut out = String::new();
    for l in text.lines() {
        let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
        if v.get("hits").is_some() {
            f(&mut v);
        }
        out += &format!("{v}\n");
    }
    std::fs::write(p, out).unwrap();
}

/// An NXDOMAIN window placed between re-queries: 0 hits is the finding when the event says
/// `expect_miss` (or, for older runs, the scenario aligned it `between-requeries`); a hit
/// spoils the run.
#[test]
fn injections_meant_to_miss() {
    // Older run: events.jsonl without the flag, the scenario says `between-requeries`.
    let dir = run_copy("nxdomain-unaligned");
    let v = analyze(dir.path());
    all_held(&v, "nxdomain-unaligned");
    assert!(
        v["summary"]
            .as_str()
            .unwrap()
            .contains("missed as intended"),
        "{}",
        v["summary"]
    );
    assert_eq!(v["injections"][0]["expect_miss"], true);

    // Current runner: the flag is on the event.
    let dir = run_copy("nxdomain-unaligned");
    // The scenario's own word that the window was meant to miss is gone.
    let ex = dir.path().join("expect.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&ex).unwrap()).unwrap();
    assert!(v.as_object_mut().unwrap().remove("meant_to_miss").is_some());
    std::fs::write(&ex, v.to_string()).unwrap();
    let v = analyze(dir.path());
    assert_eq!(v["status"], "not-interpretable", "no flag anywhere: a miss");
    set_events(dir.path(), |e| e["expect_miss"] = true.into());
    let v = analyze(dir.path());
    assert_eq!(v["status"], "completed", "{}", v["summary"]);

    // Meant to miss, but hit.
    set_events(dir.path(), |e| e["hits"] = 3.into());
    let v = analyze(dir.path());
    assert_eq!(v["status"], "not-interpretable");
    let s = v["summary"].as_str().unwrap();
    assert!(s.contains("meant to miss") && s.contains("hit 3"), "{s}");
}
