//! `resolvelab compare` — one scenario on several engines (nginx releases, HAProxy, Envoy,
//! Caddy, the model), side by side.

use crate::Ctx;
use anyhow::Result;
use resolvelab_lab::compare::{self, Comparison};
use resolvelab_lab::engine;
use resolvelab_lab::judge;
use resolvelab_lab::options::RunOptions;
use resolvelab_lab::runner::INTERRUPTED;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::Ordering;

/// Arguments of `resolvelab compare`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  resolvelab compare nxdomain                        # the five real engines (--engines)\n  \
resolvelab compare generation-race --engines nginx,nginx-1.31,sim\n  \
resolvelab compare nxdomain --variant nx40s         # longer than HAProxy's hold nx 30s\n  \
resolvelab compare nxdomain --variant valid30-aligned --format json\n  \
resolvelab compare --all --table docs/COMPARISON-RUNS.md\n  \
resolvelab compare nxdomain --engines nginx,haproxy --repeat 3   # each cell from 3 seeds\n  \
resolvelab compare nxdomain --repeat 3 --table docs/COMPARISON-REPEATS.md --add  # adds a section\n  \
resolvelab compare --all --repeat 3 --table REPEATS.md --add --skip-done  # resumes\n  \
resolvelab compare stale-address --engines nginx,sim --table docs/STALE-ADDRESS.md\n  \
resolvelab --engine-bin nginx-1.31=/opt/nginx/sbin/nginx compare swap-only\n\n\
Each engine plays the same scenario (DNS timeline, backends, faults, load, seed) into \
<out>/<engine>/<run>/, the one checker judges every run, and the side-by-side verdict goes to \
stdout and to <out>/comparison.{md,json,html} (the page shows each engine's configuration). A scenario's expectations were written for nginx 1.28: \
one that does not hold on another engine is a finding, shown in the table, not a failure.\n\
Exit status: 0 every engine ran, 1 some engine could not run or left no interpretable run, 2 error."
)]
pub struct Args {
    /// A built-in scenario id (see `resolvelab run --list`) or a path to a scenario .toml file.
    scenario: Option<String>,
    /// Compare every built-in scenario (and its variants).
    #[arg(long, conflicts_with = "scenario")]
    all: bool,
    /// Only this variant (`base` for the scenario without variants).
    #[arg(long)]
    variant: Option<String>,
    /// The engines, comma-separated (see `resolvelab run --help` for the ids).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "nginx,nginx-1.31,haproxy,envoy,caddy"
    )]
    engines: Vec<String>,
    /// Shorten durations, rates and timeline times by this factor (valid/fail_timeout stay real).
    #[arg(long, default_value_t = 1.0)]
    scale: f64,
    /// Seed of every RNG in every run (default: the scenario's, else 1).
    #[arg(long)]
    seed: Option<u64>,
    /// Play every cell N times, with the seeds seed, seed+1, …; the table shows each figure's
    /// spread over the runs (min–max, median) and says where the runs disagree in direction.
    #[arg(long, default_value_t = 1, value_name = "N",
        value_parser = clap::value_parser!(u32).range(1..=20))]
    repeat: u32,
    /// Parent directory of the runs, one sub-directory per engine.
    #[arg(long, default_value = "runs/compare")]
    out: PathBuf,
    /// What to print: `md` (Markdown tables), `json`, or `html` (one self-contained page with
    /// each engine's configuration). All three are also written to <out>/comparison.*.
    #[arg(long, default_value = "md", value_parser = ["md", "json", "html"])]
    format: String,
    /// Also write the comparison into this Markdown page between its generated markers,
    /// keeping the hand-written findings (with --all: only when every run completed).
    #[arg(long)]
    table: Option<PathBuf>,
    /// With --table: add these sections to the page instead of writing it anew — each
    /// scenario (variant) as soon as all its engines ran, its engines' rows replacing theirs,
    /// every other section and row kept (the runs behind the page are kept beside it as
    /// PAGE.json). Sessions fill one page scenario by scenario; a stopped one keeps what ran.
    #[arg(long, requires = "table")]
    add: bool,
    /// With --add: pass over the sections the page already holds with every engine played
    /// --repeat times (or not applicable), so a stopped sitting resumes where it stopped.
    #[arg(long, requires = "add")]
    skip_done: bool,
    /// Take ENGINE's runs from DIR (a `run --all --out` directory) where one there played
    /// exactly the same scenario to completion, judged again instead of played again
    /// (repeatable), e.g. `--reuse nginx=runs/all`.
    #[arg(long, value_name = "ENGINE=DIR", value_parser = parse_reuse)]
    reuse: Vec<(String, PathBuf)>,
    /// Print no progress lines.
    #[arg(long, short)]
    quiet: bool,
}

fn parse_reuse(s: &str) -> Result<(String, PathBuf), String> {
    let (name, dir) = s
        .split_once('=')
        .ok_or_else(|| format!("`{s}`: expected ENGINE=DIR, e.g. nginx=runs/all"))?;
    let e = engine::by_name(name).map_err(|e| e.to_string())?;
    Ok((e.id().to_string(), PathBuf::from(dir)))
}

/// Run `resolvelab compare`.
pub fn run(args: Args, ctx: &Ctx) -> Result<ExitCode> {
    let engines = args
        .engines
        .iter()
        .map(|e| engine::by_name(e.trim()))
        .collect::<Result<Vec<_>>>()?;
    let engine_ids: Vec<_> = engines.iter().map(|e| e.id()).collect();
    let ids: Vec<&str> = engines.iter().map(|e| e.id().as_str()).collect();
    let planned = judge::planned(
        &judge::selected(args.all, args.scenario.as_deref())?,
        args.variant.as_deref(),
    )?;
    let opts = RunOptions {
        out: args.out.clone(),
        seed: args.seed,
        scale: args.scale,
        progress: !args.quiet,
        ..ctx.run_options()
    };
    crate::cmd::run::install_signal_handlers();
    // The page's sections in the library's order, whatever order sessions add them in.
    let order: Vec<String> = match args.add {
        true => judge::planned(&judge::selected(true, None)?, None)?
            .iter()
            .map(|sc| match &sc.variant_of {
                Some(v) => format!("{} [{v}]", sc.name),
                None => sc.name.clone(),
            })
            .collect(),
        false => Vec::new(),
    };
    // A page the table cannot go into is said now, not after the runs.
    if let Some(t) = &args.table {
        resolvelab_report::check_generated_page(t)?;
    }
    let mut kept = match (&args.table, args.add) {
        (Some(t), true) => compare::read_kept(t)?,
        _ => Vec::new(),
    };
    let mut done: Vec<Comparison> = Vec::new();
    let mut passed_over = 0;
    for sc in &planned {
        if INTERRUPTED.load(Ordering::SeqCst) {
            break;
        }
        let title = match &sc.variant_of {
            Some(v) => format!("{} [{v}]", sc.name),
            None => sc.name.clone(),
        };
        if args.skip_done && compare::is_done(&kept, &title, &engine_ids, args.repeat) {
            eprintln!(
                "compare {title}: already on the page with {} runs per engine: passed over (--skip-done)",
                args.repeat
            );
            passed_over += 1;
            continue;
        }
        let reuse = args.reuse.iter().cloned().collect();
        let c = compare::compare_reusing(
            sc,
            &opts,
            &engines,
            &reuse,
            args.repeat,
            &mut |cell, seed| {
                if args.quiet {
                    return;
                }
                if let Some(why) = &cell.not_applicable {
                    eprintln!("compare {title}: {}: not applicable — {why}", cell.engine);
                    return;
                }
                // Each of N repeats is one line: which seed it played tells them apart.
                let seeded = if args.repeat > 1 {
                    format!(" (seed {seed})")
                } else {
                    String::new()
                };
                eprintln!(
                    "compare {title}: {} {}{seeded}: {} client errors of {} requests, {} NLU, {}/{} expectations held{}",
                    cell.engine,
                    cell.version,
                    cell.client_errors,
                    cell.requests,
                    cell.nlu,
                    cell.held,
                    cell.checks,
                    cell.error
                        .as_deref()
                        .map_or(String::new(), |e| format!(" — could not run: {e}"))
                );
            },
        );
        if let (true, Some(t)) = (args.add, &args.table) {
            if c.all_ran() && !INTERRUPTED.load(Ordering::SeqCst) {
                let what = format!("SCENARIO [--variant V] --repeat {} --add", args.repeat);
                compare::add_to_page(t, &mut kept, &c, &order, &what)?;
                eprintln!("compare {title}: added to {}", t.display());
            } else {
                eprintln!(
                    "warning: compare {title}: not every engine ran: not added to {} (the runs are in {})",
                    t.display(),
                    args.out.display()
                );
            }
        }
        done.push(c);
    }
    let md = compare::markdown(&done);
    let json = serde_json::to_string_pretty(&done)?;
    std::fs::create_dir_all(&args.out)?;
    resolvelab_core::rundir::write_atomic(&args.out.join("comparison.md"), md.as_bytes())?;
    resolvelab_core::rundir::write_atomic(&args.out.join("comparison.json"), json.as_bytes())?;
    let html = compare::html(&done);
    resolvelab_core::rundir::write_atomic(&args.out.join("comparison.html"), html.as_bytes())?;
    match args.format.as_str() {
        "json" => println!("{json}"),
        "html" => print!("{html}"),
        _ => print!("{md}"),
    }
    let whole = !INTERRUPTED.load(Ordering::SeqCst) && done.len() + passed_over == planned.len();
    let all_ran = done.iter().all(Comparison::all_ran);
    if let Some(t) = args.table.as_ref().filter(|_| !args.add) {
        if whole && (all_ran || !args.all) {
            let mut what = match (args.all, args.scenario.as_deref()) {
                (false, Some(sc)) => sc.to_string(),
                _ => "--all".to_string(),
            };
            if args.repeat > 1 {
                what.push_str(&format!(" --repeat {}", args.repeat));
            }
            compare::update_page(t, &done, &what, &ids)?;
            eprintln!("comparison written into {}", t.display());
        } else {
            eprintln!(
                "warning: not every run completed: {} left as it is (the runs are in {})",
                t.display(),
                args.out.display()
            );
        }
    }
    Ok(if all_ran && whole {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
