//! `resolvelab diagnose`: explain every 502 in production nginx logs.

use crate::Ctx;
use resolvelab_diagnose::Options;
use resolvelab_history::logformat::{self, LogFormat};
use resolvelab_report::{Format, render_diagnosis};
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `resolvelab diagnose`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  resolvelab diagnose --access /var/log/nginx/access.log --error /var/log/nginx/error.log
  resolvelab diagnose --access access.log.2.gz access.log.1 access.log --error error.log upstream-errors.log \\
      --nginx-conf <(nginx -T) --log-format-name main --format html -o report.html
  resolvelab diagnose --access access.log --log-format '$msec $status \"$upstream_addr\" \"$request\"' \\
      --error error.log --tz-offset +09:00 --upstream be --format json

Access logs are parsed with your own log_format (--log-format TEXT, or --nginx-conf FILE with
--log-format-name NAME; nginx's `combined` by default). Add $upstream_addr, $msec and $connection
to your format for the best diagnosis. Rotated and .gz files are merged in time order; pass every
error_log destination (`nginx -T | grep error_log`). Error-log times are local: the offset comes from
$time_local, else --tz-offset, else this machine's offset.")]
pub struct Args {
    /// Access log files (several allowed: rotations, several servers; .gz read transparently).
    #[arg(long, required = true, num_args = 1.., value_name = "FILE")]
    access: Vec<PathBuf>,
    /// Error log files (every error_log destination).
    #[arg(long, num_args = 1.., value_name = "FILE")]
    error: Vec<PathBuf>,
    /// DNS query log (resolvelab.dns/v1 JSON Lines) for exact swap times.
    #[arg(long, num_args = 1.., value_name = "FILE")]
    dns: Vec<PathBuf>,
    /// The access-log format: `combined`, `lab`, or the format text with $variables.
    #[arg(long, value_name = "FORMAT", conflicts_with = "nginx_conf")]
    log_format: Option<String>,
    /// Read the format from an nginx config file or `nginx -T` output.
    #[arg(long, value_name = "FILE")]
    nginx_conf: Option<PathBuf>,
    /// The log_format name to take from --nginx-conf (default: the one access_log uses).
    #[arg(long, value_name = "NAME", requires = "nginx_conf")]
    log_format_name: Option<String>,
    /// Only this upstream group.
    #[arg(long, value_name = "NAME")]
    upstream: Option<String>,
    /// The error log's UTC offset when the access log has no $time_local (e.g. +09:00).
    #[arg(long, value_name = "+HH:MM", allow_hyphen_values = true)]
    tz_offset: Option<String>,
    /// Output format: md, json or html.
    #[arg(long, default_value = "md", value_name = "md|json|html")]
    format: Format,
    /// Write to FILE instead of stdout.
    #[arg(short = 'o', long, value_name = "FILE")]
    output: Option<PathBuf>,
}

/// Run `resolvelab diagnose`.
pub fn run(args: Args, _ctx: &Ctx) -> anyhow::Result<ExitCode> {
    let log_format = match (&args.log_format, &args.nginx_conf) {
        (Some(f), _) => LogFormat::from_arg(f)?,
        (None, Some(conf)) => {
            let text = std::fs::read_to_string(conf)
                .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", conf.display()))?;
            let name = args
                .log_format_name
                .clone()
                .or_else(|| logformat::access_log_formats(&text).into_iter().next())
                .unwrap_or_else(|| "combined".into());
            let fmt = logformat::find_in_config(&text, &name)
                .map_err(|e| anyhow::anyhow!("{}: {e}", conf.display()))?;
            LogFormat::compile(&name, &fmt)?
        }
        (None, None) => LogFormat::combined(),
    };
    let tz_offset_s = match &args.tz_offset {
        Some(s) => Some(resolvelab_history::time::parse_offset(s).ok_or_else(|| {
            anyhow::anyhow!("--tz-offset `{s}` is not an offset: write e.g. +09:00 or -05:30")
        })?),
        None => None,
    };
    let opts = Options {
        access: args.access,
        error: args.error,
        dns: args.dns,
        events: Vec::new(),
        log_format,
        upstream: args.upstream,
        tz_offset_s,
    };
    let (d, _, stream) = resolvelab_diagnose::diagnose_with_stats(&opts)?;
    let text = render_diagnosis(&d, args.format)?;
    match &args.output {
        Some(p) => std::fs::write(p, text)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", p.display()))?,
        None => {
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            // A closed pipe (`| head`) is not an error worth a message.
            let _ = out.write_all(text.as_bytes());
        }
    }
    // The error logs are streamed with a bounded pairing window: say so when that bound cut
    // anything, since some failures may then have missed their error line.
    if stream.dropped > 0 {
        eprintln!(
            "warning: {} error-log line(s) were dropped from the pairing window (more than {} pairable lines within one request's time span); some failures may be unpaired",
            stream.dropped,
            resolvelab_diagnose::checker::MAX_BUFFERED
        );
    }
    if d.parse.malformed > 0 && d.requests == 0 {
        eprintln!(
            "warning: no access-log line matched the format; see the Parsing section (nearest guess included)"
        );
    }
    Ok(ExitCode::SUCCESS)
}
