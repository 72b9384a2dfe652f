//! Judging runs: a scenario's variants expanded, its expectations checked before anything
//! runs, each run played on an [`Engine`] and judged by the checker (verdict files written
//! beside the evidence), existing run directories judged again, and the reproduction table of
//! docs/REPRODUCTION.md built from the verdicts.
//!
//! ```no_run
//! use resolvelab_lab::{engine, judge, options::RunOptions};
//! use resolvelab_scenario::library;
//! let sc = library::get("swap-only").unwrap();
//! let j = judge::run_and_judge(&sc, &RunOptions::default(), engine::by_name("sim").unwrap()).unwrap();
//! println!("{}: {}", j.record.scenario, j.verdict.summary);
//! ```

use crate::engine::Engine;
use crate::options::{RunOptions, RunRecord};
use anyhow::{Context, Result};
use resolvelab_diagnose::Verdict;
use resolvelab_scenario::{Scenario, library};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Load a scenario by built-in id or file path.
pub fn load_scenario(arg: &str) -> Result<Scenario> {
    let p = Path::new(arg);
    if arg.ends_with(".toml") || p.is_file() {
        let text = std::fs::read_to_string(p).with_context(|| format!("cannot read {arg}"))?;
        return Scenario::from_toml(&text, arg);
    }
    library::get(arg)
}

/// The scenario plus the variants selected by `--variant` (all of them by default).
pub fn expand_variants(sc: &Scenario, only: Option<&str>) -> Result<Vec<Scenario>> {
    let mut out = Vec::new();
    if only.is_none() || only == Some("base") {
        out.push(sc.clone());
    }
    for v in sc.variant_names() {
        if only.is_none() || only == Some(v.as_str()) {
            out.push(sc.variant(&v)?);
        }
    }
    if out.is_empty() {
        let names: Vec<String> = std::iter::once("base".to_string())
            .chain(sc.variant_names())
            .collect();
        anyhow::bail!(
            "scenario `{}` has no variant `{}` (variants: {})",
            sc.name,
            only.unwrap_or_default(),
            names.join(", ")
        );
    }
    Ok(out)
}

/// The scenarios a command works on: every built-in one but the demo (`--all`), or the one
/// named (a built-in id or a file).
pub fn selected(all: bool, name: Option<&str>) -> Result<Vec<Scenario>> {
    if all {
        return Ok(library::all()?
            .into_iter()
            .filter(|s| s.name != "demo")
            .collect());
    }
    let Some(name) = name else {
        anyhow::bail!("name a scenario (see `resolvelab run --list`), or pass --all");
    };
    Ok(vec![load_scenario(name)?])
}

/// Every run of `scenarios` (their variants, or the one `variant`), each run's expectations
/// checked before the first one starts: a typo costs no run.
pub fn planned(scenarios: &[Scenario], variant: Option<&str>) -> Result<Vec<Scenario>> {
    let mut planned = Vec::new();
    for sc in scenarios {
        for v in expand_variants(sc, variant)? {
            check_expectations(&v)?;
            check_targets(&v)?;
            planned.push(v);
        }
    }
    Ok(planned)
}

/// The nginx configuration the scenario renders (in a placeholder run) names nothing off the
/// machine: refused before any run starts, at the scenario's `file:line` (`targets`).
pub fn check_targets(sc: &Scenario) -> Result<()> {
    let net = resolvelab_scenario::net::Net::assign(sc, 255, 255)?;
    crate::render::http_body(sc, &net).map(|_| ())
}

/// One finished run, judged.
pub struct Judged {
    /// What the runner recorded.
    pub record: RunRecord,
    /// The checker's verdict.
    pub verdict: Verdict,
}

/// A scenario's `[expect] checks` (and each engine's), parsed and their ids checked, at their
/// `file:line`.
pub fn check_expectations(sc: &Scenario) -> Result<()> {
    let lists = std::iter::once((vec!["expect", "checks"], &sc.expect.checks)).chain(
        sc.expect
            .engines
            .iter()
            .map(|(e, c)| (vec!["expect", "engines", e.text.as_str()], c)),
    );
    for (path, checks) in lists {
        for (i, text) in checks.iter().enumerate() {
            resolvelab_diagnose::expect::parse_checked(text).map_err(|e| {
                let idx = i.to_string();
                let mut at = path.clone();
                at.push(&idx);
                anyhow::anyhow!(
                    "{}: scenario `{}`: [{}] check {} `{text}`: {e}; nothing was run",
                    sc.at(&at),
                    sc.name,
                    path[..path.len() - 1].join("."),
                    i + 1
                )
            })?;
        }
    }
    Ok(())
}

/// Run one (already variant-merged) scenario on `engine`, analyze it and write the verdict
/// files into its run directory.
pub fn run_and_judge(sc: &Scenario, opts: &RunOptions, engine: &dyn Engine) -> Result<Judged> {
    check_expectations(sc)?;
    if let Some(why) = crate::engine::not_applicable(sc, engine) {
        anyhow::bail!("{why}");
    }
    let plan = sc.plan(None, opts.scale, opts.seed)?;
    let record = engine.run(&plan, opts)?;
    judge_dir(record)
}

/// Judge a finished run directory (the runner's own `aborted` wins over the checker's status).
pub fn judge_dir(record: RunRecord) -> Result<Judged> {
    judge_dir_by(record, None)
}

/// [`judge_dir`] by today's `checks` instead of the run's own (a reused run).
pub fn judge_dir_by(record: RunRecord, checks: Option<&[String]>) -> Result<Judged> {
    // A third-party proxy's own log is the raw evidence: an earlier run's access log and
    // state events are derived again by today's converter (`run --all --rejudge`, reuse).
    resolvelab_thirdparty::lab::rederive(&record.dir, &record.engine)?;
    let mut verdict = resolvelab_diagnose::run::analyze_run_by(&record.dir, checks)
        .with_context(|| format!("analyzing {}", record.dir.display()))?;
    if record.status == crate::options::RunStatus::Aborted {
        verdict.status = resolvelab_core::evidence::run::VerdictStatus::Aborted;
    }
    resolvelab_report::write_verdict_files(&record.dir, &verdict)?;
    Ok(Judged { record, verdict })
}

/// The longest incident of a judged run, if it had one.
pub fn longest_incident_ms(j: &Judged) -> Option<i64> {
    j.verdict
        .diagnosis
        .incidents
        .iter()
        .map(|i| i.duration_ms)
        .max()
}

/// One line per scenario (and variant) that ran more than once ([`distribution_line`]).
pub type Distributions = Vec<String>;

/// Judge every run directory in `dir` again (after a checker upgrade): the scenarios as they
/// ran, in library order, then variants in file order, repetitions in time order; with the
/// distribution line of every scenario that ran more than once.
pub fn rejudge(dir: &Path) -> Result<(Vec<(Scenario, Judged)>, Distributions)> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read {}", dir.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join(resolvelab_core::evidence::file::RUN).is_file())
        .collect();
    dirs.sort();
    let order: Vec<String> = library::names().into_iter().map(String::from).collect();
    let mut judged = Vec::new();
    for d in dirs {
        let record = RunRecord::read(&d)?;
        let path = d.join(resolvelab_core::evidence::file::SCENARIO);
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let sc = Scenario::from_toml(&text, &path.display().to_string())?;
        judged.push((sc, judge_dir(record)?));
    }
    judged.sort_by_key(|(sc, j)| {
        (
            order
                .iter()
                .position(|n| *n == sc.name)
                .unwrap_or(usize::MAX),
            sc.variant_of.is_some(),
            j.record.started_us,
        )
    });
    let mut groups: Vec<(String, Option<String>)> = judged
        .iter()
        .map(|(sc, _)| (sc.name.clone(), sc.variant_of.clone()))
        .collect();
    groups.dedup();
    let mut distributions = Vec::new();
    for (name, variant) in groups {
        let runs: Vec<&(Scenario, Judged)> = judged
            .iter()
            .filter(|(sc, _)| sc.name == name && sc.variant_of == variant)
            .collect();
        if runs.len() > 1 {
            let durations: Vec<i64> = runs
                .iter()
                .filter_map(|(_, j)| longest_incident_ms(j))
                .collect();
            distributions.push(distribution_line(&runs[0].0, &durations));
        }
    }
    Ok((judged, distributions))
}

/// Every run `--all` meant to make: each scenario's variants times its repetitions.
pub fn expected_runs(
    scenarios: &[Scenario],
    variant: Option<&str>,
    engine: &dyn Engine,
    all: bool,
) -> Result<usize> {
    let mut n = 0;
    for sc in scenarios {
        for v in expand_variants(sc, variant)? {
            if passed_over(&v, engine, variant.is_some(), all).is_none() {
                n += v.repeat.unwrap_or(1).max(1) as usize;
            }
        }
    }
    Ok(n)
}

/// Why a planned run is passed over on `engine`: a run nobody asked for by name (`--all`, or
/// a scenario's variants beside its base, without `--variant`) that does not apply to the
/// engine (`engines = […]`, or what the engine cannot express). A run asked for by name is
/// never passed over: it fails with the reason instead.
pub fn passed_over(
    v: &Scenario,
    engine: &dyn Engine,
    variant_named: bool,
    all: bool,
) -> Option<String> {
    let asked_by_name = variant_named || (!all && v.variant_of.is_none());
    if asked_by_name {
        return None;
    }
    crate::engine::not_applicable(v, engine)
}

/// `rto: longest incident over 5 runs: 2510 / 3120 / 5790 ms … (mean 3800 ms)`.
pub fn distribution_line(sc: &Scenario, durations: &[i64]) -> String {
    let mut d = durations.to_vec();
    d.sort_unstable();
    let mean = if d.is_empty() {
        0.0
    } else {
        d.iter().sum::<i64>() as f64 / d.len() as f64
    };
    let name = match &sc.variant_of {
        Some(v) => format!("{} [{v}]", sc.name),
        None => sc.name.clone(),
    };
    format!(
        "{name}: longest incident over {} runs: {} ms (mean {mean:.0} ms)",
        d.len(),
        d.iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join(" / ")
    )
}

/// The classes a run's incidents were given, for the table. A fleet's incidents are its
/// instances' (the totals hold none): each class with how many instances had it, then what the
/// fleet showed (its readings).
fn classes_text(v: &resolvelab_diagnose::Verdict) -> String {
    let classes = |d: &resolvelab_diagnose::Diagnosis| {
        let mut c: Vec<String> = d.incidents.iter().map(|i| i.class.to_string()).collect();
        c.sort();
        c.dedup();
        c
    };
    let Some(f) = &v.fleet else {
        let c = classes(&v.diagnosis);
        return if c.is_empty() {
            "none".into()
        } else {
            c.join(", ")
        };
    };
    let mut by: BTreeMap<String, usize> = BTreeMap::new();
    for d in f.instances.values() {
        for c in classes(d) {
            *by.entry(c).or_default() += 1;
        }
    }
    let n = f.instances.len();
    let mut parts: Vec<String> = by
        .iter()
        .map(|(c, k)| format!("{c} on {k} of {n} instances"))
        .collect();
    if parts.is_empty() {
        parts.push("none".into());
    }
    let mut readings: Vec<&str> = (f.report.incidents.iter())
        .map(|i| i.reading.kind.id())
        .collect();
    readings.dedup();
    if !readings.is_empty() {
        parts.push(format!("fleet: {}", readings.join(", ")));
    }
    parts.join("; ")
}

/// The reproduction table: the seed's figure, ours, the verdict and the command.
pub fn reproduction_table(
    judged: &[(Scenario, Judged)],
    distributions: &[String],
    command: &str,
) -> String {
    let mut t = String::from("# Reproduction table\n\n");
    t.push_str(&format!(
        "Generated by `{command}` on {} (resolvelab {}). Do not edit by hand.\n\n",
        resolvelab_core::time::rfc3339(resolvelab_core::time::now_us()),
        env!("CARGO_PKG_VERSION"),
    ));
    t.push_str(
        "| scenario | reproduces | seed's figure | ours | expectations | verdict | command |\n",
    );
    t.push_str("|---|---|---|---|---|---|---|\n");
    for (sc, j) in judged {
        let v = &j.verdict;
        let d = &v.diagnosis;
        let name = match &sc.variant_of {
            Some(var) => format!("{} [{var}]", sc.name),
            None => sc.name.clone(),
        };
        let client_errors = v.client.as_ref().map_or(0, |c| c.errors);
        let ours = format!(
            "{} requests, {} client errors, {} NLU ({} 1-hop / {} 2-hop+), {} swaps, re-query {} ms, classes: {}",
            d.requests,
            client_errors,
            d.nlu.total,
            d.nlu.one_hop,
            d.nlu.two_hop + d.nlu.multi_hop,
            d.swaps,
            d.requery_period_ms
                .map_or("-".to_string(), |p| format!("{p:.0}")),
            classes_text(v)
        );
        let mut ours = ours;
        if let Some(c) = &v.client {
            // Slow-dependency runs: what the client and the prober saw of each pooled backend.
            for (n, b) in c
                .backends
                .iter()
                .filter(|(_, b)| b.pool_wait_max_ms.is_some())
            {
                ours += &format!(
                    "; {n}: {:.0}–{:.0} ms, pool wait max {:.0} ms",
                    b.min_ms,
                    b.max_ms,
                    b.pool_wait_max_ms.unwrap_or_default()
                );
            }
            for (n, p) in &c.probes {
                ours += &format!("; /ready of {n}: {}/{} failed", p.failed, p.probes);
            }
        }
        let exp: Vec<String> = v
            .expectations
            .iter()
            .map(|e| {
                format!(
                    "{} `{}` ({})",
                    if e.held { "✔" } else { "✘" },
                    e.text.replace('|', "\\|"),
                    e.measured
                )
            })
            .collect();
        let cmd = match &sc.variant_of {
            Some(var) => format!("`resolvelab run {} --variant {var}`", sc.name),
            None => format!("`resolvelab run {} --variant base`", sc.name),
        };
        t.push_str(&format!(
            "| {name} | {} | {} | {ours} | {} | {} | {cmd} |\n",
            sc.reproduces,
            sc.seed_figure.replace('|', "\\|"),
            exp.join("<br>"),
            if v.passed() {
                "reproduced"
            } else {
                v.status.as_str()
            },
        ));
    }
    if !distributions.is_empty() {
        t.push_str("\n## Distributions (`repeat = N`)\n\n");
        for d in distributions {
            t.push_str(&format!("- {d}\n"));
        }
    }
    t.push_str("\n## Not reproduced in this run\n\n");
    let failed: Vec<&(Scenario, Judged)> =
        judged.iter().filter(|(_, j)| !j.verdict.passed()).collect();
    if failed.is_empty() {
        t.push_str("Every expectation of every scenario held.\n");
    }
    for (sc, j) in failed {
        let name = match &sc.variant_of {
            Some(var) => format!("{} [{var}]", sc.name),
            None => sc.name.clone(),
        };
        t.push_str(&format!(
            "- **{name}** — {}: {}\n",
            j.verdict.status, j.verdict.summary
        ));
        for e in j.verdict.expectations.iter().filter(|e| !e.held) {
            t.push_str(&format!("  - `{}` measured {}\n", e.text, e.measured));
        }
        t.push_str(&format!("  - evidence: `{}`\n", j.record.dir.display()));
    }
    t
}
