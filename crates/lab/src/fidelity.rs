//! Fidelity: the model against the real nginx, run by run (docs/FIDELITY.md). Each lab run is
//! replayed on the model ([`crate::replay`]), both run directories are diagnosed by the same
//! checker, and the fixed rules of `resolvelab_sim::nginx::fidelity` decide, class by class:
//! the same classes present, counts within each other's Poisson 95 % interval, burst durations
//! within 10 %. First-pick races, too rare for one run, are pooled over every row against the
//! model's expectation. The first-pick window is calibrated on the same replays
//! ([`calibrate_first_pick`]).
//!
//! ```
//! use resolvelab_lab::fidelity::{Fidelity, RunTotals};
//! let t = RunTotals { requests: 100, failed: 0, swaps: 1 };
//! let f = Fidelity { name: "swap-only — seed 1".into(), lab: t.clone(), model: t,
//!                    classes: vec![], fleet: None, agree: true };
//! assert!(f.markdown().contains("| (no failures) | 0 | 0 | agree |"));
//! ```

use crate::replay;
use anyhow::{Result, bail};
use resolvelab_core::evidence::run::VerdictStatus;
use resolvelab_diagnose::Diagnosis;
use resolvelab_diagnose::run::diagnose_run_dir;
use resolvelab_sim::nginx::fidelity::{counts_agree, durations_agree, expected_count_95};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One comparison, computed once and rendered as Markdown or JSON (so the two cannot say
/// different things).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Fidelity {
    /// Heading of the Markdown section.
    pub name: String,
    /// The real-nginx run.
    pub lab: RunTotals,
    /// The simulated run.
    pub model: RunTotals,
    /// Every failure class present in either run, by class id.
    pub classes: Vec<ClassFidelity>,
    /// A `[fleet]` run's fleet incidents side by side.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fleet: Option<FleetFidelity>,
    /// Every class agrees (and, for a fleet, every fleet incident).
    pub agree: bool,
}

/// A fleet run's fleet incidents, lab and model, in time order: what only a fleet shows (how
/// many instances, the reading, the spreads of their starts and ends) must be the same.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FleetFidelity {
    /// The lab's fleet incidents.
    pub lab: Vec<FleetShape>,
    /// The model's.
    pub model: Vec<FleetShape>,
    /// As many incidents, each with the same reading and as many instances hit, and spreads
    /// within 10 % where either is a burst's ([`BURST_MS`]; shorter is one instant).
    pub agree: bool,
}

/// What the fidelity compares of one fleet incident.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FleetShape {
    /// The reading (`dns-answer-change`, `failover`, …).
    pub reading: String,
    /// Instances hit.
    pub hit: u64,
    /// Latest first failure minus earliest, ms.
    pub start_spread_ms: i64,
    /// Latest last failure minus earliest, ms.
    pub end_spread_ms: i64,
}

impl FleetShape {
    fn of(i: &resolvelab_diagnose::fleet::FleetIncident) -> FleetShape {
        FleetShape {
            reading: i.reading.kind.id().to_string(),
            hit: i.hit,
            start_spread_ms: i.start_spread_ms,
            end_spread_ms: i.end_spread_ms,
        }
    }

    fn agrees(&self, o: &FleetShape) -> bool {
        let spread =
            |a: i64, b: i64| (a < BURST_MS && b < BURST_MS) || durations_agree(a as f64, b as f64);
        self.reading == o.reading
            && self.hit == o.hit
            && spread(self.start_spread_ms, o.start_spread_ms)
            && spread(self.end_spread_ms, o.end_spread_ms)
    }
}

impl FleetFidelity {
    fn of(lab: &[FleetShape], model: &[FleetShape]) -> FleetFidelity {
        FleetFidelity {
            agree: lab.len() == model.len() && lab.iter().zip(model).all(|(l, m)| l.agrees(m)),
            lab: lab.to_vec(),
            model: model.to_vec(),
        }
    }
}

/// Totals of one diagnosed run directory.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunTotals {
    /// Requests read.
    pub requests: u64,
    /// Failed requests.
    pub failed: u64,
    /// Peer-list swaps seen.
    pub swaps: u64,
}

/// One class row of the comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClassFidelity {
    /// Class id.
    pub class: String,
    /// Failed requests of the class in the lab run.
    pub lab_count: u64,
    /// The same in the model run.
    pub model_count: u64,
    /// Within each other's Poisson 95 % interval, and present in both or in neither.
    pub counts_agree: bool,
    /// The lab's longest incident of the class.
    pub lab_longest_ms: i64,
    /// The model's longest incident of the class.
    pub model_longest_ms: i64,
    /// Durations are compared for bursts (one long incident), not for isolated events.
    pub duration_compared: bool,
    /// Within 10 %; true when not compared.
    pub durations_agree: bool,
}

/// Below this neither run has a burst: the longest "incident" is an isolated event.
pub const BURST_MS: i64 = 2000;

/// Compare the checker's diagnoses of a lab run and a model run, class by class.
pub fn compare(name: String, lab: &Diagnosis, sim: &Diagnosis) -> Fidelity {
    let per_class = |d: &Diagnosis| {
        let mut m: BTreeMap<String, (u64, i64)> = BTreeMap::new();
        for i in &d.incidents {
            let e = m.entry(i.class.to_string()).or_default();
            e.0 += i.count;
            e.1 = e.1.max(i.duration_ms);
        }
        m
    };
    let (l, m) = (per_class(lab), per_class(sim));
    let names: BTreeSet<&String> = l.keys().chain(m.keys()).collect();
    let classes: Vec<ClassFidelity> = names
        .into_iter()
        .map(|c| {
            let (lc, ld) = l.get(c).copied().unwrap_or((0, 0));
            let (mc, md) = m.get(c).copied().unwrap_or((0, 0));
            let duration_compared = !(ld < BURST_MS && md < BURST_MS);
            ClassFidelity {
                class: c.clone(),
                lab_count: lc,
                model_count: mc,
                counts_agree: counts_agree(lc, mc) && (lc > 0) == (mc > 0),
                lab_longest_ms: ld,
                model_longest_ms: md,
                duration_compared,
                durations_agree: !duration_compared || durations_agree(ld as f64, md as f64),
            }
        })
        .collect();
    let totals = |d: &Diagnosis| RunTotals {
        requests: d.requests,
        failed: d.failures,
        swaps: d.swaps,
    };
    Fidelity {
        name,
        lab: totals(lab),
        model: totals(sim),
        agree: classes.iter().all(|c| c.counts_agree && c.durations_agree),
        classes,
        fleet: None,
    }
}

/// A `[fleet]` run as its verdict judges it — each instance diagnosed without the DNS log, as
/// production would — read as one diagnosis (the instances' totals with all their incidents)
/// and the fleet's incidents.
fn fleet_view(dir: &Path) -> Result<(Diagnosis, Vec<FleetShape>)> {
    let v = resolvelab_diagnose::analyze_run(dir)?;
    let Some(f) = v.fleet else {
        bail!("{}: a fleet run without its fleet's verdict", dir.display());
    };
    let mut d = v.diagnosis;
    d.incidents = f
        .instances
        .values()
        .flat_map(|i| i.incidents.iter().cloned())
        .collect();
    d.swaps = f.instances.values().map(|i| i.swaps).sum();
    Ok((d, f.report.incidents.iter().map(FleetShape::of).collect()))
}

/// Diagnose two run directories ([`diagnose_run_dir`]) and [`compare`] them; when the clients
/// saw failures the access logs do not hold (a proxy that closes a client's connection and
/// logs nothing), those are compared too, as the row `(unlogged client errors)`.
pub fn compare_dirs(name: String, lab: &Path, sim: &Path) -> Result<Fidelity> {
    let fleet = lab
        .join(resolvelab_core::evidence::file::INSTANCES)
        .is_dir();
    let (l, m, mut f) = if fleet {
        let ((l, ls), (m, ms)) = (fleet_view(lab)?, fleet_view(sim)?);
        let mut f = compare(name, &l, &m);
        let ff = FleetFidelity::of(&ls, &ms);
        f.agree &= ff.agree;
        f.fleet = Some(ff);
        (l, m, f)
    } else {
        let (l, m) = (diagnose_run_dir(lab)?, diagnose_run_dir(sim)?);
        let f = compare(name, &l, &m);
        (l, m, f)
    };
    let unlogged = |dir: &Path, d: &Diagnosis| -> Result<u64> {
        let client = resolvelab_diagnose::run::client_errors(dir)?.unwrap_or(0);
        let logged: u64 = d
            .http_status
            .iter()
            .filter(|(s, _)| s.parse::<u16>().is_ok_and(|s| s >= 500))
            .map(|(_, n)| n)
            .sum();
        Ok(client.saturating_sub(logged))
    };
    let (lu, mu) = (unlogged(lab, &l)?, unlogged(sim, &m)?);
    if lu > 0 || mu > 0 {
        let agree = counts_agree(lu, mu) && (lu > 0) == (mu > 0);
        f.classes.push(ClassFidelity {
            class: UNLOGGED.into(),
            lab_count: lu,
            model_count: mu,
            counts_agree: agree,
            lab_longest_ms: 0,
            model_longest_ms: 0,
            duration_compared: false,
            durations_agree: true,
        });
        f.agree &= agree;
    }
    Ok(f)
}

/// The row of client errors no access log holds.
pub const UNLOGGED: &str = "(unlogged client errors)";

impl Fidelity {
    /// The Markdown section of docs/FIDELITY.md.
    pub fn markdown(&self) -> String {
        let mut out = format!(
            "### {}\n\nlab: {} requests, {} failed, {} swaps · model: {} requests, {} failed, {} swaps\n\n\
| class | lab requests | model requests | counts (Poisson 95 %) | lab longest (ms) | model longest (ms) | duration (±10 %) |\n|---|---:|---:|---|---:|---:|---|\n",
            self.name,
            self.lab.requests,
            self.lab.failed,
            self.lab.swaps,
            self.model.requests,
            self.model.failed,
            self.model.swaps
        );
        for c in &self.classes {
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} |\n",
                c.class,
                c.lab_count,
                c.model_count,
                mark(c.counts_agree),
                c.lab_longest_ms,
                c.model_longest_ms,
                if c.duration_compared {
                    mark(c.durations_agree)
                } else {
                    "n/a (isolated)"
                }
            ));
        }
        if self.classes.is_empty() {
            out.push_str("| (no failures) | 0 | 0 | agree | – | – | – |\n");
        }
        if let Some(f) = &self.fleet {
            out.push_str(&f.markdown());
        }
        out.push_str(&format!(
            "\nVerdict: {}\n",
            if self.agree {
                "the model agrees with nginx."
            } else {
                "the model DISAGREES with nginx: explain or fix the model (never loosen the bound)."
            }
        ));
        out
    }

    fn class_count(&self, class: &str) -> (u64, u64) {
        self.classes
            .iter()
            .find(|c| c.class == class)
            .map_or((0, 0), |c| (c.lab_count, c.model_count))
    }
}

impl FleetFidelity {
    /// The fleet incidents' table under a fleet row's class table.
    fn markdown(&self) -> String {
        let mut out =
            String::from("\n| fleet incident | lab | model | agree |\n|---|---|---|---|\n");
        let cell = |s: Option<&FleetShape>| match s {
            Some(s) => format!(
                "{}, {} hit, starts {} ms apart, ends {} ms apart",
                s.reading, s.hit, s.start_spread_ms, s.end_spread_ms
            ),
            None => "–".to_string(),
        };
        for k in 0..self.lab.len().max(self.model.len()) {
            let (l, m) = (self.lab.get(k), self.model.get(k));
            let ok = matches!((l, m), (Some(l), Some(m)) if l.agrees(m));
            out.push_str(&format!(
                "| {} | {} | {} | {} |\n",
                k + 1,
                cell(l),
                cell(m),
                mark(ok)
            ));
        }
        out
    }
}

fn mark(ok: bool) -> &'static str {
    if ok { "agree" } else { "**DISAGREE**" }
}

/// What one lab run's replay came to.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "outcome", content = "why", rename_all = "kebab-case")]
pub enum Outcome {
    /// Every class agrees.
    Agree,
    /// Some class disagrees (see the row's comparison).
    Disagree,
    /// The model could not run the lab's scenario.
    SimFailed(String),
    /// The comparison could not be made (a run directory could not be diagnosed).
    CompareFailed(String),
}

/// One row of the replay: a lab run, its model run and their comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    /// `scenario [variant] — seed N`.
    pub title: String,
    /// The lab run directory's name.
    pub lab_run: String,
    /// The model run directory, when the model ran.
    pub model_run: Option<PathBuf>,
    /// The lab run's verdict status by the current checker (lab evidence may have been judged
    /// by an older one).
    pub lab_status: Judgement,
    /// The model run's verdict status.
    pub model_status: Judgement,
    /// How the comparison came out.
    #[serde(flatten)]
    pub outcome: Outcome,
    /// The comparison, when it was made.
    pub fidelity: Option<Fidelity>,
    /// `generation-race-first-pick` requests: the lab's, the model's drawn, and the model's
    /// expected number (the sum of each peer-list change's race probability).
    pub first_pick: (u64, u64, f64),
}

/// Every row of a replay, and the pooled first-pick check.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// The lab runs' directory, as given.
    pub lab_runs: String,
    /// The rows, by lab run directory name.
    pub rows: Vec<Row>,
}

/// What the current checker says of one side of a row, serialized as the page shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Judgement {
    /// Its verdict status (`completed`, `aborted`, …).
    Judged(VerdictStatus),
    /// The directory could not be judged (`no verdict`).
    NoVerdict,
    /// No run to judge: the model did not run (`–`).
    NotRun,
}

impl std::fmt::Display for Judgement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Judgement::Judged(s) => f.write_str(s.as_str()),
            Judgement::NoVerdict => f.write_str("no verdict"),
            Judgement::NotRun => f.write_str("–"),
        }
    }
}

impl Serialize for Judgement {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// The verdict status the current checker gives a run directory.
fn status_of(dir: &Path) -> Judgement {
    resolvelab_diagnose::analyze_run(dir)
        .map(|v| Judgement::Judged(v.status))
        .unwrap_or(Judgement::NoVerdict)
}

/// The one line of an error, for a table cell.
fn cell(e: &anyhow::Error) -> String {
    format!("{e:#}")
        .lines()
        .last()
        .unwrap_or("")
        .replace('|', "/")
}

/// Replay one lab run on the model into `sim_out` and compare the two.
pub fn replay_row(lab: &Path, sim_out: &Path) -> Result<Row> {
    let rec = crate::options::RunRecord::read(lab)?;
    let lab_run = lab
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut title = match &rec.variant {
        Some(v) => format!("{} [{v}]", rec.scenario),
        None => rec.scenario.clone(),
    };
    title.push_str(&format!(" — seed {}", rec.seed));
    // nginx 1.28 (the lab's first engine, `nginx` or unnamed in older records, or its model)
    // goes unnamed; every other engine, nginx 1.31 included, is named, so that two rows never
    // look alike.
    if !matches!(rec.engine.as_str(), "" | "nginx" | "sim") {
        title.push_str(&format!(" — {}", rec.engine));
    }
    let mut row = Row {
        title: title.clone(),
        lab_status: status_of(lab),
        model_status: Judgement::NotRun,
        model_run: None,
        outcome: Outcome::Agree,
        fidelity: None,
        first_pick: (0, 0, 0.0),
        lab_run: lab_run.clone(),
    };
    let replayed = match replay::replay(lab, &sim_out.join(&lab_run)) {
        Ok(r) => r,
        Err(e) => {
            row.outcome = Outcome::SimFailed(cell(&e));
            return Ok(row);
        }
    };
    let model = replayed.model.dir.clone();
    row.model_status = status_of(&model);
    row.model_run = Some(model.clone());
    match compare_dirs(title, lab, &model) {
        Ok(f) => {
            let (l, m) = f.class_count("generation-race-first-pick");
            row.first_pick = (l, m, replayed.summary.first_pick_expected);
            row.outcome = if f.agree {
                Outcome::Agree
            } else {
                Outcome::Disagree
            };
            row.fidelity = Some(f);
        }
        Err(e) => row.outcome = Outcome::CompareFailed(cell(&e)),
    }
    Ok(row)
}

/// Replay every lab run under `lab_runs` ([`replay::lab_runs`]) into `sim_out`, calling
/// `progress` after each row.
pub fn replay_all(
    lab_runs: &Path,
    sim_out: &Path,
    progress: &mut dyn FnMut(usize, usize, &Row),
) -> Result<Report> {
    let dirs = replay::lab_runs(lab_runs)?;
    if dirs.is_empty() {
        bail!(
            "{}: no run directory (with run.json and scenario.toml) in it; run `resolvelab run --all --out {}` first",
            lab_runs.display(),
            lab_runs.display()
        );
    }
    let mut rows = Vec::with_capacity(dirs.len());
    for (i, d) in dirs.iter().enumerate() {
        let row = replay_row(d, sim_out)?;
        progress(i + 1, dirs.len(), &row);
        rows.push(row);
    }
    Ok(Report {
        lab_runs: lab_runs.display().to_string(),
        rows,
    })
}

/// Counts of a report: (agree, disagree, could not be compared).
impl Report {
    /// (agree, disagree, failed).
    pub fn counts(&self) -> (usize, usize, usize) {
        let n = |f: fn(&Outcome) -> bool| self.rows.iter().filter(|r| f(&r.outcome)).count();
        (
            n(|o| *o == Outcome::Agree),
            n(|o| *o == Outcome::Disagree),
            n(|o| matches!(o, Outcome::SimFailed(_) | Outcome::CompareFailed(_))),
        )
    }

    /// The pooled first-pick check: (lab races, model races, model expectation, the
    /// expectation's Poisson 95 % range, agree).
    pub fn first_pick(&self) -> (u64, u64, f64, (u64, u64), bool) {
        let (mut l, mut m, mut e) = (0, 0, 0.0);
        for r in &self.rows {
            l += r.first_pick.0;
            m += r.first_pick.1;
            e += r.first_pick.2;
        }
        let (lo, hi) = expected_count_95(e);
        (l, m, e, (lo, hi), (lo..=hi).contains(&l))
    }

    /// The generated part of docs/FIDELITY.md, markers included. `generated_at` is the UTC
    /// time it says it was generated; `version` the binary's.
    pub fn markdown(&self, generated_at: &str, version: &str) -> String {
        let (agree, disagree, failed) = self.counts();
        let mut out = format!(
            "{BEGIN} — do not edit between these markers -->\n\n\
Generated on {generated_at} by `resolvelab sim fidelity --replay {}`\n\
({version}). Lab: real-proxy run directories; model: the lab run's own scenario.toml on\n\
`--engine sim` (nginx) or `sim-haproxy`/`sim-envoy`/`sim-caddy` (a row named after its proxy)\n\
with the lab run's seed, /24, load start and send times.\n\n\
**{agree} agree, {disagree} disagree, {failed} could not be compared.**\n\n\
| scenario | lab run | lab verdict | model verdict | model vs the real proxy |\n|---|---|---|---|---|\n",
            self.lab_runs
        );
        for r in &self.rows {
            let result = match &r.outcome {
                Outcome::Agree => "agree".to_string(),
                Outcome::Disagree => "**DISAGREE** (see below)".to_string(),
                Outcome::SimFailed(why) => format!("**sim run failed**: {why}"),
                Outcome::CompareFailed(why) => format!("**comparison failed**: {why}"),
            };
            out.push_str(&format!(
                "| {} | `{}` | {} | {} | {result} |\n",
                r.title, r.lab_run, r.lab_status, r.model_status
            ));
        }
        let (l, m, e, (lo, hi), ok) = self.first_pick();
        out.push_str(&format!(
            "\n**First-pick races pooled over every row** (too rare for one run: the model calibrates its\n\
window on the pool, [sim.md](sim.md)): lab {l}, model {m} drawn, model expectation\n\
{e:.2} (Poisson 95 % interval {lo}–{hi}: {}).\n\n",
            mark(ok)
        ));
        for r in &self.rows {
            if let Some(f) = &r.fidelity {
                out.push_str(&f.markdown());
                out.push('\n');
            }
        }
        out.push_str(END);
        out.push('\n');
        out
    }
}

const BEGIN: &str = "<!-- BEGIN GENERATED by resolvelab sim fidelity --replay";
const END: &str = resolvelab_report::GENERATED_END;

/// Write `generated` ([`Report::markdown`]) into `path` between its markers, keeping the
/// hand-written text around them; a file without markers gets a new page around it.
pub fn update_page(path: &Path, generated: &str) -> Result<()> {
    resolvelab_report::update_generated(path, generated, |generated| {
        format!(
            "# Fidelity: the simulated nginx against the real one, run by run\n\n\
Regenerate with `resolvelab sim fidelity --replay RUNS --update {}`. The rules are fixed in\n\
`resolvelab_sim::nginx::fidelity`: counts within each other's Poisson 95 % interval,\n\
burst durations within 10 %, the same classes present. The summary and every DISAGREE\n\
explained belong on a hand-written page beside this one (docs/FIDELITY.md).\n\n{generated}",
            path.display()
        )
    })
}

/// The first-pick window fitted to lab runs: races / exposure, with the count's Poisson 95 %
/// interval over the same exposure.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Calibration {
    /// Lab runs replayed.
    pub runs: usize,
    /// Lab runs the model cannot run (left out).
    pub skipped: usize,
    /// Σ over the runs of the model's races per µs of window.
    pub exposure_per_us: f64,
    /// `generation-race-first-pick` requests over the lab runs (by the current checker).
    pub races: u64,
    /// The maximum-likelihood window (µs).
    pub window_us: f64,
    /// Its 95 % interval (µs).
    pub interval_us: (f64, f64),
    /// The runs with a race: (lab run, races, exposure per µs).
    pub with_races: Vec<(String, u64, f64)>,
}

/// Fit `first_pick_window_us` to the lab runs under every directory of `parents`: each lab run
/// is replayed exactly as [`replay_all`] does, and its `sim.json` exposure (the races the model
/// expects per µs of window) is weighed against the races the checker finds in the lab run.
/// The window means the same thing the model does with it. A run directory name seen twice
/// (copied evidence sets) counts once.
pub fn calibrate_first_pick(parents: &[PathBuf], sim_out: &Path) -> Result<Calibration> {
    let mut seen = BTreeSet::new();
    let mut c = Calibration {
        runs: 0,
        skipped: 0,
        exposure_per_us: 0.0,
        races: 0,
        window_us: 0.0,
        interval_us: (0.0, 0.0),
        with_races: Vec::new(),
    };
    for parent in parents {
        for lab in replay::lab_runs(parent)? {
            let name = lab
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            if !seen.insert(name.clone()) {
                continue;
            }
            let Ok(r) = replay::replay(&lab, &sim_out.join(&name)) else {
                c.skipped += 1;
                continue;
            };
            let races: u64 = diagnose_run_dir(&lab)?
                .incidents
                .iter()
                .filter(|i| i.class == "generation-race-first-pick")
                .map(|i| i.count)
                .sum();
            let e = r.summary.first_pick_exposure_per_us;
            c.exposure_per_us += e;
            c.races += races;
            c.runs += 1;
            if races > 0 {
                c.with_races.push((name, races, e));
            }
        }
    }
    if c.exposure_per_us == 0.0 {
        bail!(
            "no lab run with a peer-list change and another worker was found: nothing to calibrate on"
        );
    }
    let (lo, hi) = resolvelab_sim::nginx::predict::poisson_95(c.races);
    c.window_us = c.races as f64 / c.exposure_per_us;
    c.interval_us = (lo / c.exposure_per_us, hi / c.exposure_per_us);
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(class: &str, lc: u64, mc: u64, ld: i64, md: i64, counts: bool) -> ClassFidelity {
        let duration_compared = ld >= BURST_MS || md >= BURST_MS;
        ClassFidelity {
            class: class.into(),
            lab_count: lc,
            model_count: mc,
            counts_agree: counts,
            lab_longest_ms: ld,
            model_longest_ms: md,
            duration_compared,
            durations_agree: !duration_compared || durations_agree(ld as f64, md as f64),
        }
    }

    /// The Markdown is what docs/FIDELITY.md holds: its bytes are pinned here, so a change
    /// to the JSON side cannot silently reshape the published table.
    #[test]
    fn markdown_section_is_pinned() {
        let f = Fidelity {
            name: "dns-nxdomain — seed 1".into(),
            lab: RunTotals {
                requests: 9000,
                failed: 640,
                swaps: 2,
            },
            model: RunTotals {
                requests: 9000,
                failed: 600,
                swaps: 2,
            },
            classes: vec![
                row("dns-nxdomain", 640, 600, 2100, 2500, true),
                row("upstream-failure", 3, 0, 10, 0, false),
            ],
            fleet: None,
            agree: false,
        };
        assert_eq!(
            f.markdown(),
            "### dns-nxdomain — seed 1\n\n\
lab: 9000 requests, 640 failed, 2 swaps · model: 9000 requests, 600 failed, 2 swaps\n\n\
| class | lab requests | model requests | counts (Poisson 95 %) | lab longest (ms) | model longest (ms) | duration (±10 %) |\n\
|---|---:|---:|---|---:|---:|---|\n\
| dns-nxdomain | 640 | 600 | agree | 2100 | 2500 | **DISAGREE** |\n\
| upstream-failure | 3 | 0 | **DISAGREE** | 10 | 0 | n/a (isolated) |\n\
\nVerdict: the model DISAGREES with nginx: explain or fix the model (never loosen the bound).\n"
        );
        let json = serde_json::to_value(&f).unwrap();
        assert_eq!(json["classes"][0]["durations_agree"], false);
        assert_eq!(json["classes"][1]["duration_compared"], false);
        assert_eq!(json["lab"]["failed"], 640);
    }

    #[test]
    fn no_failures_is_one_agreeing_row() {
        let totals = RunTotals {
            requests: 10,
            failed: 0,
            swaps: 0,
        };
        let f = Fidelity {
            name: "x".into(),
            lab: totals.clone(),
            model: totals,
            classes: vec![],
            fleet: None,
            agree: true,
        };
        let md = f.markdown();
        assert!(
            md.contains("\n| (no failures) | 0 | 0 | agree | – | – | – |\n"),
            "{md}"
        );
        assert!(
            md.ends_with("\nVerdict: the model agrees with nginx.\n"),
            "{md}"
        );
    }

    #[test]
    fn the_page_keeps_its_hand_written_text() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("F.md");
        std::fs::write(
            &p,
            "# T\n\nintro\n\n<!-- BEGIN GENERATED by scripts/fidelity.sh -->\nold\n<!-- END GENERATED -->\n\n## Explained\n\nkept\n",
        )
        .unwrap();
        update_page(
            &p,
            "<!-- BEGIN GENERATED x -->\nnew\n<!-- END GENERATED -->\n",
        )
        .unwrap();
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            "# T\n\nintro\n\n<!-- BEGIN GENERATED x -->\nnew\n<!-- END GENERATED -->\n\n## Explained\n\nkept\n"
        );
        let fresh = tmp.path().join("new.md");
        update_page(
            &fresh,
            "<!-- BEGIN GENERATED x -->\nn\n<!-- END GENERATED -->\n",
        )
        .unwrap();
        let t = std::fs::read_to_string(&fresh).unwrap();
        assert!(
            t.starts_with("# Fidelity") && t.contains("\nn\n") && t.contains("docs/FIDELITY.md"),
            "a new page is the run-by-run page, pointing at the hand-written one: {t}"
        );
    }

    #[test]
    fn a_replayed_run_agrees_with_itself() {
        // Replaying a model run on the model gives the same logs, so every class agrees.
        let tmp = tempfile::tempdir().unwrap();
        let plan = resolvelab_scenario::library::get("generation-race")
            .unwrap()
            .plan(None, 0.2, Some(2))
            .unwrap();
        crate::simrun::run(
            &plan,
            &crate::options::RunOptions {
                out: tmp.path().join("lab"),
                seed: Some(2),
                progress: false,
                ..Default::default()
            },
        )
        .unwrap();
        let mut seen = Vec::new();
        let report = replay_all(
            &tmp.path().join("lab"),
            &tmp.path().join("model"),
            &mut |i, n, r| seen.push((i, n, r.title.clone())),
        )
        .unwrap();
        assert_eq!(seen, vec![(1, 1, "generation-race — seed 2".to_string())]);
        assert_eq!(report.counts(), (1, 0, 0), "{report:?}");
        let f = report.rows[0].fidelity.as_ref().unwrap();
        assert!(f.lab.swaps > 0 && f.lab == f.model, "{f:?}");
        let md = report.markdown("2026-12-01T00:00:00Z", "resolvelab 0.1.0");
        assert!(
            md.contains("**1 agree, 0 disagree, 0 could not be compared.**"),
            "{md}"
        );
        assert!(md.trim_end().ends_with(END));
        // A directory with no run in it is one clear error.
        let e = replay_all(tmp.path(), &tmp.path().join("m2"), &mut |_, _, _| {}).unwrap_err();
        assert!(
            format!("{e:#}").contains("resolvelab run --all --out"),
            "{e:#}"
        );
    }
}
