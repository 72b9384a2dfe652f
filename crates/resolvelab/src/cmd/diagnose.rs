//! `resolvelab diagnose`: explain every 502 in production nginx logs.

use crate::Ctx;
use resolvelab_diagnose::fleet::{Fleet, Partial};
use resolvelab_diagnose::{NginxConf, Options};
use resolvelab_history::export;
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
  logcli query '{app=\"nginx\"}' --since 1h --limit 1000000 --output=jsonl \\
      | resolvelab diagnose --logs - --format html -o fleet.html
  # one instance of a fleet, then one report over all of them:
  resolvelab diagnose --instance web-1 --access web-1/access.log --error web-1/error.log \\
      --partial parts/web-1.json
  resolvelab merge parts/*.json --format html -o fleet.html
  # the half hour of the page, classed with the hours around it as context:
  resolvelab diagnose --access access.log --error error.log \\
      --since 2026-12-06T02:00:00Z --until 2026-12-06T02:30:00Z

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

--logs also reads log-store exports as they come — Loki `logcli --output=jsonl`, Elasticsearch
`_search` responses, CloudWatch `filter-log-events`, ClickHouse JSONEachRow (with --message-field),
Kubernetes CRI files, `kubectl logs --prefix` of several pods, a central syslog file — split by
the instance each record's labels name (--instance-field): each instance is diagnosed on its own
and the report is a fleet report (--instance NAME: that one).

--since/--until diagnose a time range out of longer logs: every line is read, those outside the
range as context only (swaps, answers, pairs, the clusters an incident belongs to). A request
counts where its line's time falls, an error line where its second falls, an incident where it
starts — kept whole —, so the reports of adjacent ranges over the same logs add up to one over
all of them.

--partial FILE writes this instance's diagnosis as a mergeable partial (resolvelab.partial/v1) for
`resolvelab merge`, which reports a fleet; the report is then written only with -o. Give each
instance's logs to one run (its error lines pair with its own access lines).

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
    #[command(flatten)]
    reading: Reading,
    /// Exit with status 1 when any of these classes is found (for cron jobs and CI).
    #[arg(long, value_name = "CLASS", num_args = 1.., value_delimiter = ',')]
    fail_on: Vec<String>,
    #[command(flatten)]
    out: Out,
    /// The nginx instance these logs come from (a pod or host name): its name in a fleet.
    #[arg(long, value_name = "NAME", value_parser = instance_name)]
    instance: Option<String>,
    /// In a log-store export given to --logs: the label or field naming each record's instance
    /// (dotted for nested fields, e.g. kubernetes.pod.name); default: pod, instance, host, …
    #[arg(long, value_name = "FIELD")]
    instance_field: Option<String>,
    /// In a JSONEachRow export (ClickHouse) given to --logs: the column holding the log line;
    /// naming it is what marks the input as JSONEachRow.
    #[arg(long, value_name = "FIELD")]
    message_field: Option<String>,
    /// Diagnose what happened from TIME on (RFC 3339, whole seconds: 2026-12-06T02:00:00Z);
    /// earlier lines are read as context.
    #[arg(long, value_name = "TIME")]
    since: Option<String>,
    /// Diagnose what happened before TIME (excluded); later lines are read as context.
    #[arg(long, value_name = "TIME")]
    until: Option<String>,
}

/// How the logs are read: their format, the configuration and version they come from, the
/// error log's clock (shared by `diagnose` and `watch`).
#[derive(Debug, clap::Args)]
pub(crate) struct Reading {
    /// The access-log format: a preset (combined, main, lab, upstreaminfo, upstreaminfo-legacy,
    /// upstreaminfo-legacy-reqid, vhost, vhost-legacy, npm, json) or the format text with
    /// $variables. Wins over --nginx-conf's.
    #[arg(long, value_name = "FORMAT")]
    pub log_format: Option<String>,
    /// Read the format from an nginx config file or `nginx -T` output.
    #[arg(long, value_name = "FILE")]
    pub nginx_conf: Option<PathBuf>,
    /// The log_format name to take from --nginx-conf (default: the one access_log uses).
    #[arg(long, value_name = "NAME", requires = "nginx_conf")]
    pub log_format_name: Option<String>,
    /// The nginx version the logs come from (`nginx -v`): below 1.27.3 no generation race is
    /// possible. Read from --nginx PATH or from `nginx -V` output inside --nginx-conf otherwise.
    #[arg(long, value_name = "X.Y.Z")]
    pub nginx_version: Option<resolvelab_core::version::Version>,
    /// Only this upstream group.
    #[arg(long, value_name = "NAME")]
    pub upstream: Option<String>,
    /// The error log's UTC offset when the access log has no $time_local (e.g. +09:00).
    #[arg(long, value_name = "+HH:MM", allow_hyphen_values = true)]
    pub tz_offset: Option<String>,
}

/// Where `diagnose` and `merge` write: the report's format and file, and the partial.
#[derive(Debug, clap::Args)]
pub(crate) struct Out {
    /// Output format: md, json or html.
    #[arg(long, default_value = "md", value_name = "md|json|html")]
    pub format: Format,
    /// Write the report to FILE instead of stdout.
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Also write the diagnosis (merge: the merged one) as a partial for `resolvelab merge`;
    /// the report is then written only with -o.
    #[arg(long, value_name = "FILE")]
    pub partial: Option<PathBuf>,
}

/// Run `resolvelab diagnose`.
pub fn run(args: Args, ctx: &Ctx) -> anyhow::Result<ExitCode> {
    check_classes(&args.fail_on)?;
    let range = match (&args.since, &args.until) {
        (None, None) => None,
        (s, u) => Some(
            resolvelab_diagnose::TimeRange::parse(s.as_deref(), u.as_deref())
                .map_err(anyhow::Error::msg)?,
        ),
    };
    if args.out.partial.is_some() && args.instance.is_none() && args.logs.is_empty() {
        anyhow::bail!(
            "--partial needs --instance NAME: the nginx instance these logs come from (a pod or host name)"
        );
    }
    let spool = Spool::new()?;
    let mut opts = options(&args, ctx, &spool)?;
    opts.range = range;
    let fields = export::Fields {
        instance: args.instance_field.clone(),
        message: args.message_field.clone(),
    };
    let split = match export::split(&opts.mixed, &fields, spool.dir.path())? {
        Some(s) => Some(s),
        None => export::split_hosts(&opts.access, &opts.log_format, spool.dir.path())?,
    };
    let Some(mut slices) = split else {
        let name = args.instance.clone();
        return one(&args, opts, name, None);
    };
    let by_host = slices.format == export::Export::Hostname;
    let mut chosen = std::mem::take(&mut slices.instances);
    if let Some(name) = &args.instance {
        let all: Vec<String> = chosen.iter().map(|s| s.instance.clone()).collect();
        chosen.retain(|s| &s.instance == name);
        if chosen.is_empty() {
            anyhow::bail!(
                "--instance {name}: the {} export holds no such instance; it holds {}",
                slices.format.name(),
                all.join(", ")
            );
        }
    }
    if let [s] = &chosen[..] {
        // One host of a shared access log: its own error log (--error) pairs with it.
        match by_host {
            true => opts.access = vec![s.path.clone()],
            false => opts.mixed = vec![s.path.clone()],
        }
        let name = Some(s.instance.clone());
        return one(&args, opts, name, Some((&slices, s)));
    }
    if by_host && !opts.error.is_empty() {
        anyhow::bail!(
            "--error beside an access log of {} hosts ($hostname): an error line names no host, so it cannot be paired; diagnose one host at a time with --instance HOST and that host's --error",
            chosen.len()
        );
    }
    if !by_host && (!opts.access.is_empty() || !opts.error.is_empty()) {
        anyhow::bail!(
            "--access/--error beside an export of {} instances: their lines belong to no one instance; give them to a run of their own with --instance",
            chosen.len()
        );
    }
    fleet(&args, opts, &slices, &chosen)
}

/// The options of one diagnosis, every input spooled.
fn options(args: &Args, ctx: &Ctx, spool: &Spool) -> anyhow::Result<Options> {
    let conf = match &args.reading.nginx_conf {
        Some(p) => Some(spool.one(p)?),
        None => None,
    };
    let t = template(&args.reading, conf.as_deref(), !args.access.is_empty(), ctx)?;
    Ok(Options {
        access: spool.all(&args.access)?,
        error: spool.all(&args.error)?,
        mixed: spool.all(&args.logs)?,
        dns: spool.all(&args.dns)?,
        ..t
    })
}

/// The options every diagnosis of these logs shares, without their paths: the format, the
/// configuration's run-time facts (`conf`, the config file as read), the version, the clock.
pub(crate) fn template(
    r: &Reading,
    conf: Option<&std::path::Path>,
    reads_access: bool,
    ctx: &Ctx,
) -> anyhow::Result<Options> {
    // The configuration, read once by the linter's parser: its log_format and its run-time facts.
    let conf = match (&r.nginx_conf, conf) {
        (Some(named), Some(p)) => Some(NginxConf::read(named, p)?),
        _ => None,
    };
    let log_format = match (&r.log_format, &conf) {
        (Some(f), _) => LogFormat::from_arg(f)?,
        // Without an access log no format is needed, whatever the config's access_log names.
        (None, Some(c)) if reads_access => c.log_format(r.log_format_name.as_deref())?,
        (None, _) => LogFormat::combined(),
    };
    let config = match conf.as_ref().map(NginxConf::facts) {
        Some(Ok(facts)) => Some(facts),
        // A config that does not parse (an excerpt, a template) with --log-format given: its
        // run-time facts are left out and the report lists the configuration as missing.
        Some(Err(e)) => {
            eprintln!("warning: {e}; diagnosing without the configuration's facts");
            None
        }
        None => None,
    };
    let nginx_version = match (r.nginx_version, &ctx.nginx) {
        (Some(v), _) => Some(v),
        (None, Some(bin)) => Some(resolvelab_lint::version::detect(bin)?),
        (None, None) => None,
    };
    let tz_offset_s = match &r.tz_offset {
        Some(s) => Some(resolvelab_history::time::parse_offset(s).ok_or_else(|| {
            anyhow::anyhow!("--tz-offset `{s}` is not an offset: write e.g. +09:00 or -05:30")
        })?),
        None => None,
    };
    Ok(Options {
        log_format,
        upstream: r.upstream.clone(),
        tz_offset_s,
        nginx_version,
        config,
        ..Options::new(Vec::new(), Vec::new())
    })
}

/// One instance's report (and partial, when asked); `from` the export slice it was read from.
fn one(
    args: &Args,
    opts: Options,
    name: Option<String>,
    from: Option<(&export::Slices, &export::Slice)>,
) -> anyhow::Result<ExitCode> {
    let (mut d, _, stream) = resolvelab_diagnose::diagnose_with_stats(&opts)?;
    if let Some((all, s)) = from {
        relabel(&mut d, all, s);
    }
    warn_dropped(&stream, None);
    if let Some(to) = &args.out.partial {
        let name = name.ok_or_else(|| {
            anyhow::anyhow!(
                "--partial needs --instance NAME: these logs do not name their instance"
            )
        })?;
        write_file(to, &Partial::one(&name, d.clone())?.to_json())?;
    }
    let text = render_diagnosis(&d, args.out.format)?;
    emit(
        args.out.output.as_deref(),
        args.out.partial.is_some(),
        &text,
    )?;
    Ok(exit_status(&d, &args.fail_on))
}

/// Several instances of an export, each diagnosed apart, as one fleet report.
fn fleet(
    args: &Args,
    opts: Options,
    from: &export::Slices,
    slices: &[export::Slice],
) -> anyhow::Result<ExitCode> {
    let mut all: Option<Partial> = None;
    for (k, s) in slices.iter().enumerate() {
        resolvelab_core::progress::status(format!(
            "diagnosing instance {}/{}: {} ({} lines)",
            k + 1,
            slices.len(),
            s.instance,
            s.lines
        ));
        let o = match from.format {
            export::Export::Hostname => Options {
                access: vec![s.path.clone()],
                ..opts.clone()
            },
            _ => Options {
                mixed: vec![s.path.clone()],
                ..opts.clone()
            },
        };
        let (mut d, _, stream) = resolvelab_diagnose::diagnose_with_stats(&o)?;
        relabel(&mut d, from, s);
        warn_dropped(&stream, Some(&s.instance));
        let p = Partial::one(&s.instance, d)?;
        all = Some(match all {
            None => p,
            Some(a) => a.merge(p)?,
        });
    }
    resolvelab_core::progress::end_status();
    let all = all.expect("an export with instances");
    if let Some(to) = &args.out.partial {
        write_file(to, &all.to_json())?;
    }
    crate::cmd::merge::report(
        &Fleet::of_partial(&all),
        args.out.format,
        args.out.output.as_deref(),
        args.out.partial.is_some(),
        &args.fail_on,
    )
}

/// An export's instance was read from a temporary file: its references name the export's
/// records, its input the export files.
fn relabel(d: &mut resolvelab_diagnose::Diagnosis, all: &export::Slices, s: &export::Slice) {
    let tmp = s.path.display().to_string();
    let files: Vec<String> = all.inputs.iter().map(|p| p.display().to_string()).collect();
    let name = format!("{} (instance {})", files.join(", "), s.instance);
    d.relabel(
        &|at| {
            let line = at.strip_prefix(&tmp)?.strip_prefix(':')?.parse().ok()?;
            s.origin(all, line)
        },
        &|p| (p == tmp).then(|| name.clone()),
    );
}

/// Write the report to `-o`, else to stdout unless a partial was the output asked for.
pub(crate) fn emit(
    output: Option<&std::path::Path>,
    partial: bool,
    text: &str,
) -> anyhow::Result<()> {
    match (output, partial) {
        (Some(p), _) => write_file(p, text)?,
        (None, true) => {}
        (None, false) => {
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            // A closed pipe (`| head`) is not an error worth a message.
            let _ = out.write_all(text.as_bytes());
        }
    }
    Ok(())
}

/// The error logs are streamed with a bounded pairing window: say so when that bound cut
/// anything, since some failures may then have missed their error line.
fn warn_dropped(stream: &resolvelab_diagnose::StreamStats, instance: Option<&str>) {
    if stream.dropped > 0 {
        eprintln!(
            "warning: {}{} error-log line(s) were dropped from the pairing window (more than {} pairable lines within one request's time span); some failures may be unpaired",
            instance.map_or(String::new(), |i| format!("{i}: ")),
            stream.dropped,
            resolvelab_diagnose::checker::MAX_BUFFERED
        );
    }
}

/// `--fail-on` names classes.
pub(crate) fn check_classes(fail_on: &[String]) -> anyhow::Result<()> {
    for c in fail_on {
        if resolvelab_diagnose::classes::Class::from_id(c).is_none() {
            anyhow::bail!(
                "--fail-on {c}: not a class; use one of {}",
                resolvelab_diagnose::classes::CLASSES.join(", ")
            );
        }
    }
    Ok(())
}

/// An instance name as `--instance` takes it (checked before any log is read).
pub(crate) fn instance_name(s: &str) -> Result<String, String> {
    // clap names the value itself.
    resolvelab_diagnose::fleet::check_name(s)
        .map(|()| s.to_string())
        .map_err(|_| {
            "give 1 to 253 printable characters without spaces (a pod or host name)".into()
        })
}

/// Write a report or partial, naming the file on failure.
pub(crate) fn write_file(p: &std::path::Path, text: &str) -> anyhow::Result<()> {
    std::fs::write(p, text).map_err(|e| anyhow::anyhow!("cannot write {}: {e}", p.display()))
}

/// The documented exit status (see `--help`).
fn exit_status(d: &resolvelab_diagnose::Diagnosis, fail_on: &[String]) -> ExitCode {
    if let Some(why) = d.unusable() {
        eprintln!("resolvelab: {why}");
        return ExitCode::from(3);
    }
    let found = d.found(fail_on);
    if !found.is_empty() {
        eprintln!("resolvelab: found {} (--fail-on)", found.join(", "));
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
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
