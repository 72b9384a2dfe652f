//! The model engines (`sim`, `sim-envoy`, `sim-haproxy`) through the one run lifecycle: library
//! scenarios leave a lab-shaped run directory, the checker's verdict holds the scenario's
//! expectations, each proxy's model gets its own class, and the same seed gives byte-identical
//! logs. No network traffic: the models only write files. (`resolvelab run`'s flags, messages
//! and exit codes: `crates/resolvelab/tests/engine_sim.rs`.)

mod common;
use common::{Play, json};
use resolvelab_core::evidence::file;
use resolvelab_lab::engine;
use resolvelab_lab::judge::{self, Judged};
use resolvelab_lab::options::RunOptions;
use std::path::Path;

/// `name` (its `variant`, or every variant the model plays) on the nginx model.
fn sim(out: &Path, name: &str, variant: Option<&str>) -> Vec<Judged> {
    let p = Play::new(name, "sim");
    match variant {
        Some(v) => p.variant(v),
        None => p,
    }
    .into(out)
}

fn dir(j: &Judged) -> &Path {
    &j.record.dir
}

/// Every expectation held, the run is interpretable, and the directory is complete; the
/// verdict as its JSON.
fn assert_green(j: &Judged) -> serde_json::Value {
    let dir = dir(j);
    for f in file::JUDGED.iter().chain(&[file::NGINX_CONF]) {
        assert!(dir.join(f).is_file(), "{} lacks {f}", dir.display());
    }
    let v = serde_json::to_value(&j.verdict).unwrap();
    assert_eq!(
        v,
        json(dir, "verdict.json"),
        "the verdict written is the verdict"
    );
    assert_eq!(v["status"], "completed", "{}: {v:#}", dir.display());
    let exps = v["expectations"].as_array().unwrap();
    assert!(!exps.is_empty());
    for e in exps {
        assert_eq!(e["held"], true, "{}: {e}", dir.display());
    }
    let fp = json(dir, "fingerprint.json");
    assert_eq!(fp["engine"], "sim");
    assert_eq!(fp["nginx_v"], "");
    v
}

fn classes(v: &serde_json::Value) -> Vec<String> {
    let mut c: Vec<String> = v["incidents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["class"].as_str().unwrap().to_string())
        .collect();
    c.sort();
    c.dedup();
    c
}

#[test]
fn swap_only_and_generation_race() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = sim(tmp.path(), "swap-only", None);
    assert_eq!(runs.len(), 1, "swap-only [envoy-logical] is Envoy's only");
    let v = assert_green(&runs[0]);
    assert_eq!(v["nlu"]["total"], 0);
    assert!(v["swaps"].as_u64().unwrap() >= 8);

    let tmp = tempfile::tempdir().unwrap();
    let runs = sim(tmp.path(), "generation-race", None);
    let v = assert_green(&runs[0]);
    let nlu = v["nlu"]["total"].as_u64().unwrap();
    // §8: 41 in 36,000 on this machine; a Poisson-wide band, never an exact count.
    assert!((15..=90).contains(&nlu), "{nlu}");
    assert_eq!(classes(&v), ["generation-race-retry"]);
    // The reclaim faults hit, and run.json says so by backend name, like the real runner.
    let run = json(dir(&runs[0]), "run.json");
    assert!(run["hits"]["fault:b1:reclaim"].as_u64().unwrap() > 1000);
    assert!(run["hits"]["fault:b2:reclaim"].as_u64().unwrap() > 1000);
    let events = std::fs::read_to_string(dir(&runs[0]).join("events.jsonl")).unwrap();
    assert!(events.contains(r#""target":"b1""#), "{events}");
}

#[test]
fn nxdomain_outage_is_one_requery_period() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = sim(tmp.path(), "nxdomain", Some("base"));
    let v = assert_green(&runs[0]);
    assert_eq!(classes(&v), ["dns-nxdomain"]);
    let d = v["incidents"][0]["duration_ms"].as_i64().unwrap();
    assert!((5400..=6600).contains(&d), "{d}");
    // The aligned injection hit: its dns-mode-end event carries the hits.
    let events = std::fs::read_to_string(dir(&runs[0]).join("events.jsonl")).unwrap();
    let end = events
        .lines()
        .find(|l| l.contains("dns-mode-end"))
        .expect("a dns-mode-end event");
    let e: serde_json::Value = serde_json::from_str(end).unwrap();
    assert!(e["hits"].as_u64().unwrap() >= 1, "{end}");
}

/// The model's restart: down from the refused start to the one after the name resolves again,
/// every request of that span refused at connect and none logged by nginx.
#[test]
fn a_restart_while_a_name_does_not_resolve_is_down_until_it_resolves() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = sim(tmp.path(), "restart-nxdomain", None);
    let v = assert_green(&runs[0]);
    assert_eq!(v["client"]["errors"], 1200, "6 s at 200 rps");
    let events = std::fs::read_to_string(dir(&runs[0]).join("events.jsonl")).unwrap();
    let starts: Vec<&str> = events
        .lines()
        .filter(|l| l.contains(r#""kind":"nginx-start""#))
        .collect();
    assert_eq!(starts.len(), 2, "{events}");
    assert!(starts[0].contains(r#""spec":"refused""#) && starts[0].contains("host not found"));
    assert!(starts[1].contains(r#""spec":"ok""#), "{}", starts[1]);
}

#[test]
fn dual_resolve_wipeout_and_its_fix() {
    let tmp = tempfile::tempdir().unwrap();
    let v = assert_green(&sim(tmp.path(), "dual-resolve", Some("base"))[0]);
    assert!(classes(&v).contains(&"maxfails-wipeout".to_string()));

    let tmp = tempfile::tempdir().unwrap();
    let v = assert_green(&sim(tmp.path(), "dual-resolve", Some("max_fails=0"))[0]);
    assert_eq!(v["nlu"]["total"], 0);
    assert_eq!(classes(&v), ["upstream-failure"]);
}

#[test]
fn per_dc_names_survive_a_backend_failure() {
    let tmp = tempfile::tempdir().unwrap();
    let v = assert_green(&sim(tmp.path(), "per-dc", None)[0]);
    assert_eq!(v["client"]["errors"], 0);
}

#[test]
fn same_seed_same_bytes_and_another_seed_differs() {
    let logs = |seed: u64| {
        let tmp = tempfile::tempdir().unwrap();
        let runs = Play::new("generation-race", "sim")
            .seed(seed)
            .into(tmp.path());
        [
            "access.log",
            "error.log",
            "dns.jsonl",
            "events.jsonl",
            "load.jsonl",
        ]
        .map(|f| std::fs::read(dir(&runs[0]).join(f)).unwrap())
    };
    let a = logs(7);
    let b = logs(7);
    for (x, y) in a.iter().zip(&b) {
        assert!(x == y, "same seed, different bytes");
    }
    assert!(!a[0].is_empty());
    let c = logs(8);
    assert!(a[0] != c[0], "another seed gives another history");
}

#[test]
fn slow_dependency_pool_staircase_and_probes() {
    // The DB pool model: 9 × 200 ms round trips per request through 4 connections, a burst
    // that queues in batches, a readiness probe that times out behind it, the control fast.
    let tmp = tempfile::tempdir().unwrap();
    let runs = sim(tmp.path(), "slow-dependency", None);
    let v = assert_green(&runs[0]);
    assert_eq!(v["nlu"]["total"], 0);
    for f in ["backends.json", "probes.jsonl"] {
        assert!(dir(&runs[0]).join(f).is_file(), "{f}");
    }
    // The link's latency fault counts the pool connections it carried, like the lab proxy.
    let run = json(dir(&runs[0]), "run.json");
    assert_eq!(
        run["hits"]["fault:db-link:latency_downstream"], 4,
        "{run:#}"
    );
}

#[test]
fn zone_exhaustion_and_its_large_zone() {
    // Both variants: the shared 32k zone leaves `be` without a peer for one re-query period;
    // 1m holds everything.
    let tmp = tempfile::tempdir().unwrap();
    let runs = sim(tmp.path(), "zone-exhaustion", None);
    assert_eq!(runs.len(), 2);
    let v = assert_green(&runs[0]);
    assert_eq!(classes(&v), ["zone-memory-exhausted"]);
    let err = std::fs::read_to_string(dir(&runs[0]).join("error.log")).unwrap();
    assert!(err.contains("cannot add new server to upstream \"be\", memory exhausted"));
    let v = assert_green(&runs[1]);
    assert_eq!(v["nlu"]["total"], 0);
}

#[test]
fn port_exhaustion_only_without_time_wait_reuse() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = sim(tmp.path(), "port-exhaustion", Some("netns"));
    let v = assert_green(&runs[0]);
    assert_eq!(classes(&v), ["port-exhaustion"]);
    // Nothing in a namespace is touched: the model only reads the sysctl values.
    assert_eq!(json(dir(&runs[0]), "run.json")["status"], "completed");
}

/// The other proxies' models play library scenarios into the same run directory, and the
/// checker gives each its own class: Envoy's emptied cluster, HAProxy's held address. (The
/// expectations were written for nginx: whether they hold is not the point here.)
#[test]
fn the_proxy_models_play_library_scenarios() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = Play::new("nxdomain", "sim-envoy")
        .variant("base")
        .into(tmp.path());
    let v = serde_json::to_value(&runs[0].verdict).unwrap();
    assert_eq!(classes(&v), ["dns-cluster-emptied"], "{:#}", v["classes"]);
    let d = v["incidents"][0]["duration_ms"].as_i64().unwrap();
    assert!((4500..=5500).contains(&d), "one 5 s refresh: {d}");
    assert!(
        dir(&runs[0]).join("envoy.json").is_file(),
        "the real proxy's config, for reference"
    );
    assert_eq!(
        json(dir(&runs[0]), "fingerprint.json")["engine"],
        "sim-envoy"
    );

    let tmp = tempfile::tempdir().unwrap();
    let runs = Play::new("nxdomain", "sim-haproxy")
        .variant("nx40s")
        .into(tmp.path());
    let v = serde_json::to_value(&runs[0].verdict).unwrap();
    assert_eq!(classes(&v), ["dns-hold-expired"], "{:#}", v["classes"]);
    let d = v["incidents"][0]["duration_ms"].as_i64().unwrap();
    // The lab: 11.0 s (40 s − hold nx 30 s, plus the polls' phase).
    assert!((10_000..=12_000).contains(&d), "{d}");
}

/// What a model cannot play is refused before anything is written, naming the field.
#[test]
fn what_a_model_cannot_play_is_refused_before_a_file_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let engine = engine::by_name("sim-caddy").unwrap();
    let scenarios = judge::selected(false, Some("dual-resolve")).unwrap();
    let v = &judge::planned(&scenarios, Some("base")).unwrap()[0];
    let opts = RunOptions {
        out: tmp.path().join("runs"),
        progress: false,
        ..RunOptions::default()
    };
    let err = judge::run_and_judge(v, &opts, engine)
        .err()
        .expect("refused");
    assert!(format!("{err:#}").contains("not Rst"), "{err:#}");
    assert!(!tmp.path().join("runs").exists(), "nothing written");
}

/// The lines of `dir`'s JSON Lines file `name`, parsed, without its schema line.
fn rows(dir: &Path, name: &str) -> Vec<serde_json::Value> {
    std::fs::read_to_string(dir.join(name))
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A `[fleet]` on the model: one model per instance, started `stagger` apart, the load
/// round-robin over them, laid out as the lab lays out a fleet; the fleet judge reads the
/// instances' logs without a DNS log and every expectation of the scenario holds — the same
/// ones the real fleet is held to. The GSLB's health checks move the answer at the third failed
/// probe (`gslb` events, not injections). And the fidelity of a fleet compares what only a
/// fleet shows: a run replayed agrees with itself, an answer change does not pass for a dead
/// backend.
#[test]
fn a_fleet_and_its_gslb_on_the_model() {
    let tmp = tempfile::tempdir().unwrap();
    let nx = sim(tmp.path(), "fleet-nxdomain", Some("base"));
    let down = sim(tmp.path(), "fleet-nxdomain", Some("backend-down"));
    let gslb = sim(tmp.path(), "gslb-failover", None);
    assert_eq!(gslb.len(), 2, "the failover and its per-site variant");
    for j in nx.iter().chain(&down).chain(&gslb) {
        let v = serde_json::to_value(&j.verdict).unwrap();
        assert_eq!(v["status"], "completed", "{v:#}");
        for e in v["expectations"].as_array().unwrap() {
            assert_eq!(e["held"], true, "{}: {e}", dir(j).display());
        }
        assert!(
            !dir(j).join(file::ACCESS_LOG).exists(),
            "no top-level nginx"
        );
        for k in 1..=4 {
            let i = dir(j).join(file::INSTANCES).join(format!("nginx-{k}"));
            for f in [file::ACCESS_LOG, file::ERROR_LOG, file::NGINX_CONF] {
                assert!(i.join(f).is_file(), "{} lacks {f}", i.display());
            }
            // Round-robin: each instance got a quarter of the requests.
            let lines = std::fs::read_to_string(i.join(file::ACCESS_LOG))
                .unwrap()
                .lines()
                .count() as u64;
            assert_eq!(lines * 4, j.record.requests, "{}", i.display());
            // Its own listen address, as the balancer reaches it.
            let conf = std::fs::read_to_string(i.join(file::NGINX_CONF)).unwrap();
            assert!(conf.contains(&format!(":{};", 8080 + k)), "{conf}");
        }
        // The client's view is one file, every request once, in the order they were sent.
        let load = rows(dir(j), file::LOAD);
        assert_eq!(load.len() as u64, j.record.requests);
        assert!(load.iter().enumerate().all(|(k, r)| r["seq"] == k as u64));
    }
    // Each instance asks on its own view of the authority, and resolves at its start, 1.5 s
    // apart, the last one 300 ms before the load: what a replay reads back as its phases.
    let views: std::collections::BTreeSet<u64> = rows(dir(&nx[0]), file::DNS)
        .iter()
        .map(|q| q["view"].as_u64().expect("a view"))
        .collect();
    assert_eq!(views.into_iter().collect::<Vec<_>>(), [1, 2, 3, 4]);
    let starts = resolvelab_lab::replay::instance_starts(dir(&nx[0]));
    let want = [4_800_000, 3_300_000, 1_800_000, 300_000];
    assert_eq!(starts.len(), 4, "{starts:?}");
    for (s, w) in starts.iter().zip(want) {
        assert!((s - w).abs() < 1_000, "{starts:?}");
    }
    // The GSLB: b1 out 2.5 s after its fault (probes at x.5 s), back 2.5 s after it ends.
    let events = rows(dir(&gslb[0]), file::EVENTS);
    let at = |kind: &str| -> Vec<i64> {
        events
            .iter()
            .filter(|e| e["kind"] == kind)
            .map(|e| e["t_us"].as_i64().unwrap())
            .collect()
    };
    let (on, off, moves) = (at("fault-on"), at("fault-off"), at("gslb"));
    assert_eq!(moves.len(), 2, "{events:#?}");
    // The fault's hits are every instance's, in the event as in run.json: more than the
    // first instance alone met (its ~7 s of failures at 100 requests/s).
    let hits = events
        .iter()
        .find(|e| e["kind"] == "fault-off")
        .and_then(|e| e["hits"].as_u64())
        .unwrap();
    let run = json(dir(&gslb[0]), "run.json");
    assert_eq!(run["hits"]["fault:b1:restart"], hits, "{run}");
    assert!(hits > 1_000, "every instance's refused tries: {hits}");
    assert_eq!(moves[0] - on[0], 2_500_000);
    assert_eq!(moves[1] - off[0], 2_500_000);
    assert!(
        at("dns-mode").is_empty(),
        "a GSLB's answer is not an injection"
    );
    // Per site: nginx-3 and nginx-4 are answered b2 first all along, so only two instances
    // fail, and their requests never went to b1 at all.
    let site = dir(&gslb[1]);
    let v = serde_json::to_value(&gslb[1].verdict).unwrap();
    assert_eq!(v["fleet"]["report"]["incidents"][0]["hit"], 2, "{v:#}");
    for k in [3, 4] {
        let log = std::fs::read_to_string(
            site.join(file::INSTANCES)
                .join(format!("nginx-{k}"))
                .join(file::ACCESS_LOG),
        )
        .unwrap();
        assert!(
            log.lines().all(|l| l.contains(".30:8080")),
            "nginx-{k} asked b2's site"
        );
    }
    // Fidelity: a fleet against itself replayed agrees; against another reading it does not.
    let again = resolvelab_lab::replay::replay(dir(&nx[0]), &tmp.path().join("replay")).unwrap();
    let same = resolvelab_lab::fidelity::compare_dirs("same".into(), dir(&nx[0]), &again.model.dir)
        .unwrap();
    assert!(same.agree, "{}", same.markdown());
    let f = same.fleet.as_ref().expect("a fleet's rows");
    assert_eq!(f.lab[0].reading, "dns-answer-change");
    let other =
        resolvelab_lab::fidelity::compare_dirs("other".into(), dir(&nx[0]), dir(&down[0])).unwrap();
    assert!(!other.agree, "{}", other.markdown());
    assert!(!other.fleet.unwrap().agree);
}
