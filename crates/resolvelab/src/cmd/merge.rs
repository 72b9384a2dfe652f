//! `resolvelab merge`: one report over a fleet from its instances' partials.

use crate::Ctx;
use resolvelab_diagnose::fleet::{Fleet, Merge};
use resolvelab_report::{Format, write_fleet};
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
  # one instance in hourly slices (each slice reads the logs around it as context):
  for h in 0 1 2; do resolvelab diagnose --instance web-1 --access access.log \\
      --since 2026-12-06T0$h:00:00Z --until 2026-12-06T0$((h+1)):00:00Z \\
      --partial parts/web-1-$h.json; done

A partial (resolvelab.partial/v1) holds one or more instances' diagnoses; merging is their union by
instance name, in any order or grouping, so `merge a b c` and `merge (merge a b) c` report the same.
An instance in several partials is its time slices (`diagnose --since T --until T`), joined into
one diagnosis when each slice's --until is the next one's --since; without ranges, or with a gap or
an overlap, it is refused, and so is a partial written by another resolvelab version.

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
    #[command(flatten)]
    out: crate::cmd::diagnose::Out,
    /// Exit with status 1 when any of these classes is found on any instance.
    #[arg(long, value_name = "CLASS", num_args = 1.., value_delimiter = ',')]
    fail_on: Vec<String>,
}

/// Run `resolvelab merge`.
pub fn run(args: Args, _ctx: &Ctx) -> anyhow::Result<ExitCode> {
    crate::cmd::diagnose::check_classes(&args.fail_on)?;
    let mut m = Merge::new();
    for (k, path) in args.partials.iter().enumerate() {
        resolvelab_core::progress::status(format!(
            "reading partial {}/{}: {}",
            k + 1,
            args.partials.len(),
            path.display()
        ));
        m.add(path)?;
    }
    resolvelab_core::progress::end_status();
    if let Some(to) = &args.out.partial {
        let f = std::fs::File::create(to)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", to.display()))?;
        let mut w = std::io::BufWriter::new(f);
        m.write_partial(&mut w)?;
        std::io::Write::flush(&mut w)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", to.display()))?;
    }
    report(
        &m.fleet()?,
        args.out.format,
        args.out.output.as_deref(),
        args.out.partial.is_some(),
        &args.fail_on,
    )
}

/// Write the report to `-o`, else to stdout unless a partial was the output asked for.
fn write_report(
    fleet: &Fleet,
    format: Format,
    output: Option<&Path>,
    partial_written: bool,
) -> anyhow::Result<()> {
    use std::io::Write;
    match (output, partial_written) {
        (Some(p), _) => {
            let cannot =
                |e: &dyn std::fmt::Display| anyhow::anyhow!("cannot write {}: {e}", p.display());
            let mut w = std::io::BufWriter::new(std::fs::File::create(p).map_err(|e| cannot(&e))?);
            write_fleet(fleet, format, &mut w).map_err(|e| cannot(&e))?;
            w.flush().map_err(|e| cannot(&e))?;
        }
        (None, true) => {}
        (None, false) => {
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            // A closed pipe (`| head`) is not an error worth a message.
            let _ = write_fleet(fleet, format, &mut out).and_then(|()| Ok(out.flush()?));
        }
    }
    Ok(())
}

/// Write the fleet report and say the exit status.
pub(crate) fn report(
    fleet: &Fleet,
    format: Format,
    output: Option<&Path>,
    partial_written: bool,
    fail_on: &[String],
) -> anyhow::Result<ExitCode> {
    write_report(fleet, format, output, partial_written)?;
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
