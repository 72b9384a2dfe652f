//! The verdict of a `[fleet]` lab run: each instance's logs diagnosed as production would
//! diagnose them — its own access and error log, its own configuration, **no DNS log** — into a
//! partial, the partials merged into the fleet report, and the scenario's checks evaluated on
//! the fleet (`fleet.FIELD`), on every instance (`present`, `incident("C")`) and on the
//! instances' totals (the other metrics).

use super::{Fleet, Partial};
use crate::checker::{Options, diagnose};
use crate::expect::FleetRun;
use crate::run::{
    empty_diagnosis, evaluate, fingerprint_offset, fingerprint_version, injections, judged_aborted,
    read_client, run_config_facts, run_log_format, run_status, with_rotations,
};
use crate::verdict::{Diagnosis, Verdict};
use resolvelab_core::evidence::Expectations;
use resolvelab_core::evidence::file;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// What a fleet run's verdict adds to a run's.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FleetVerdict {
    /// The fleet report of the instances' partials.
    pub report: Fleet,
    /// Each instance's diagnosis (no DNS log), by name.
    pub instances: BTreeMap<String, Diagnosis>,
}

/// The verdict of the fleet run in `dir`.
pub(crate) fn analyze(
    dir: &Path,
    expect: &Expectations,
    scenario: Option<String>,
    checks: &[String],
) -> anyhow::Result<Verdict> {
    let mut instances = BTreeMap::new();
    let mut dirs: Vec<_> = std::fs::read_dir(dir.join(file::INSTANCES))?
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| e.path())
        .collect();
    dirs.sort();
    for d in &dirs {
        let name = d
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        instances.insert(name, instance(dir, d)?);
    }
    let mut partial: Option<Partial> = None;
    for (name, d) in &instances {
        let p = Partial::one(name, d.clone())?;
        partial = Some(match partial {
            None => p,
            Some(a) => a.merge(p)?,
        });
    }
    let report = match &partial {
        Some(p) => Fleet::of_partial(p),
        None => Fleet::of(BTreeMap::new()),
    };
    let events_files = with_rotations(dir, file::EVENTS);
    let mut events = Vec::new();
    for (i, p) in events_files.iter().enumerate() {
        events.extend(resolvelab_history::ours::read_events(p, i as u32)?.0);
    }
    let (injections, aborted) = injections(&events, events_files.first(), expect);
    let aborted = aborted || judged_aborted(dir);
    let totals = totals(&instances);
    let client = read_client(dir)?;
    let run = FleetRun {
        fleet: &report,
        instances: &instances,
    };
    let expectations = evaluate(checks, &totals, client.as_ref(), Some(&run));
    let no_access = instances.values().all(|d| d.inputs.access.is_empty());
    let (status, summary) = run_status(dir, aborted, no_access, &injections, &expectations);
    Ok(Verdict {
        verdict_schema: crate::verdict::VERDICT_SCHEMA.to_string(),
        scenario,
        status,
        summary,
        injections,
        expectations,
        client,
        fleet: Some(FleetVerdict { report, instances }),
        diagnosis: totals,
    })
}

/// One instance's diagnosis as production would make it: no DNS log, no events.
fn instance(run: &Path, dir: &Path) -> anyhow::Result<Diagnosis> {
    let opts = Options {
        access: with_rotations(dir, file::ACCESS_LOG),
        error: with_rotations(dir, file::ERROR_LOG),
        mixed: Vec::new(),
        dns: Vec::new(),
        events: Vec::new(),
        log_format: run_log_format(dir)?,
        upstream: None,
        tz_offset_s: fingerprint_offset(run),
        nginx_version: fingerprint_version(run),
        config: run_config_facts(dir),
        range: None,
    };
    let mut d = if opts.access.is_empty() {
        empty_diagnosis(&opts)
    } else {
        diagnose(&opts)?
    };
    d.status = None;
    Ok(d)
}

/// The instances' totals: requests, statuses, failures, NLU and classes summed; their inputs
/// and parse accounting listed. Incidents stay with their instances (and the fleet report).
fn totals(instances: &BTreeMap<String, Diagnosis>) -> Diagnosis {
    let mut t = empty_diagnosis(&Options::new(Vec::new(), Vec::new()));
    for d in instances.values() {
        t.inputs.log_format.clone_from(&d.inputs.log_format);
        t.inputs.access.extend(d.inputs.access.iter().cloned());
        t.inputs.error.extend(d.inputs.error.iter().cloned());
        t.start_ms = [t.start_ms, d.start_ms].into_iter().flatten().min();
        t.end_ms = [t.end_ms, d.end_ms].into_iter().flatten().max();
        t.requests += d.requests;
        t.failures += d.failures;
        for (k, v) in &d.http_status {
            *t.http_status.entry(k.clone()).or_default() += v;
        }
        let (a, b) = (&mut t.nlu, &d.nlu);
        a.total += b.total;
        a.one_hop += b.one_hop;
        a.two_hop += b.two_hop;
        a.multi_hop += b.multi_hop;
        a.unknown_hops += b.unknown_hops;
        a.paired += b.paired;
        for c in &d.classes {
            match t.classes.iter_mut().find(|x| x.class == c.class) {
                Some(x) => {
                    x.incidents += c.incidents;
                    x.requests += c.requests;
                }
                None => t.classes.push(c.clone()),
            }
        }
        t.parse.files.extend(d.parse.files.iter().cloned());
        t.parse.malformed += d.parse.malformed;
    }
    t.classes
        .sort_by(|a, b| b.requests.cmp(&a.requests).then(a.class.cmp(&b.class)));
    t
}
