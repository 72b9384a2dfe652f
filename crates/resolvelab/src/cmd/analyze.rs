//! `resolvelab analyze RUN_DIR`: re-check a lab run and write its verdict.

use crate::Ctx;
use resolvelab_core::evidence::run::VerdictStatus;
use resolvelab_report::{Format, render_verdict, write_verdict_files};
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `resolvelab analyze`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  resolvelab analyze runs/dns-nxdomain-20261130T060000Z
  resolvelab analyze runs/generation-race-20261130T060000Z --format json --no-write

Reads expect.json (the checks, written when the run started), nginx.conf (log_format), access.log, error.log, dns.jsonl,
events.jsonl and load.jsonl; writes verdict.md, verdict.json and verdict.html into RUN_DIR and prints
the verdict. Exit status: 0 = completed and every expectation held, 1 = an expectation did not hold,
3 = not interpretable (an injection never hit, or one meant to miss hit), aborted or incomplete.")]
pub struct Args {
    /// The run directory.
    #[arg(value_name = "RUN_DIR")]
    dir: PathBuf,
    /// What to print: md, json or html.
    #[arg(long, default_value = "md", value_name = "md|json|html")]
    format: Format,
    /// Do not write verdict.{md,json,html} into the run directory.
    #[arg(long)]
    no_write: bool,
}

/// Run `resolvelab analyze`.
pub fn run(args: Args, _ctx: &Ctx) -> anyhow::Result<ExitCode> {
    use resolvelab_core::evidence::file;
    if !args.dir.join(file::EXPECT).exists() && args.dir.join(file::SCENARIO).exists() {
        eprintln!(
            "note: {} has no {} (a run recorded before 2026-12-02): its scenario's expectations are not judged",
            args.dir.display(),
            file::EXPECT
        );
    }
    let v = resolvelab_diagnose::analyze_run(&args.dir)?;
    if !args.no_write {
        write_verdict_files(&args.dir, &v)?;
    }
    let text = render_verdict(&v, args.format)?;
    {
        use std::io::Write;
        let _ = std::io::stdout().lock().write_all(text.as_bytes());
    }
    Ok(if v.status != VerdictStatus::Completed {
        ExitCode::from(3)
    } else if v.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
