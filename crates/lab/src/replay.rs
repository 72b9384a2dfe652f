//! Replaying a real-nginx run on the model: the lab run's own resolved `scenario.toml` (as it
//! was when the lab ran: the library may have changed since), with its seed, its loopback /24,
//! its load start and its requests' actual send times ([`LabInputs`]). This is what makes a
//! model run comparable with a lab run ([`crate::fidelity`]) and what the first-pick window is
//! calibrated on.
//!
//! ```no_run
//! use resolvelab_lab::replay;
//! use std::path::Path;
//! for lab in replay::lab_runs(Path::new("runs/all")).unwrap() {
//!     let r = replay::replay(&lab, Path::new("/tmp/model-runs")).unwrap();
//!     println!("{}: {} requests, model expects {:.2} first-pick races",
//!         lab.display(), r.summary.requests, r.summary.first_pick_expected);
//! }
//! ```

use crate::options::{LabInputs, RunOptions, RunRecord};
use anyhow::{Context, Result, bail};
use resolvelab_core::evidence::file;
use resolvelab_core::spec::engine::EngineId;
use resolvelab_scenario::Scenario;
use resolvelab_sim::nginx::SimSummary;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A lab run and its replay on the model.
#[derive(Debug, Clone)]
pub struct Replayed {
    /// The lab run's `run.json`.
    pub lab: RunRecord,
    /// The model run's `run.json` (its directory is `model.dir`).
    pub model: RunRecord,
    /// The model's own counts (`sim.json`).
    pub summary: SimSummary,
}

/// The lab run directories under `parent` (those with `run.json` and `scenario.toml`), sorted by
/// name; `parent` itself when it is one.
pub fn lab_runs(parent: &Path) -> Result<Vec<PathBuf>> {
    let is_run = |d: &Path| d.join(file::RUN).is_file() && d.join(file::SCENARIO).is_file();
    if is_run(parent) {
        return Ok(vec![parent.to_path_buf()]);
    }
    let rd = std::fs::read_dir(parent).with_context(|| {
        format!(
            "cannot read {}: give the --out directory of a `resolvelab run` (or one run directory)",
            parent.display()
        )
    })?;
    let mut out: Vec<PathBuf> = rd
        .flatten()
        .map(|e| e.path())
        .filter(|d| is_run(d))
        .collect();
    out.sort();
    Ok(out)
}

/// The model run options that replay `lab` into `out`.
pub fn options(lab: &RunRecord, out: &Path) -> RunOptions {
    let load = lab.dir.join(file::LOAD);
    RunOptions {
        out: out.to_path_buf(),
        seed: Some(lab.seed),
        net: lab.net.octets(),
        progress: false,
        replay: Some(LabInputs {
            load_start_us: lab.load_start_us,
            arrivals: load.is_file().then_some(load),
            instance_starts_us: instance_starts(&lab.dir),
        }),
        ..RunOptions::default()
    }
}

/// A `[fleet]` run's instances' starts (µs before its load start, in instance order), as its DNS
/// log shows them: every instance resolves its names as it starts, on a resolver address of its
/// own (the authority's view K is instance K's, `Net::instance_dns`), so each view's first
/// query is one instance's start. Runs from before the views are told apart by the querying
/// socket, which an instance keeps (its first query's order is the start order). Empty when
/// `dir` is not a fleet's run, has no DNS log, or its queries do not tell its instances apart;
/// the model then starts the instances `stagger` apart as the plan says.
pub fn instance_starts(dir: &Path) -> Vec<i64> {
    let Ok(rec) = RunRecord::read(dir) else {
        return Vec::new();
    };
    let instances = std::fs::read_dir(dir.join(file::INSTANCES))
        .map(|d| d.flatten().filter(|e| e.path().is_dir()).count())
        .unwrap_or(0);
    let Ok((_, rows)) = resolvelab_core::jsonl::read_values(&dir.join(file::DNS)) else {
        return Vec::new();
    };
    // (by view, by socket): each key's first query.
    let (mut by_view, mut by_socket) = (BTreeMap::new(), BTreeMap::new());
    for v in rows.into_iter().filter_map(|(_, v)| v.ok()) {
        let Some(t) = v.get("t_us").and_then(|t| t.as_i64()) else {
            continue;
        };
        if let Some(view) = v.get("view").and_then(|w| w.as_u64()) {
            let e = by_view.entry(view).or_insert(t);
            *e = (*e).min(t);
        } else if let Some(c) = v.get("client").and_then(|c| c.as_str()) {
            let e = by_socket.entry(c.to_string()).or_insert(t);
            *e = (*e).min(t);
        }
    }
    let firsts: Vec<i64> = if by_view.len() == instances {
        by_view.into_values().collect()
    } else if by_view.is_empty() && by_socket.len() == instances {
        let mut f: Vec<i64> = by_socket.into_values().collect();
        f.sort_unstable();
        f
    } else {
        return Vec::new();
    };
    let starts: Vec<i64> = firsts.iter().map(|t| rec.load_start_us - t).collect();
    if instances < 2 || starts.iter().any(|&s| s <= 0) {
        return Vec::new();
    }
    starts
}

/// The lab run's resolved scenario, run once (`repeat` is the lab's loop over seeds, one
/// directory per repetition: each is replayed with its own seed).
pub fn lab_scenario(lab: &Path) -> Result<Scenario> {
    let p = lab.join(file::SCENARIO);
    let text =
        std::fs::read_to_string(&p).with_context(|| format!("cannot read {}", p.display()))?;
    let mut sc = Scenario::from_toml(&text, &p.display().to_string())?;
    sc.repeat = None;
    Ok(sc)
}

/// The model of the engine that played a lab run: nginx's for either nginx release, the
/// proxy's own for HAProxy, Envoy and Caddy.
pub fn model_of(engine: &str) -> Option<resolvelab_sim::proxies::Proxy> {
    match engine.parse() {
        Ok(EngineId::Proxy(k)) => Some(k),
        _ => None,
    }
}

/// Replay one lab run directory on the model of its engine, into a new run directory under
/// `out`.
pub fn replay(lab: &Path, out: &Path) -> Result<Replayed> {
    let rec = RunRecord::read(lab)?;
    if rec.load_start_us == 0 {
        bail!(
            "{}: the lab run never started its load (status {}): nothing to replay",
            lab.display(),
            rec.status
        );
    }
    let opts = options(&rec, out);
    let plan = lab_scenario(lab)?.plan(None, opts.scale, opts.seed)?;
    let (model, summary) = crate::simrun::run_model_of(&plan, &opts, model_of(&rec.engine))?;
    Ok(Replayed {
        lab: rec,
        model,
        summary,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_library_run_replays_with_the_lab_inputs() {
        // A model run stands in for the lab run here: replay only reads its directory.
        let tmp = tempfile::tempdir().unwrap();
        let plan = resolvelab_scenario::library::get("swap-only")
            .unwrap()
            .plan(None, 0.1, Some(3))
            .unwrap();
        let first = crate::simrun::run(
            &plan,
            &RunOptions {
                out: tmp.path().join("lab"),
                seed: Some(3),
                net: Some((9, 8)),
                progress: false,
                ..RunOptions::default()
            },
        )
        .unwrap();
        let runs = lab_runs(&tmp.path().join("lab")).unwrap();
        assert_eq!(runs, vec![first.dir.clone()]);
        let r = replay(&first.dir, &tmp.path().join("model")).unwrap();
        assert_eq!(
            (r.model.seed, r.model.net.subnet.as_str()),
            (3, "127.9.8.0/24")
        );
        assert_eq!(r.model.load_start_us, first.load_start_us);
        // The same seed, /24, start and send times: the same logs.
        let read = |d: &Path| std::fs::read(d.join(file::ACCESS_LOG)).unwrap();
        assert_eq!(read(&first.dir), read(&r.model.dir));
        assert_eq!(r.summary.requests, first.requests);
    }
}
