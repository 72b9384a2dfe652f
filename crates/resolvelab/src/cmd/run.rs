//! `resolvelab run` — play a scenario (built-in or a file) against a real nginx and judge it.

use crate::Ctx;
use anyhow::{Context, Result};
use resolvelab_diagnose::Verdict;
use resolvelab_scenario::runner::{self, INTERRUPTED, RunOptions, RunRecord};
use resolvelab_scenario::{Scenario, library};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::Ordering;

/// Arguments of `resolvelab run`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  resolvelab run --list\n  \
resolvelab run generation-race                 # base run and every variant\n  \
resolvelab run nxdomain --variant valid30-aligned\n  \
resolvelab run dual-resolve --scale 0.5 --seed 7\n  \
resolvelab run ./my-scenario.toml --out /tmp/runs\n  \
resolvelab run --all --scale 0.5 --table docs/REPRODUCTION.md\n\n\
Each run leaves runs/<scenario>-<UTC stamp>/ with scenario.toml, fingerprint.json, nginx.conf, \
access.log, error.log, dns.jsonl, events.jsonl, load.jsonl and verdict.{md,json,html}.\n\
Exit status: 0 every expectation held, 1 some did not (or the run was not interpretable), 2 error.")]
pub struct Args {
    /// A built-in scenario id (see --list) or a path to a scenario .toml file.
    scenario: Option<String>,
    /// List the built-in scenarios with the question each answers.
    #[arg(long, conflicts_with = "scenario")]
    list: bool,
    /// Run every built-in scenario (and its variants) and write a summary table.
    #[arg(long, conflicts_with = "scenario")]
    all: bool,
    /// Run only this variant (`base` for the scenario without variants).
    #[arg(long)]
    variant: Option<String>,
    /// Shorten durations, rates and timeline times by this factor (valid/fail_timeout stay real).
    #[arg(long, default_value_t = 1.0)]
    scale: f64,
    /// Seed of every RNG in the run (default: the scenario's, else 1).
    #[arg(long)]
    seed: Option<u64>,
    /// Parent directory of run directories.
    #[arg(long, default_value = "runs")]
    out: PathBuf,
    /// Engine: `nginx` (the real binary) or `sim` (the deterministic model).
    #[arg(long, default_value = "nginx", value_parser = ["nginx", "sim"])]
    engine: String,
    /// Pin the run's loopback /24 to 127.A.B.0/24 (default: random per run).
    #[arg(long, value_name = "A.B")]
    net: Option<String>,
    /// With --all: also write the summary table to this Markdown file.
    #[arg(long)]
    table: Option<PathBuf>,
    /// With --all: run nothing; re-judge the run directories already in this directory (e.g. after
    /// a checker upgrade) and rebuild the summary table from them.
    #[arg(long, value_name = "DIR", requires = "all")]
    rejudge: Option<PathBuf>,
    /// Print no progress lines.
    #[arg(long, short)]
    quiet: bool,
}

extern "C" fn on_signal(_: libc::c_int) {
    // Only an atomic store: async-signal-safe. The runner notices within a second, stops the
    // load and still writes a complete run directory marked aborted.
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Route Ctrl-C, SIGTERM and SIGHUP (a closed terminal or ssh session) to the runner's
/// `INTERRUPTED` flag: the run ends as `aborted`, with a complete directory.
pub fn install_signal_handlers() {
    // SAFETY: the handler only performs an atomic store.
    unsafe {
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            libc::signal(sig, on_signal as *const () as libc::sighandler_t);
        }
    }
}

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
fn expand_variants(sc: &Scenario, only: Option<&str>) -> Result<Vec<Scenario>> {
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

/// One finished run, judged.
pub struct Judged {
    /// What the runner recorded.
    pub record: RunRecord,
    /// The checker's verdict.
    pub verdict: Verdict,
}

/// A scenario's `[expect] checks`, parsed and their ids checked, at their `file:line`.
fn check_expectations(sc: &Scenario) -> Result<()> {
    for (i, text) in sc.expect.checks.iter().enumerate() {
        resolvelab_diagnose::expect::parse_checked(text).map_err(|e| {
            anyhow::anyhow!(
                "{}: scenario `{}`: [expect] check {} `{text}`: {e}; nothing was run",
                sc.at(&["expect", "checks", &i.to_string()]),
                sc.name,
                i + 1
            )
        })?;
    }
    Ok(())
}

/// Run one (already variant-merged) scenario, analyze it and write the verdict files.
pub fn run_and_judge(sc: &Scenario, opts: &RunOptions, engine: &str) -> Result<Judged> {
    check_expectations(sc)?;
    let record = match engine {
        "sim" => resolvelab_scenario::simrun::run(sc, opts)?,
        _ => runner::run(sc, opts)?,
    };
    let mut verdict = resolvelab_diagnose::analyze_run(&record.dir)
        .with_context(|| format!("analyzing {}", record.dir.display()))?;
    if record.status == "aborted" {
        verdict.status = "aborted".into();
    }
    resolvelab_report::write_verdict_files(&record.dir, &verdict)?;
    Ok(Judged { record, verdict })
}

fn print_verdict(j: &Judged) {
    let v = &j.verdict;
    let name = match &j.record.variant {
        Some(var) => format!("{} [{var}]", j.record.scenario),
        None => j.record.scenario.clone(),
    };
    println!(
        "{name}: {} — {} ({} requests, {} NLU)",
        v.status, v.summary, v.diagnosis.requests, v.diagnosis.nlu.total
    );
    for e in &v.expectations {
        println!(
            "  [{}] {}  — measured: {}",
            if e.held { "held" } else { "NOT held" },
            e.text,
            e.measured
        );
    }
    println!(
        "  report: {}",
        j.record
            .dir
            .join(resolvelab_core::evidence::file::VERDICT_HTML)
            .display()
    );
}

/// Run `resolvelab run`.
pub fn run(args: Args, ctx: &Ctx) -> Result<ExitCode> {
    if args.list {
        for sc in library::all()? {
            let vars = sc.variant_names();
            let vars = if vars.is_empty() {
                String::new()
            } else {
                format!(" [variants: {}]", vars.join(", "))
            };
            println!("{:<24} {}{vars}", sc.name, sc.question);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let net = match &args.net {
        None => None,
        Some(s) => {
            let (a, b) = s
                .split_once('.')
                .and_then(|(a, b)| Some((a.parse::<u8>().ok()?, b.parse::<u8>().ok()?)))
                .ok_or_else(|| {
                    anyhow::anyhow!("--net {s}: expected A.B (the run uses 127.A.B.0/24)")
                })?;
            Some((a, b))
        }
    };
    let opts = RunOptions {
        out: args.out.clone(),
        seed: args.seed,
        scale: args.scale,
        nginx: ctx.nginx.clone(),
        net,
        progress: !args.quiet,
    };
    install_signal_handlers();
    if let Some(dir) = &args.rejudge {
        return rejudge(dir, &args);
    }
    let scenarios: Vec<Scenario> = if args.all {
        library::all()?
            .into_iter()
            .filter(|s| s.name != "demo")
            .collect()
    } else {
        let Some(name) = &args.scenario else {
            anyhow::bail!("name a scenario (see `resolvelab run --list`), or pass --all");
        };
        vec![load_scenario(name)?]
    };
    // Every run's expectations are checked before the first one starts: a typo costs no run.
    let mut planned = Vec::new();
    for sc in &scenarios {
        for v in expand_variants(sc, args.variant.as_deref())? {
            check_expectations(&v)?;
            planned.push(v);
        }
    }
    let mut judged = Vec::new();
    let mut distributions = Vec::new();
    let mut all_held = true;
    for v in planned {
        // `repeat = N`: the same scenario N times with seeds seed, seed+1, … for a distribution.
        let reps = v.repeat.unwrap_or(1).max(1);
        let base_seed = opts.seed.or(v.seed).unwrap_or(1);
        let mut durations = Vec::new();
        for r in 0..reps {
            if INTERRUPTED.load(Ordering::SeqCst) {
                break;
            }
            let o = RunOptions {
                seed: Some(base_seed + u64::from(r)),
                ..opts.clone()
            };
            match run_and_judge(&v, &o, &args.engine) {
                Ok(j) => {
                    print_verdict(&j);
                    all_held &= j.verdict.passed();
                    if let Some(d) = j
                        .verdict
                        .diagnosis
                        .incidents
                        .iter()
                        .map(|i| i.duration_ms)
                        .max()
                    {
                        durations.push(d);
                    }
                    judged.push((v.clone(), j));
                }
                Err(e) if args.all => {
                    eprintln!("error: {}: {e:#}", v.name);
                    all_held = false;
                }
                Err(e) => return Err(e),
            }
        }
        if reps > 1 {
            let line = distribution_line(&v, &durations);
            println!("{line}");
            distributions.push(line);
        }
    }
    if args.all {
        let command = format!(
            "resolvelab run --all --scale {} --engine {}",
            opts.scale, args.engine
        );
        let table = summary_table(&judged, &distributions, &command);
        std::fs::create_dir_all(&args.out)?;
        let whole = !INTERRUPTED.load(Ordering::SeqCst)
            && judged.len() == expected_runs(&scenarios, args.variant.as_deref())?;
        write_tables(
            &args.out.join("summary.md"),
            args.table.as_deref(),
            &table,
            whole,
        )?;
    }
    Ok(if all_held {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Every run `--all` meant to make: each scenario's variants times its repetitions.
fn expected_runs(scenarios: &[Scenario], variant: Option<&str>) -> Result<usize> {
    let mut n = 0;
    for sc in scenarios {
        for v in expand_variants(sc, variant)? {
            n += v.repeat.unwrap_or(1).max(1) as usize;
        }
    }
    Ok(n)
}

/// The run's own summary, and `--table FILE` — replaced only by a table of the whole library;
/// an interrupted or partial one goes beside it as `FILE.partial.md`, the committed table
/// untouched.
fn write_tables(summary: &Path, table_arg: Option<&Path>, table: &str, whole: bool) -> Result<()> {
    resolvelab_core::rundir::write_atomic(summary, table.as_bytes())?;
    println!("summary table: {}", summary.display());
    if let Some(t) = table_arg {
        let target = if whole {
            t.to_path_buf()
        } else {
            let name = t
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let p = t.with_file_name(format!("{}.partial.md", name.trim_end_matches(".md")));
            eprintln!(
                "warning: not every run of the library completed: {} left as it is, this table is {}",
                t.display(),
                p.display()
            );
            p
        };
        resolvelab_core::rundir::write_atomic(&target, table.as_bytes())?;
        println!("summary table: {}", target.display());
    }
    Ok(())
}

/// `run --all --rejudge DIR`: judge existing run directories again and rebuild the table.
fn rejudge(dir: &Path, args: &Args) -> Result<ExitCode> {
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
        let text = std::fs::read_to_string(d.join(resolvelab_core::evidence::file::SCENARIO))?;
        let sc = Scenario::from_toml(
            &text,
            &d.join(resolvelab_core::evidence::file::SCENARIO)
                .display()
                .to_string(),
        )?;
        let mut verdict = resolvelab_diagnose::analyze_run(&d)?;
        if record.status == "aborted" {
            verdict.status = "aborted".into();
        }
        resolvelab_report::write_verdict_files(&d, &verdict)?;
        let j = Judged { record, verdict };
        print_verdict(&j);
        judged.push((sc, j));
    }
    // Library order, then variants in file order, repetitions in time order.
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
    let mut distributions = Vec::new();
    let mut groups: Vec<(String, Option<String>)> = judged
        .iter()
        .map(|(sc, _)| (sc.name.clone(), sc.variant_of.clone()))
        .collect();
    groups.dedup();
    for (name, variant) in groups {
        let runs: Vec<&(Scenario, Judged)> = judged
            .iter()
            .filter(|(sc, _)| sc.name == name && sc.variant_of == variant)
            .collect();
        if runs.len() > 1 {
            let durations: Vec<i64> = runs
                .iter()
                .filter_map(|(_, j)| {
                    j.verdict
                        .diagnosis
                        .incidents
                        .iter()
                        .map(|i| i.duration_ms)
                        .max()
                })
                .collect();
            let line = distribution_line(&runs[0].0, &durations);
            println!("{line}");
            distributions.push(line);
        }
    }
    let command = format!("resolvelab run --all --rejudge {}", dir.display());
    let table = summary_table(&judged, &distributions, &command);
    let whole = judged.iter().all(|(_, j)| j.record.status == "completed");
    write_tables(
        &dir.join("summary.md"),
        args.table.as_deref(),
        &table,
        whole,
    )?;
    let all = judged.iter().all(|(_, j)| j.verdict.passed());
    Ok(if all {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// `rto: longest incident over 5 runs: 2510 / 3120 / 5790 ms … (mean 3800 ms)`.
fn distribution_line(sc: &Scenario, durations: &[i64]) -> String {
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

/// The reproduction table: the seed's figure, ours, the verdict and the command.
fn summary_table(judged: &[(Scenario, Judged)], distributions: &[String], command: &str) -> String {
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
            {
                let mut c: Vec<String> = d.incidents.iter().map(|i| i.class.clone()).collect();
                c.sort();
                c.dedup();
                if c.is_empty() {
                    "none".into()
                } else {
                    c.join(", ")
                }
            }
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
