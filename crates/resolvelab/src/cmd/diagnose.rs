//! `resolvelab diagnose`: explain every 502 in production nginx logs.

use crate::Ctx;
use resolvelab_diagnose::Options;
use resolvelab_history::logformat::LogFormat;
use resolvelab_report::{Format, render_diagnosis};
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `resolvelab diagnose`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  resolvelab diagnose --access /var/log/nginx/access.log --error /var/log/nginx/error.log
  resolvelab diagnose --access access.log.2.gz access.log.1 access.log \\
      --error error.log upstream-errors.log \\
      --nginx-conf <(nginx -T) --log-format-name main --format html -o report.html
  resolvelab diagnose --access access.log --log-format '$msec $status \"$upstream_addr\" \"$request\"' \\
      --error error.log --tz-offset +09:00 --upstream be --format json
  kubectl logs -n ingress-nginx deploy/ingress-nginx-controller --timestamps \\
      | resolvelab diagnose --logs - --log-format upstreaminfo
  docker compose logs --no-color nginx > compose.log && resolvelab diagnose --logs compose.log

Any input may be `-` (standard input, once), a pipe, a FIFO or `<(…)`: it is read once.

--logs reads mixed streams — `kubectl logs` (with --timestamps or --prefix), `docker compose logs`,
journald or syslog (RFC 3164/5424), a process manager's output: access and error lines are told
apart behind their prefixes, other processes' lines are passed over (counted as skipped), and
indented continuation lines (a Lua `stack traceback:`) are joined to the entry above them.

Access logs are parsed with your own log_format (--log-format TEXT, or --nginx-conf FILE with
--log-format-name NAME; nginx's `combined` by default). Add $upstream_addr, $msec and $connection
to your format for the best diagnosis. Rotated and .gz files are merged in time order; pass every
error_log destination (`nginx -T | grep error_log`). Error-log times are local: the offset comes from
$time_local, else --tz-offset, else this machine's offset.

A class is never given on the absence of its evidence: without a DNS answer history, the config
(--nginx-conf) or the version (--nginx-version), a `no live upstreams` may be `undetermined`, and
the report's \"What these logs can show\" section says what would decide it.

Exit status: 0 = diagnosed; 1 = a class named by --fail-on was found; 2 = a usage error or an
unreadable input; 3 = nothing could be diagnosed (no access-log line parsed) or an input was cut
short (truncated gzip, read error): the report is partial.")]
pub struct Args {
    /// Access log files (several allowed: rotations, several servers; .gz read transparently).
    /// Without one, the failures are those the error log shows.
    #[arg(long, num_args = 1.., value_name = "FILE", required_unless_present_any = ["error", "logs"])]
    access: Vec<PathBuf>,
    /// Error log files (every error_log destination).
    #[arg(long, num_args = 1.., value_name = "FILE")]
    error: Vec<PathBuf>,
    /// Mixed streams: access, error and other processes' lines in one file (`kubectl logs`,
    /// `docker compose logs`, journald, syslog).
    #[arg(long, num_args = 1.., value_name = "FILE")]
    logs: Vec<PathBuf>,
    /// DNS query log (resolvelab.dns/v1 JSON Lines) for exact swap times.
    #[arg(long, num_args = 1.., value_name = "FILE")]
    dns: Vec<PathBuf>,
    /// The access-log format: a preset (combined, main, lab, upstreaminfo, upstreaminfo-legacy,
    /// upstreaminfo-legacy-reqid, vhost, vhost-legacy, npm, json) or the format text with
    /// $variables. Wins over --nginx-conf's.
    #[arg(long, value_name = "FORMAT")]
    log_format: Option<String>,
    /// Read the format from an nginx config file or `nginx -T` output.
    #[arg(long, value_name = "FILE")]
    nginx_conf: Option<PathBuf>,
    /// The log_format name to take from --nginx-conf (default: the one access_log uses).
    #[arg(long, value_name = "NAME", requires = "nginx_conf")]
    log_format_name: Option<String>,
    /// The nginx version the logs come from (`nginx -v`): below 1.27.3 no generation race is
    /// possible. Read from --nginx PATH or from `nginx -V` output inside --nginx-conf otherwise.
    #[arg(long, value_name = "X.Y.Z")]
    nginx_version: Option<resolvelab_core::version::Version>,
    /// Exit with status 1 when any of these classes is found (for cron jobs and CI).
    #[arg(long, value_name = "CLASS", num_args = 1.., value_delimiter = ',')]
    fail_on: Vec<String>,
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
pub fn run(args: Args, ctx: &Ctx) -> anyhow::Result<ExitCode> {
    for c in &args.fail_on {
        if resolvelab_diagnose::classes::Class::from_id(c).is_none() {
            anyhow::bail!(
                "--fail-on {c}: not a class; use one of {}",
                resolvelab_diagnose::classes::CLASSES.join(", ")
            );
        }
    }
    let spool = Spool::new()?;
    let conf = match &args.nginx_conf {
        Some(p) => Some(spool.one(p)?),
        None => None,
    };
    let conf_text = match &conf {
        Some(p) => Some(
            std::fs::read_to_string(p)
                .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", p.display()))?,
        ),
        None => None,
    };
    // The configuration, read once by the linter's parser: its log_format and its run-time facts.
    let loaded = match (&args.nginx_conf, &conf, conf_text) {
        (Some(orig), Some(read), Some(text)) => Some((orig, load_config(orig, read, text))),
        _ => None,
    };
    let log_format = match (&args.log_format, &loaded) {
        (Some(f), _) => LogFormat::from_arg(f)?,
        // Without an access log no format is needed, whatever the config's access_log names.
        (None, Some((orig, Ok(cfg)))) if !args.access.is_empty() => {
            let formats = resolvelab_lint::log_formats(cfg);
            let name = args.log_format_name.as_deref();
            resolvelab_diagnose::run::config_log_format(&formats, name, "combined")
                .map_err(|e| anyhow::anyhow!("{}: {e}", orig.display()))?
        }
        (None, Some((_, Err(e)))) if !args.access.is_empty() => anyhow::bail!(
            "{e}: its log_format cannot be read; pass the format itself with --log-format '…'"
        ),
        (None, _) => LogFormat::combined(),
    };
    let config = match loaded {
        Some((orig, Ok(cfg))) => Some(resolvelab_lint::runtime_facts(
            &cfg,
            &orig.display().to_string(),
        )),
        // A config that does not parse (an excerpt, a template) with --log-format given: its
        // run-time facts are left out and the report lists the configuration as missing.
        Some((_, Err(e))) => {
            eprintln!("warning: {e}; diagnosing without the configuration's facts");
            None
        }
        None => None,
    };
    let nginx_version = match (args.nginx_version, &ctx.nginx) {
        (Some(v), _) => Some(v),
        (None, Some(bin)) => Some(resolvelab_lint::version::detect(bin)?),
        (None, None) => None,
    };
    let tz_offset_s = match &args.tz_offset {
        Some(s) => Some(resolvelab_history::time::parse_offset(s).ok_or_else(|| {
            anyhow::anyhow!("--tz-offset `{s}` is not an offset: write e.g. +09:00 or -05:30")
        })?),
        None => None,
    };
    let opts = Options {
        access: spool.all(&args.access)?,
        error: spool.all(&args.error)?,
        mixed: spool.all(&args.logs)?,
        dns: spool.all(&args.dns)?,
        events: Vec::new(),
        log_format,
        upstream: args.upstream,
        tz_offset_s,
        nginx_version,
        config,
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
    Ok(exit_status(&d, &args.fail_on))
}

/// The documented exit status (see `--help`).
fn exit_status(d: &resolvelab_diagnose::Diagnosis, fail_on: &[String]) -> ExitCode {
    let error_lines: u64 = d
        .parse
        .files
        .iter()
        .filter(|f| f.kind == "error")
        .map(|f| f.parsed)
        .sum();
    if d.inputs.mixed.is_empty() && d.inputs.access.is_empty() && error_lines == 0 {
        eprintln!(
            "resolvelab: no error-log line could be read (nginx's `YYYY/MM/DD HH:MM:SS [level]` lines); see the Parsing section"
        );
        return ExitCode::from(3);
    }
    if !d.inputs.mixed.is_empty() && d.requests == 0 && error_lines == 0 {
        eprintln!(
            "resolvelab: no access or error line of nginx was found in the --logs stream; see the Parsing section"
        );
        return ExitCode::from(3);
    }
    if d.requests == 0 && !d.inputs.access.is_empty() {
        eprintln!(
            "resolvelab: no access-log line matched the format; see the Parsing section (nearest guess included)"
        );
        return ExitCode::from(3);
    }
    if d.status == Some(resolvelab_diagnose::verdict::DiagnosisStatus::Partial) {
        let cut: Vec<String> = d
            .parse
            .files
            .iter()
            .filter_map(|f| f.error.as_ref().map(|e| format!("{}: {e}", f.path)))
            .collect();
        eprintln!("resolvelab: an input was cut short: {}", cut.join("; "));
        return ExitCode::from(3);
    }
    let found: Vec<&str> = fail_on
        .iter()
        .filter(|c| d.classes.iter().any(|s| &&s.class == c))
        .map(String::as_str)
        .collect();
    if !found.is_empty() {
        eprintln!("resolvelab: found {} (--fail-on)", found.join(", "));
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}

/// A configuration as the linter's parser reads it: a file tree (includes followed) or an
/// `nginx -T` dump (also what arrives through a pipe).
fn load_config(
    orig: &std::path::Path,
    read: &std::path::Path,
    text: String,
) -> anyhow::Result<resolvelab_lint::load::Config> {
    let name = orig.display().to_string();
    let cfg = if orig == read && !resolvelab_lint::load::is_dump(&text) {
        resolvelab_lint::load::load_path(read, None)
    } else {
        resolvelab_lint::load::load_text(&name, text, None)
    };
    cfg.map_err(|e| anyhow::anyhow!("--nginx-conf {e}"))
}

/// Inputs that cannot be read twice (`-`, pipes, FIFOs, `<(…)`) are copied once into a private
/// directory: the checker streams the logs and later re-reads the lines it quotes.
struct Spool {
    dir: tempfile::TempDir,
    stdin_used: std::cell::Cell<bool>,
}

impl Spool {
    fn new() -> anyhow::Result<Spool> {
        Ok(Spool {
            dir: tempfile::Builder::new()
                .prefix("resolvelab-input-")
                .tempdir()?,
            stdin_used: std::cell::Cell::new(false),
        })
    }

    fn all(&self, paths: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
        paths.iter().map(|p| self.one(p)).collect()
    }

    fn one(&self, p: &std::path::Path) -> anyhow::Result<PathBuf> {
        let stdin = p.as_os_str() == "-";
        if !stdin {
            // A missing file goes through as it is: the checker names it, after the checks of
            // the arguments themselves.
            match std::fs::metadata(p) {
                Ok(m) if !m.is_file() && !m.is_dir() => {}
                _ => return Ok(p.to_path_buf()),
            }
        } else if self.stdin_used.replace(true) {
            anyhow::bail!("`-` (standard input) can be given once only");
        }
        let name = if stdin {
            "stdin".to_string()
        } else {
            p.display().to_string().replace('/', "_")
        };
        let to = self.dir.path().join(name);
        let mut out = std::fs::File::create(&to)?;
        let copied = if stdin {
            std::io::copy(&mut std::io::stdin().lock(), &mut out)
        } else {
            std::fs::File::open(p).and_then(|mut f| std::io::copy(&mut f, &mut out))
        };
        copied.map_err(|e| anyhow::anyhow!("cannot read {}: {e}", p.display()))?;
        Ok(to)
    }
}
