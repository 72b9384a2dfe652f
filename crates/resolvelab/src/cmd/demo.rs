//! `resolvelab demo` — the README's first command: a short real reproduction with nginx.

use crate::Ctx;
use resolvelab_lab::options::RunOptions;
use resolvelab_lab::{engine, judge};
use resolvelab_scenario::library;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `resolvelab demo`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Builds nginx 1.28 from the nginx-src crate on first use (cached), then runs the \
built-in `demo` scenario (~1 minute): a GSLB-style name alternating between two backends whose \
keep-alive connections are reclaimed (the generation race), then a 1.5 s NXDOMAIN armed at nginx's \
next re-query (an outage of one full 3 s period). It prints the verdict and where the report is.\n\nExamples:\n  resolvelab demo\n  \
resolvelab demo --out /tmp/runs --seed 7"
)]
pub struct Args {
    /// Parent directory of the run directory.
    #[arg(long, default_value = "runs")]
    out: PathBuf,
    /// RNG seed.
    #[arg(long)]
    seed: Option<u64>,
}

/// Run `resolvelab demo`.
pub fn run(args: Args, ctx: &Ctx) -> anyhow::Result<ExitCode> {
    let sc = library::get("demo")?;
    println!("resolvelab demo: {}\n", sc.question);
    let opts = RunOptions {
        out: args.out,
        seed: args.seed,
        ..ctx.run_options()
    };
    crate::cmd::run::install_signal_handlers();
    let j = judge::run_and_judge(&sc, &opts, &engine::NGINX_1_28)?;
    let v = &j.verdict;
    println!();
    println!("verdict: {} — {}", v.status, v.summary);
    for e in &v.expectations {
        println!(
            "  [{}] {} — measured: {}",
            if e.held { "held" } else { "NOT held" },
            e.text,
            e.measured
        );
    }
    println!();
    for i in &v.diagnosis.incidents {
        println!(
            "  incident {:<26} {:>6} failed requests over {:>6} ms, {:.0}% of requests in the window",
            i.class,
            i.count,
            i.duration_ms,
            i.share_failed * 100.0
        );
    }
    println!("\nrun directory: {}", j.record.dir.display());
    println!(
        "report:        {}",
        j.record
            .dir
            .join(resolvelab_core::evidence::file::VERDICT_HTML)
            .display()
    );
    println!(
        "re-check with: resolvelab analyze {}",
        j.record.dir.display()
    );
    Ok(if v.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
