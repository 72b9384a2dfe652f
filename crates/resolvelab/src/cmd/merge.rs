//! `resolvelab merge`: one report over a fleet from its instances' partials.

use crate::Ctx;
use resolvelab_diagnose::fleet::{Fleet, Partial};
use resolvelab_report::{Format, render_fleet};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Arguments of `resolvelab merge`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  resolvelab diagnose --instance web-1 --access web-1/access.log --error web-1/error.log \\
      --partial parts/web-1.json
  resolvelab merge parts/*.json --format html -o fleet.html
  ls logs | xargs -P 4 -I{} resolvelab diagnose --instance {} \\
      --access logs/{}/access.log --error logs/{}/error.log --partial parts/{}.json
  resolvelab merge parts/*.json --partial fleet.partial.json   # a tree of merges

A partial (resolvelab.partial/v1) holds one or more instances' diagnoses; merging is their union by
instance name, in any order or grouping, so `merge a b c` and `merge (merge a b) c` report the same.
An instance in two partials is refused (time slices of one instance are not merged yet), and so is
a partial written by another resolvelab version.

The report lists the instances side by side, draws their failures on one time axis, and groups the
instances' incidents on one upstream that overlap in time into fleet incidents, each with what only
the fleet shows: windows starting staggered within one re-query period are one DNS answer change
met at each instance's own re-query; windows starting at one instant point at what the instances
share (the backend); a failure on one instance while others served is local to it. Each reading
gives its numbers, and is `undetermined` when they do not decide.

Exit status: 0 = merged; 1 = a class named by --fail-on was found on an instance; 2 = a usage
error, an unreadable or refused partial; 3 = no instance could be diagnosed.")]
pub struct Args {
    /// Partial files (`resolvelab diagnose … --partial FILE`, or an earlier `merge --partial`).
    #[arg(required = true, value_name = "PARTIAL")]
    partials: Vec<PathBuf>,
    /// Output format: md, json or html.
    #[arg(long, default_value = "md", value_name = "md|json|html")]
    format: Format,
    /// Write the report to FILE instead of stdout.
    #[arg(short = 'o', long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Also write the merged partial (to merge further); the report is then written only
    /// with -o.
    #[arg(long, value_name = "FILE")]
    partial: Option<PathBuf>,
    /// Exit with status 1 when any of these classes is found on any instance.
    #[arg(long, value_name = "CLASS", num_args = 1.., value_delimiter = ',')]
    fail_on: Vec<String>,
}

/// Run `resolvelab merge`.
pub fn run(args: Args, _ctx: &Ctx) -> anyhow::Result<ExitCode> {
    crate::cmd::diagnose::check_classes(&args.fail_on)?;
    let mut all: Option<Partial> = None;
    for path in &args.partials {
        let p = Partial::read(path)?;
        all = Some(match all {
            None => p,
            Some(a) => a
                .merge(p)
                .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?,
        });
    }
    let all = all.expect("clap requires one partial");
    report(
        &all,
        args.format,
        args.output.as_deref(),
        args.partial.as_deref(),
        &args.fail_on,
    )
}

/// Write the fleet report of `all` (and the partial, when asked) and say the exit status.
pub(crate) fn report(
    all: &Partial,
    format: Format,
    output: Option<&Path>,
    partial: Option<&Path>,
    fail_on: &[String],
) -> anyhow::Result<ExitCode> {
    if let Some(to) = partial {
        crate::cmd::diagnose::write_file(to, &all.to_json())?;
    }
    let fleet = Fleet::of(all);
    let text = render_fleet(&fleet, format)?;
    crate::cmd::diagnose::emit(output, partial.is_some(), &text)?;
    if fleet.instances.iter().all(|i| i.unusable.is_some()) {
        eprintln!("resolvelab: no instance could be diagnosed; see each instance's row");
        return Ok(ExitCode::from(3));
    }
    let found = fleet.found(fail_on);
    if !found.is_empty() {
        eprintln!("resolvelab: found {} (--fail-on)", found.join(", "));
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}
