//! Engines side by side: one scenario played once per engine — the same DNS timeline, backends,
//! faults, load and seed — each run judged by the one checker, then one verdict that puts the
//! engines next to each other (client errors, classes, the longest outage, the re-query period,
//! the time to follow a swap, p99 latency), as Markdown, JSON or HTML. `compare --all` fills
//! docs/COMPARISON.md.
//!
//! ```no_run
//! use resolvelab_lab::{compare, engine, options::RunOptions};
//! use resolvelab_scenario::library;
//! let sc = library::get("nxdomain").unwrap();
//! let engines = [engine::by_name("nginx").unwrap(), engine::by_name("nginx-1.31").unwrap()];
//! let c = compare::compare(&sc, &RunOptions::default(), &engines, &mut |_, _| {});
//! println!("{}", compare::markdown(&[c]));
//! ```

use crate::engine::Engine;
use crate::judge::{self, Judged};
use crate::options::RunOptions;
use resolvelab_core::doc::{Block, Cell as DocCell, Doc, Table, code, m, n, p};
use resolvelab_core::evidence::file;
use resolvelab_core::evidence::run::VerdictStatus;
use resolvelab_core::spec::engine::EngineId;
use resolvelab_scenario::Scenario;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One engine's run of the scenario.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Cell {
    /// The engine id.
    pub engine: EngineId,
    /// What the binary says it is (`nginx/1.31.3`), `model` for the simulation.
    pub version: String,
    /// The run directory (empty when the run could not start).
    pub run: PathBuf,
    /// The verdict's status (`completed`, `failed`, …), `error` when the engine could not run,
    /// `n/a` when it does not apply.
    pub status: CellStatus,
    /// The scenario's expectations that held, and how many there are.
    pub held: usize,
    /// The scenario's expectations.
    pub checks: usize,
    /// Requests the client sent.
    pub requests: u64,
    /// Requests that failed at the client (status ≥ 500 or a transport error).
    pub client_errors: u64,
    /// Requests the client never sent (every connection still waiting when one was due): the
    /// client errors are then a floor, the client's limit and not the proxy's figure. Absent in
    /// cells written before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unsent: Option<u64>,
    /// `no live upstreams` failures in the proxy's log.
    pub nlu: u64,
    /// Failed requests per failure class.
    pub classes: BTreeMap<String, u64>,
    /// The longest incident of any class, ms.
    pub longest_outage_ms: Option<i64>,
    /// The median time between the proxy's DNS queries for a name, ms.
    pub requery_period_ms: Option<f64>,
    /// Time to follow the authority's answer changes (absent: no answer history).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub swap_follow: Option<resolvelab_diagnose::verdict::SwapFollow>,
    /// The classes the checker gives from the access and error logs and the configuration
    /// alone, as production without a DNS history would see the run: failed requests and the
    /// highest confidence, per class.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub without_dns: BTreeMap<String, Seen>,
    /// p99 of the client's latency (from the scheduled send), ms.
    pub p99_ms: Option<f64>,
    /// Why the engine could not run, if it could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Why the engine does not apply to this scenario (it cannot express it), if it does not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_applicable: Option<String>,
    /// Every run of a repeated cell (`compare --repeat N`, N > 1), the first one (whose figures
    /// the fields above are) included, one per seed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub repeats: Vec<Repeat>,
}

/// One run of a repeated cell: its seed and the figures that vary from seed to seed.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Repeat {
    /// The run's seed.
    pub seed: u64,
    /// The run directory (empty when the run could not start).
    pub run: PathBuf,
    /// The verdict's status, or `error`.
    pub status: CellStatus,
    /// The scenario's expectations that held.
    pub held: usize,
    /// Requests the client sent.
    pub requests: u64,
    /// Requests that failed at the client.
    pub client_errors: u64,
    /// Requests the client never sent (absent: not kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unsent: Option<u64>,
    /// `no live upstreams` failures.
    pub nlu: u64,
    /// The longest incident of any class, ms.
    pub longest_outage_ms: Option<i64>,
}

impl Repeat {
    fn of(seed: u64, c: &Cell) -> Repeat {
        Repeat {
            seed,
            run: c.run.clone(),
            status: c.status,
            held: c.held,
            requests: c.requests,
            client_errors: c.client_errors,
            unsent: c.unsent,
            nlu: c.nlu,
            longest_outage_ms: c.longest_outage_ms,
        }
    }
}

/// What became of one engine's run: its verdict's status, or why there is none. Written as
/// the verdict's own id, `error` or `n/a`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum CellStatus {
    /// The run was judged.
    Judged(VerdictStatus),
    /// The engine could not run it.
    Error,
    /// The engine does not apply to the scenario.
    NotApplicable,
}

impl std::fmt::Display for CellStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CellStatus::Judged(v) => v.fmt(f),
            CellStatus::Error => f.write_str("error"),
            CellStatus::NotApplicable => f.write_str("n/a"),
        }
    }
}

impl From<CellStatus> for String {
    fn from(s: CellStatus) -> String {
        s.to_string()
    }
}

impl TryFrom<String> for CellStatus {
    type Error = String;

    fn try_from(s: String) -> Result<CellStatus, String> {
        match s.as_str() {
            "error" => Ok(CellStatus::Error),
            "n/a" => Ok(CellStatus::NotApplicable),
            _ => serde_json::from_value(serde_json::Value::String(s.clone()))
                .map(CellStatus::Judged)
                .map_err(|_| format!("`{s}` is no cell status (a verdict's, `error` or `n/a`)")),
        }
    }
}

impl Cell {
    fn empty(engine: EngineId, sc: &Scenario, status: CellStatus) -> Cell {
        Cell {
            engine,
            version: String::new(),
            run: PathBuf::new(),
            status,
            held: 0,
            checks: sc.expect.for_engine(engine).len(),
            requests: 0,
            client_errors: 0,
            unsent: None,
            nlu: 0,
            classes: BTreeMap::new(),
            longest_outage_ms: None,
            requery_period_ms: None,
            swap_follow: None,
            without_dns: BTreeMap::new(),
            p99_ms: None,
            error: None,
            not_applicable: None,
            repeats: Vec::new(),
        }
    }
}

/// A class as seen without a DNS history.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Seen {
    /// Failed requests of the class.
    pub requests: u64,
    /// The highest confidence of its incidents.
    pub confidence: f64,
}

/// A scenario (variant) across engines.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Comparison {
    /// The scenario id.
    pub scenario: String,
    /// The variant, if any.
    pub variant: Option<String>,
    /// The question the scenario asks.
    pub question: String,
    /// What the scenario (or the variant) sets up.
    pub description: String,
    /// One cell per engine, in the order asked.
    pub cells: Vec<Cell>,
}

impl Comparison {
    /// `scenario [variant]`.
    pub fn title(&self) -> String {
        match &self.variant {
            Some(v) => format!("{} [{v}]", self.scenario),
            None => self.scenario.clone(),
        }
    }

    /// What a reader needs above the table: the question, and for a variant what it changes.
    pub fn setup(&self) -> String {
        match &self.variant {
            Some(_) => format!("{} This variant: {}", self.question, self.description),
            None => self.question.clone(),
        }
    }

    /// Every applicable engine ran, every repeat of it included.
    pub fn all_ran(&self) -> bool {
        self.cells
            .iter()
            .all(|c| c.error.is_none() && c.repeats.iter().all(|r| r.status != CellStatus::Error))
    }
}

/// Play `sc` (already variant-merged) on every engine, each into `<opts.out>/<engine>/`, and
/// judge each run; `on_cell` sees each cell as it is done, with the seed its run played. An
/// engine that cannot run (no binary, a registry out of reach) gets a cell with its error, and
/// the others still run.
pub fn compare(
    sc: &Scenario,
    opts: &RunOptions,
    engines: &[&dyn Engine],
    on_cell: &mut dyn FnMut(&Cell, u64),
) -> Comparison {
    compare_reusing(sc, opts, engines, &BTreeMap::new(), 1, on_cell)
}

/// [`compare`], `repeat` times per engine with the seeds `seed`, `seed + 1`, … (`seed`: the
/// options', else the scenario's, else 1), taking an engine's run from `reuse[engine]` (a
/// `run --all --out` directory) when one there played exactly this scenario with that seed
/// (the same resolved `scenario.toml`, its `[[variant]]` definitions aside) to completion: it
/// is judged again by today's checker instead of played again. `on_cell` sees every run, with
/// its seed (an engine that does not apply: the first seed).
pub fn compare_reusing(
    sc: &Scenario,
    opts: &RunOptions,
    engines: &[&dyn Engine],
    reuse: &BTreeMap<String, PathBuf>,
    repeat: u32,
    on_cell: &mut dyn FnMut(&Cell, u64),
) -> Comparison {
    let base = opts.seed.or(sc.seed).unwrap_or(1);
    let mut cells = Vec::new();
    for e in engines {
        if let Some(why) = crate::engine::not_applicable(sc, *e) {
            let cell = Cell {
                not_applicable: Some(why),
                ..Cell::empty(e.id(), sc, CellStatus::NotApplicable)
            };
            on_cell(&cell, base);
            cells.push(cell);
            continue;
        }
        let mut runs = Vec::new();
        for seed in (0..u64::from(repeat.max(1))).map(|r| base + r) {
            if !runs.is_empty()
                && crate::runner::INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst)
            {
                break;
            }
            let o = RunOptions {
                seed: Some(seed),
                ..opts.clone()
            };
            let cell = one_cell(sc, &o, *e, reuse);
            on_cell(&cell, seed);
            runs.push((seed, cell));
        }
        let repeats: Vec<Repeat> = match runs.len() {
            0 | 1 => Vec::new(),
            _ => runs.iter().map(|(seed, c)| Repeat::of(*seed, c)).collect(),
        };
        let (_, first) = runs.swap_remove(0);
        cells.push(Cell { repeats, ..first });
    }
    Comparison {
        scenario: sc.name.clone(),
        variant: sc.variant_of.clone(),
        question: sc.question.clone(),
        description: sc.description.clone(),
        cells,
    }
}

/// One run of `sc` on `e` with `opts`' seed, or a reused one, as a cell.
fn one_cell(
    sc: &Scenario,
    opts: &RunOptions,
    e: &dyn Engine,
    reuse: &BTreeMap<String, PathBuf>,
) -> Cell {
    let earlier = reuse
        .get(e.id().as_str())
        .and_then(|dir| reusable_run(dir, sc, e.id(), opts));
    let judged = match earlier {
        // Judged by today's expectations, which may be newer than the run.
        Some(record) => judge::judge_dir_by(record, Some(sc.expect.for_engine(e.id()))),
        None => {
            let o = RunOptions {
                out: opts.out.join(e.id().as_str()),
                ..opts.clone()
            };
            judge::run_and_judge(sc, &o, e)
        }
    };
    match judged {
        Ok(j) => cell_of(e.id(), &j),
        Err(err) => Cell {
            error: Some(format!("{err:#}")),
            ..Cell::empty(e.id(), sc, CellStatus::Error)
        },
    }
}

/// The newest completed run of exactly `sc` (as `opts` would scale and seed it) by `engine` in
/// `dir`, if there is one.
fn reusable_run(
    dir: &Path,
    sc: &Scenario,
    engine: EngineId,
    opts: &RunOptions,
) -> Option<crate::options::RunRecord> {
    // The scenario as it would be played: its other variants' definitions, its expectations
    // and the engines it names do not change it (a reused run is judged by today's).
    let played = |text: &str| -> Option<toml::Table> {
        let mut t: toml::Table = toml::from_str(text).ok()?;
        for k in ["variant", "expect", "engines"] {
            t.remove(k);
        }
        Some(t)
    };
    let plan = sc.plan(None, opts.scale, opts.seed).ok()?;
    let want = played(&toml::to_string(&plan.scenario).ok()?)?;
    let seed = plan.seed;
    let mut found: Vec<crate::options::RunRecord> = crate::replay::lab_runs(dir)
        .ok()?
        .into_iter()
        .filter_map(|d| crate::options::RunRecord::read(&d).ok())
        .filter(|r| r.status == crate::options::RunStatus::Completed && r.seed == seed)
        .filter(|r| r.scenario == sc.name && r.variant == sc.variant_of)
        .filter(|r| engine_of(&r.dir) == engine.as_str())
        .filter(|r| {
            let text = std::fs::read_to_string(r.dir.join(file::SCENARIO)).unwrap_or_default();
            played(&text).as_ref() == Some(&want)
        })
        .collect();
    found.sort_by_key(|r| r.started_us);
    found.pop()
}

/// The engine a run directory's `fingerprint.json` names.
fn engine_of(dir: &Path) -> String {
    let text = std::fs::read_to_string(dir.join(file::FINGERPRINT)).unwrap_or_default();
    let fp: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    fp["engine"].as_str().unwrap_or("").to_string()
}

fn cell_of(engine: EngineId, j: &Judged) -> Cell {
    let v = &j.verdict;
    let d = &v.diagnosis;
    Cell {
        engine,
        version: version_of(engine, &j.record.dir),
        run: j.record.dir.clone(),
        status: CellStatus::Judged(v.status),
        held: v.expectations.iter().filter(|e| e.held).count(),
        checks: v.expectations.len(),
        requests: v.client.as_ref().map_or(d.requests, |c| c.requests),
        client_errors: v.client.as_ref().map_or(d.failures, |c| c.errors),
        unsent: v.client.as_ref().map(|c| c.unsent),
        nlu: d.nlu.total,
        classes: d
            .classes
            .iter()
            .map(|c| (c.class.to_string(), c.requests))
            .collect(),
        longest_outage_ms: longest_outage_ms(j),
        requery_period_ms: d.requery_period_ms,
        swap_follow: d.swap_follow.clone().map(|mut f| {
            // The cell keeps the figures; the run's verdict has every move.
            f.list.clear();
            f
        }),
        without_dns: match &v.fleet {
            Some(f) => seen(f.instances.values().flat_map(|d| &d.incidents)),
            None => without_dns(&j.record.dir),
        },
        p99_ms: p99_of(&j.record.dir),
        error: None,
        not_applicable: None,
        repeats: Vec::new(),
    }
}

/// The run's classes from its logs and configuration alone (empty when that fails: the
/// column then says nothing rather than something wrong).
fn without_dns(dir: &Path) -> BTreeMap<String, Seen> {
    match resolvelab_diagnose::run::diagnose_without_dns(dir) {
        Ok(d) => seen(&d.incidents),
        Err(_) => BTreeMap::new(),
    }
}

/// The longest outage: a fleet run's longest fleet incident (from the first instance's start
/// to the last one's end), else the run's longest incident.
fn longest_outage_ms(j: &Judged) -> Option<i64> {
    match &j.verdict.fleet {
        Some(f) => (f.report.incidents.iter())
            .map(|i| i.end_ms - i.start_ms)
            .max(),
        None => judge::longest_incident_ms(j),
    }
}

/// Incidents' requests and highest confidence by class. A fleet run's instances were
/// diagnosed without the DNS log already (as production would), so theirs are that column.
fn seen<'a>(
    incidents: impl IntoIterator<Item = &'a resolvelab_diagnose::verdict::Incident>,
) -> BTreeMap<String, Seen> {
    let mut out: BTreeMap<String, Seen> = BTreeMap::new();
    for i in incidents {
        let s = out.entry(i.class.to_string()).or_insert(Seen {
            requests: 0,
            confidence: 0.0,
        });
        s.requests += i.count;
        s.confidence = s.confidence.max(i.confidence);
    }
    out
}

/// The proxy's own version from `fingerprint.json` (`nginx/1.31.3`, `haproxy/2.6.12-1+deb12u3`),
/// `model` for the sim.
fn version_of(engine: EngineId, dir: &Path) -> String {
    let text = std::fs::read_to_string(dir.join(file::FINGERPRINT)).unwrap_or_default();
    let fp: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    let v = fp["nginx_v"].as_str().unwrap_or("");
    let Some(first) = v.lines().next() else {
        return "model".into();
    };
    match engine {
        // Each proxy's folder reads its own version words.
        EngineId::Proxy(k) => {
            let v = resolvelab_thirdparty::proxy(k).version(first);
            format!("{}/{}", k.id(), v.unwrap_or("?"))
        }
        // `nginx version: nginx/1.31.3`
        _ => first
            .split_whitespace()
            .find(|w| w.contains('/'))
            .unwrap_or(first)
            .to_string(),
    }
}

fn p99_of(dir: &Path) -> Option<f64> {
    let load = dir.join(file::LOAD);
    let m = resolvelab_load::report::merge(&[load]).ok()?;
    (m.summary.latency.count > 0).then(|| m.summary.latency.p99_us as f64 / 1000.0)
}

fn ms(v: Option<i64>) -> String {
    v.map_or("—".into(), |v| format!("{:.1} s", v as f64 / 1000.0))
}

fn classes_cell(c: &Cell) -> String {
    if let Some(e) = &c.error {
        return format!("could not run: {e}");
    }
    if let Some(why) = &c.not_applicable {
        // The reason inside `… cannot run on --engine X (REASON); run it with …`, or the
        // scenario's own `engines` (`FILE:LINE: scenario `X` applies to A, B only`).
        let short = why
            .split_once("cannot run on ")
            .and_then(|(_, r)| r.split_once(" ("))
            .and_then(|(_, r)| r.rsplit_once("); run it"))
            .map(|(reason, _)| reason)
            .or_else(|| why.find("applies to ").map(|i| &why[i..]))
            .unwrap_or(why.as_str());
        return format!("not applicable: {short}");
    }
    if c.classes.is_empty() {
        return "none".into();
    }
    c.classes
        .iter()
        .map(|(k, n)| format!("`{k}` {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn without_dns_cell(c: &Cell) -> String {
    if c.error.is_some() || c.not_applicable.is_some() {
        return "—".into();
    }
    if c.without_dns.is_empty() {
        return "none".into();
    }
    (c.without_dns.iter())
        .map(|(k, s)| format!("`{k}` {} ({:.2})", s.requests, s.confidence))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A row's cells as every rendering shows them: engine, version, requests, client errors, NLU,
/// classes, classes without a DNS history, longest outage, re-query period, time to follow a
/// swap, p99, expectations (the run apart). A repeated cell shows its runs' spread where they
/// vary (requests, client errors, NLU, longest outage, expectations); the other columns are
/// the first run's.
fn columns(e: &Cell) -> [String; 12] {
    let r = &e.repeats;
    let counts = |f: fn(&Repeat) -> u64, one: u64| match r.is_empty() {
        true => one.to_string(),
        false => spread(&r.iter().map(f).collect::<Vec<_>>(), |v| v.to_string()),
    };
    let mut errors = counts(|r| r.client_errors, e.client_errors);
    if disagree(r, |r| r.client_errors) {
        errors.push_str(" — runs disagree");
    }
    if let Some(floor) = never_sent(e) {
        errors.push_str(&floor);
    }
    let outage = match r.is_empty() {
        true => ms(e.longest_outage_ms),
        false => match r.iter().all(|r| r.longest_outage_ms.is_none()) {
            true => "—".into(),
            false => spread(
                &(r.iter())
                    .map(|r| r.longest_outage_ms.unwrap_or(0).max(0) as u64)
                    .collect::<Vec<_>>(),
                |v| ms(Some(v as i64)),
            ),
        },
    };
    [
        e.engine.to_string(),
        e.version.clone(),
        counts(|r| r.requests, e.requests),
        errors,
        counts(|r| r.nlu, e.nlu),
        classes_cell(e),
        without_dns_cell(e),
        outage,
        e.requery_period_ms
            .map_or("—".into(), |p| format!("{:.1} s", p / 1000.0)),
        e.swap_follow.as_ref().map_or("—".into(), |f| f.short()),
        e.p99_ms.map_or("—".into(), |p| format!("{p:.1} ms")),
        expectations(e),
    ]
}

/// `min–max (median m, N runs)` of a figure over a cell's runs, or `v (N runs)` when every run
/// gave the same.
fn spread(values: &[u64], show: impl Fn(u64) -> String) -> String {
    let mut v = values.to_vec();
    v.sort_unstable();
    let (lo, hi, n) = (v[0], v[v.len() - 1], v.len());
    // The lower median: a figure some run measured.
    let med = v[(n - 1) / 2];
    match lo == hi {
        true => format!("{} ({n} runs)", show(lo)),
        false => format!("{}–{} (median {}, {n} runs)", show(lo), show(hi), show(med)),
    }
}

/// ` — a floor: N never sent` when the client could not send some of its requests (all its
/// connections waiting): the proxy would have failed more of them, or not — the run cannot
/// say. For a repeated cell, the runs' spread of it.
fn never_sent(e: &Cell) -> Option<String> {
    let runs: Vec<u64> = match e.repeats.is_empty() {
        true => vec![e.unsent?],
        false => e.repeats.iter().map(|r| r.unsent.unwrap_or(0)).collect(),
    };
    if runs.iter().all(|&n| n == 0) {
        return None;
    }
    let n = match runs.len() {
        1 => runs[0].to_string(),
        _ => spread(&runs, |v| v.to_string()),
    };
    Some(format!(" — a floor: {n} never sent"))
}

/// Some runs saw none and others some: the runs disagree in direction, which a range hides.
fn disagree(runs: &[Repeat], f: fn(&Repeat) -> u64) -> bool {
    runs.iter().any(|r| f(r) == 0) && runs.iter().any(|r| f(r) > 0)
}

/// `held/checks status`, and for a repeated cell each distinct outcome with its runs
/// (`2/2 completed ×2, 1/2 completed ×1`).
fn expectations(e: &Cell) -> String {
    if e.repeats.is_empty() {
        return format!("{}/{} {}", e.held, e.checks, e.status);
    }
    let mut seen: Vec<(String, usize)> = Vec::new();
    for r in &e.repeats {
        let k = format!("{}/{} {}", r.held, e.checks, r.status);
        match seen.iter_mut().find(|(s, _)| *s == k) {
            Some((_, n)) => *n += 1,
            None => seen.push((k, 1)),
        }
    }
    (seen.iter())
        .map(|(k, n)| format!("{k} ×{n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The comparisons as report blocks, one section (heading `level`) per comparison: the
/// question and the setup, a row per engine, and (on the HTML page) each engine's
/// configuration.
fn blocks(comparisons: &[Comparison], level: u8) -> Vec<Block> {
    let cols = [
        ("engine", false),
        ("version", false),
        ("requests", true),
        ("client errors", true),
        ("NLU", true),
        ("classes (failed requests)", false),
        ("classes without a DNS history (confidence)", false),
        ("longest outage", true),
        ("re-query period", true),
        ("time to follow a swap", true),
        ("p99", true),
        ("expectations", false),
        ("run", false),
    ];
    let mut out = Vec::new();
    for c in comparisons {
        out.push(Block::Heading(level, vec![p(c.title())]));
        out.push(Block::Para(vec![m(c.setup())]));
        let rows = c.cells.iter().map(row).collect();
        out.push(Block::Table(Table {
            id: None,
            cols: cols.to_vec(),
            rows,
            keyed: false,
        }));
        for e in &c.cells {
            if let Some((name, text)) = config_of(&e.run) {
                out.push(Block::Details(
                    vec![p(e.engine.as_str()), m(": "), code(name)],
                    text,
                ));
            }
        }
    }
    out
}

/// One engine's row: [`columns`], then its run directory, linking the run's verdict.
fn row(e: &Cell) -> Vec<DocCell> {
    let [
        engine,
        version,
        requests,
        errors,
        nlu,
        classes,
        without,
        outage,
        period,
        follow,
        p99,
        held,
    ] = columns(e);
    let any_errors = e.client_errors > 0 || e.repeats.iter().any(|r| r.client_errors > 0);
    let errors = match any_errors {
        false => n(errors),
        true => n(errors).class("nothold"),
    };
    let run = e
        .run
        .file_name()
        .map_or(String::new(), |n| n.to_string_lossy().into_owned());
    let run = match run.is_empty() {
        true => DocCell::from(p("")),
        false => {
            DocCell::from(code(run)).link(e.run.join(file::VERDICT_HTML).display().to_string())
        }
    };
    vec![
        p(engine).into(),
        p(version).into(),
        n(requests),
        errors,
        n(nlu),
        m(classes).into(),
        m(without).into(),
        n(outage),
        n(period),
        n(follow),
        n(p99),
        p(held).into(),
        run,
    ]
}

/// One Markdown section per comparison: a row per engine.
pub fn markdown(comparisons: &[Comparison]) -> String {
    resolvelab_core::doc::markdown::blocks(&blocks(comparisons, 3))
}

/// The run directory's configuration of the proxy that played it, for the HTML page.
fn config_of(dir: &Path) -> Option<(&'static str, String)> {
    ["nginx.conf", "haproxy.cfg", "envoy.json", "caddy.json"]
        .into_iter()
        .find_map(|f| Some((f, std::fs::read_to_string(dir.join(f)).ok()?)))
}

/// The same comparisons as one self-contained HTML page (`comparison.html`): a table per
/// scenario, each engine's row linking its run's verdict, and each engine's configuration.
pub fn html(comparisons: &[Comparison]) -> String {
    let page = Doc {
        title: "The same scenario on several engines".into(),
        blocks: blocks(comparisons, 2),
    };
    resolvelab_core::doc::html::render(&page, "pre{max-height:360px;overflow:auto}")
}

/// The generated part of a comparison page (docs/COMPARISON.md, docs/STALE-ADDRESS.md), between
/// its markers; `what` is what was compared (`--all`, or the scenario).
pub fn page_section(comparisons: &[Comparison], what: &str, engines: &[&str]) -> String {
    format!(
        "<!-- BEGIN GENERATED by resolvelab compare {what} --engines {} -->\n\n{}{}\n",
        engines.join(","),
        markdown(comparisons),
        resolvelab_report::GENERATED_END
    )
}

/// Write the comparisons into `path` between its markers, keeping the hand-written findings.
pub fn update_page(
    path: &Path,
    comparisons: &[Comparison],
    what: &str,
    engines: &[&str],
) -> anyhow::Result<()> {
    let generated = page_section(comparisons, what, engines);
    resolvelab_report::update_generated(path, &generated, |g| {
        format!(
            "# The same DNS timeline on several proxies\n\n\
Regenerate with `resolvelab compare {what} --engines {} --table {}`. Each scenario ran on every\n\
engine with the same DNS timeline, backends, faults, load and seeds, and the one checker judged\n\
every run. The expectations are the scenario's (written for nginx 1.28): one that does not\n\
hold on another engine is a finding, not a failure; the findings belong on a hand-written\n\
page beside this one that cites these runs (docs/COMPARISON.md).\n\n{g}",
            engines.join(","),
            path.display()
        )
    })
}

/// Where the comparisons behind a page written with [`add_to_page`] are kept: beside it, as
/// JSON (`COMPARISON-REPEATS.md` → `COMPARISON-REPEATS.json`).
pub fn kept_path(page: &Path) -> PathBuf {
    page.with_extension("json")
}

/// `c`'s section merged into `kept`: its engines' cells replace theirs (the others stay), or
/// it is added; sections in the order of `order` (titles: `scenario [variant]`), the others
/// after them; cells in engine order.
pub fn merge_section(kept: &mut Vec<Comparison>, c: &Comparison, order: &[String]) {
    match kept.iter_mut().find(|k| k.title() == c.title()) {
        Some(k) => {
            k.question.clone_from(&c.question);
            k.description.clone_from(&c.description);
            k.cells
                .retain(|old| c.cells.iter().all(|new| new.engine != old.engine));
            k.cells.extend(c.cells.iter().cloned());
            k.cells.sort_by_key(|x| x.engine);
        }
        None => {
            let mut c = c.clone();
            c.cells.sort_by_key(|x| x.engine);
            kept.push(c);
        }
    }
    let rank = |t: &str| order.iter().position(|o| o == t).unwrap_or(order.len());
    kept.sort_by_key(|k| rank(&k.title()));
}

/// Whether `kept` already holds section `title` with every one of `engines` played `repeat`
/// times, or not applicable, and no run that could not start: `compare --add --skip-done`
/// passes such a section over, so a stopped sitting resumes where it stopped.
pub fn is_done(kept: &[Comparison], title: &str, engines: &[EngineId], repeat: u32) -> bool {
    let Some(k) = kept.iter().find(|k| k.title() == title) else {
        return false;
    };
    engines.iter().all(|e| {
        k.cells.iter().any(|c| {
            c.engine == *e
                && (c.not_applicable.is_some()
                    || (c.error.is_none()
                        && c.repeats.len().max(1) == repeat as usize
                        && c.repeats.iter().all(|r| r.status != CellStatus::Error)))
        })
    })
}

/// The comparisons kept behind `page` ([`kept_path`]; none yet: empty), read before any run
/// so that an unreadable file stops the command at once.
pub fn read_kept(page: &Path) -> anyhow::Result<Vec<Comparison>> {
    let json = kept_path(page);
    match std::fs::read_to_string(&json) {
        Ok(t) => serde_json::from_str(&t).map_err(|e| {
            anyhow::anyhow!(
                "{}:{}: {e}: the runs kept behind {} do not read back; restore the file from git, or remove it to start the page again",
                json.display(),
                e.line(),
                page.display()
            )
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => anyhow::bail!("cannot read {}: {e}", json.display()),
    }
}

/// Add one section's runs to `page` (`compare … --table PAGE --add`): they are merged into
/// `kept` ([`read_kept`], [`merge_section`]), which is written beside the page, and the page is
/// written again from all of them — sessions add to one page section by section, engine by
/// engine.
pub fn add_to_page(
    page: &Path,
    kept: &mut Vec<Comparison>,
    c: &Comparison,
    order: &[String],
    what: &str,
) -> anyhow::Result<()> {
    merge_section(kept, c, order);
    let mut engines: Vec<EngineId> = kept
        .iter()
        .flat_map(|k| k.cells.iter().map(|c| c.engine))
        .collect();
    engines.sort();
    engines.dedup();
    let ids: Vec<&str> = engines.iter().map(|e| e.as_str()).collect();
    let json = serde_json::to_string_pretty(&kept)?;
    resolvelab_core::rundir::write_atomic(&kept_path(page), json.as_bytes())?;
    update_page(page, kept, what, &ids)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `--add` keeps reads back as it was written, every cell status included.
    #[test]
    fn kept_comparisons_read_back_and_merge_by_section_and_engine() {
        use resolvelab_core::spec::engine::ProxyKind;
        let sc = resolvelab_scenario::library::get("swap-only").unwrap();
        let cell = |engine, status| Cell {
            requests: 10,
            repeats: vec![Repeat::of(4, &Cell::empty(engine, &sc, status))],
            ..Cell::empty(engine, &sc, status)
        };
        let c = |variant: Option<&str>, cells| Comparison {
            scenario: "swap-only".into(),
            variant: variant.map(str::to_string),
            question: "q".into(),
            description: "d".into(),
            cells,
        };
        let a = c(
            None,
            vec![
                cell(
                    EngineId::Proxy(ProxyKind::Haproxy),
                    CellStatus::Judged(VerdictStatus::NotInterpretable),
                ),
                cell(EngineId::Nginx, CellStatus::Error),
            ],
        );
        let b = c(
            Some("v"),
            vec![cell(
                EngineId::Proxy(ProxyKind::Envoy),
                CellStatus::NotApplicable,
            )],
        );
        let text = serde_json::to_string(&[&a, &b]).unwrap();
        let back: Vec<Comparison> = serde_json::from_str(&text).unwrap();
        assert_eq!(back, [a.clone(), b.clone()]);
        assert!(serde_json::from_str::<CellStatus>("\"done\"").is_err());
        // The variant first in the order: it goes first; nginx's row is replaced, HAProxy's kept.
        let order = ["swap-only [v]".to_string(), "swap-only".to_string()];
        let mut kept = Vec::new();
        merge_section(&mut kept, &a, &order);
        merge_section(&mut kept, &b, &order);
        let again = c(
            None,
            vec![cell(
                EngineId::Nginx,
                CellStatus::Judged(VerdictStatus::Completed),
            )],
        );
        merge_section(&mut kept, &again, &order);
        assert_eq!(kept[0].title(), "swap-only [v]");
        let rows: Vec<(EngineId, String)> = kept[1]
            .cells
            .iter()
            .map(|c| (c.engine, c.status.to_string()))
            .collect();
        assert_eq!(
            rows,
            [
                (EngineId::Nginx, "completed".to_string()),
                (
                    EngineId::Proxy(ProxyKind::Haproxy),
                    "not-interpretable".to_string()
                )
            ]
        );
    }

    #[test]
    fn a_failed_engine_keeps_its_row_and_says_why() {
        let tmp = tempfile::tempdir().unwrap();
        let sc = resolvelab_scenario::library::get("swap-only")
            .unwrap()
            .scaled(0.1)
            .unwrap();
        let opts = RunOptions {
            out: tmp.path().to_path_buf(),
            progress: false,
            ..RunOptions::default()
        };
        // An nginx that does not exist: that engine's cell says so; the model still runs.
        let opts = RunOptions {
            engine_bins: [("nginx".to_string(), tmp.path().join("no-such-nginx"))].into(),
            ..opts
        };
        let engines = [
            crate::engine::by_name("nginx").unwrap(),
            crate::engine::by_name("sim").unwrap(),
        ];
        let mut seen = Vec::new();
        let c = compare(&sc, &opts, &engines, &mut |cell, _| seen.push(cell.engine));
        assert_eq!(seen, [EngineId::Nginx, EngineId::Sim]);
        assert!(!c.all_ran());
        let nginx = &c.cells[0];
        assert_eq!(nginx.status, CellStatus::Error);
        assert!(nginx.error.as_deref().unwrap().contains("no-such-nginx"));
        let sim = &c.cells[1];
        assert_eq!(sim.version, "model");
        assert!(sim.requests > 0 && sim.error.is_none(), "{sim:?}");
        assert!(sim.run.starts_with(tmp.path().join("sim")));
        assert!(sim.p99_ms.is_some());
        let md = markdown(&[c]);
        assert!(
            md.contains("| nginx |  | 0 |") && md.contains("could not run"),
            "{md}"
        );
        assert!(md.contains("| sim | model |"), "{md}");
        let na = Cell {
            not_applicable: Some(
                "a.toml:3: scenario `x`: nginx.route cannot run on --engine haproxy (only the upstream route (servers resolved by a resolver) is rendered); run it with --engine nginx".into(),
            ),
            ..Cell::empty(EngineId::Proxy(resolvelab_core::spec::engine::ProxyKind::Haproxy), &sc, CellStatus::NotApplicable)
        };
        assert_eq!(
            classes_cell(&na),
            "not applicable: only the upstream route (servers resolved by a resolver) is rendered"
        );
    }

    #[test]
    fn a_repeated_cell_plays_each_seed_and_shows_the_spread() {
        let tmp = tempfile::tempdir().unwrap();
        let sc = resolvelab_scenario::library::get("generation-race")
            .unwrap()
            .scaled(0.1)
            .unwrap();
        let opts = RunOptions {
            out: tmp.path().to_path_buf(),
            seed: Some(5),
            progress: false,
            ..RunOptions::default()
        };
        let engines = [crate::engine::by_name("sim").unwrap()];
        let mut heard = Vec::new();
        let c = compare_reusing(&sc, &opts, &engines, &BTreeMap::new(), 3, &mut |_, seed| {
            heard.push(seed)
        });
        assert_eq!(
            heard,
            [5, 6, 7],
            "every run is reported as it ends, with its seed"
        );
        let cell = &c.cells[0];
        let seeds: Vec<u64> = cell.repeats.iter().map(|r| r.seed).collect();
        assert_eq!(seeds, [5, 6, 7]);
        // The cell's own figures are its first run's; each run has its own directory.
        assert_eq!(cell.run, cell.repeats[0].run);
        assert_eq!(cell.client_errors, cell.repeats[0].client_errors);
        let dirs: std::collections::BTreeSet<&PathBuf> =
            cell.repeats.iter().map(|r| &r.run).collect();
        assert_eq!(dirs.len(), 3);
        for r in &cell.repeats {
            let rec = crate::options::RunRecord::read(&r.run).unwrap();
            assert_eq!(rec.seed, r.seed, "{}", r.run.display());
        }
        assert!(c.all_ran());
        let md = markdown(std::slice::from_ref(&c));
        assert!(md.contains("3 runs)"), "{md}");
        let json = serde_json::to_value(&c).unwrap();
        assert_eq!(json["cells"][0]["repeats"].as_array().unwrap().len(), 3);
        // One run: no `repeats`, the JSON as before.
        let one = compare(&sc, &opts, &engines, &mut |_, _| {});
        assert!(
            serde_json::to_value(&one).unwrap()["cells"][0]
                .get("repeats")
                .is_none()
        );
    }

    #[test]
    fn the_spread_says_where_runs_disagree_in_direction() {
        let sc = resolvelab_scenario::library::get("swap-only").unwrap();
        let run = |seed, errors, held, status| Repeat {
            seed,
            run: PathBuf::new(),
            status: CellStatus::Judged(status),
            held,
            requests: 100,
            client_errors: errors,
            unsent: Some(0),
            nlu: errors,
            longest_outage_ms: (errors > 0).then_some(1500),
        };
        let mut cell = Cell::empty(
            EngineId::Sim,
            &sc,
            CellStatus::Judged(VerdictStatus::Completed),
        );
        cell.checks = 2;
        cell.repeats = vec![
            run(1, 0, 2, VerdictStatus::Completed),
            run(2, 7, 1, VerdictStatus::Completed),
            run(3, 3, 2, VerdictStatus::NotInterpretable),
        ];
        let cols = columns(&cell);
        assert_eq!(cols[2], "100 (3 runs)");
        assert_eq!(cols[3], "0–7 (median 3, 3 runs) — runs disagree");
        assert_eq!(cols[7], "0.0 s–1.5 s (median 1.5 s, 3 runs)");
        assert_eq!(
            cols[11],
            "2/2 completed ×1, 1/2 completed ×1, 2/2 not-interpretable ×1"
        );
        cell.repeats.remove(0);
        assert!(!columns(&cell)[3].contains("disagree"));
        // A client that could not send some requests makes its cell's figure a floor.
        cell.repeats[1].unsent = Some(5259);
        assert_eq!(
            columns(&cell)[3],
            "3–7 (median 3, 2 runs) — a floor: 0–5259 (median 0, 2 runs) never sent"
        );
        cell.repeats[1].unsent = None;
        let mut one = cell.clone();
        one.repeats.clear();
        one.unsent = Some(12);
        assert_eq!(columns(&one)[3], "0 — a floor: 12 never sent");
        one.unsent = None;
        assert_eq!(
            columns(&one)[3],
            "0",
            "a cell kept before `unsent` says nothing"
        );
        // A repeat that could not run makes the comparison incomplete (exit 1).
        let mut c = Comparison {
            scenario: "swap-only".into(),
            variant: None,
            question: String::new(),
            description: String::new(),
            cells: vec![cell],
        };
        assert!(c.all_ran());
        c.cells[0].repeats[1].status = CellStatus::Error;
        assert!(!c.all_ran());
    }
}
