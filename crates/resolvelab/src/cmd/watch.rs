//! `resolvelab watch`: follow nginx logs and classify their failures while they happen, as
//! Prometheus metrics, incident events and a live report.

use crate::Ctx;
use crate::cmd::diagnose::{Reading, template};
use resolvelab_watch::instances::Pattern;
use resolvelab_watch::live::{Kind, Timing};
use resolvelab_watch::{Config, Input, Watcher};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// Arguments of `resolvelab watch`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  resolvelab watch --access /var/log/nginx/access.log --error /var/log/nginx/error.log \\
      --nginx-conf /etc/nginx/nginx.conf --listen 127.0.0.1:9469 \\
      --state /var/lib/resolvelab/watch.json --events incidents.jsonl
  kubectl logs -f -n ingress-nginx deploy/ingress-nginx-controller --timestamps \\
      | resolvelab watch --logs - --log-format upstreaminfo --events -
  curl -s localhost:9469/metrics | grep resolvelab_failed_requests_total
  # the answers too, as evidence (swaps, NXDOMAIN, stale addresses):
  resolvelab watch --access access.log --error error.log --dns-watch app.internal \\
      --dns-server 127.0.0.53:53 --listen 127.0.0.1:9469
  resolvelab watch --print-rules --runbook-base https://wiki.example/resolvelab/diagnose.md \\
      > /etc/prometheus/rules/resolvelab-alerts.yml
  # several instances: a central log host's files, or pods' lines named by their prefix
  resolvelab watch --access '/var/log/remote/{instance}/nginx/access.log' \\
      --error '/var/log/remote/{instance}/nginx/error.log' --listen 127.0.0.1:9469
  kubectl logs -f -n web -l app=nginx --prefix --max-log-requests 50 \\
      | resolvelab watch --logs - --listen 127.0.0.1:9469

The files are followed as `tail -F` follows them: whole lines only, through rotation (rename +
create, delete + recreate, copytruncate); files that exist at start are read from their end
(--from-start: from their beginning), files created later from their beginning. With --state
FILE a restarted watch goes on where it stopped and its counters go on from their values.

Every tick (--interval) the new lines are diagnosed by the same checker as `diagnose`: requests,
error lines and lines read are counted at once. A failure opens a window that starts with the
--context before it; the window is classed again every --reclass (its failures are exported as
resolvelab_open_incident_failures{upstream,class}) and closes when no failure came for --settle:
then its incidents are counted in resolvelab_failed_requests_total{upstream,class} and
resolvelab_incidents_total{upstream,class}, and written to --events. A file watched live and
diagnosed afterwards give the same classes and counts when its incidents are more than --settle
apart.

Several nginx instances are watched at once, each diagnosed apart (an instance's error lines
pair with its own access lines): a path with {instance} in one of its names follows every
instance that fills it, found again at every tick (a host added later is read from its first
line); a --logs stream whose lines carry `kubectl logs --prefix`'s `[pod/NAME/CONTAINER]` or a
syslog header splits by pod or host. Their series carry an nginx_instance label (the first
--max-instances, the rest `other`); --instance NAME names the plain inputs' instance.

Endpoints with --listen: /metrics (OpenMetrics), /healthz, /report (the newest window's HTML
report). Ctrl-C or SIGTERM stops it: the open window is classed and counted, the state saved.

Exit status: 0 = stopped; 2 = a usage error or an input that cannot be followed at start.")]
pub struct Args {
    /// Access log files to follow.
    #[arg(long, num_args = 1.., value_name = "FILE")]
    access: Vec<PathBuf>,
    /// Error log files to follow.
    #[arg(long, num_args = 1.., value_name = "FILE")]
    error: Vec<PathBuf>,
    /// Mixed streams to follow (`-`: standard input, e.g. `kubectl logs -f`).
    #[arg(long, num_args = 1.., value_name = "FILE")]
    logs: Vec<PathBuf>,
    #[command(flatten)]
    reading: Reading,
    /// The nginx instance the plain --access/--error/--logs inputs come from (a pod or host
    /// name): their series carry it as nginx_instance.
    #[arg(long, value_name = "NAME", value_parser = crate::cmd::diagnose::instance_name)]
    instance: Option<String>,
    /// Instance label values kept; later instances are counted as `other`.
    #[arg(long, default_value_t = 200, value_name = "N")]
    max_instances: usize,
    /// Serve /metrics, /healthz and /report on this address.
    #[arg(long, value_name = "ADDR:PORT")]
    listen: Option<std::net::SocketAddr>,
    /// Write each incident when it closes as a JSON line to FILE (`-`: standard output).
    #[arg(long, value_name = "FILE")]
    events: Option<PathBuf>,
    /// Keep positions and counters in FILE, and resume from it.
    #[arg(long, value_name = "FILE")]
    state: Option<PathBuf>,
    /// Read files that exist at start from their beginning.
    #[arg(long)]
    from_start: bool,
    /// How often the files are read.
    #[arg(long, default_value = "1s", value_parser = parse_dur, value_name = "DUR")]
    interval: Duration,
    /// Log time without a failure that closes an incident window.
    #[arg(long, default_value = "30s", value_parser = parse_dur, value_name = "DUR")]
    settle: Duration,
    /// What a window starts with before its first failure (the swaps its classes read): this
    /// long of wall or log time, whichever is shorter.
    #[arg(long, default_value = "2m", value_parser = parse_dur, value_name = "DUR")]
    context: Duration,
    /// The longest an incident window stays open before it is classed and counted: this long
    /// of wall or log time, whichever is shorter.
    #[arg(long, default_value = "15m", value_parser = parse_dur, value_name = "DUR")]
    window: Duration,
    /// How often an open window is classed again.
    #[arg(long, default_value = "5s", value_parser = parse_dur, value_name = "DUR")]
    reclass: Duration,
    /// Upstream label values kept; later upstreams are counted as `other`.
    #[arg(long, default_value_t = 20, value_name = "N")]
    max_upstreams: usize,
    /// Ask a resolver for these names' answers all along (as `resolvelab dns watch` does): the
    /// answer history the classes read (swaps, NXDOMAIN, stale addresses), and
    /// resolvelab_dns_answer_changes_total.
    #[arg(long, num_args = 1.., value_name = "NAME", requires = "dns_server")]
    dns_watch: Vec<String>,
    /// With --dns-watch: the resolver nginx's `resolver` names (or the system's).
    #[arg(long, value_name = "ADDR:PORT")]
    dns_server: Option<std::net::SocketAddr>,
    /// With --dns-watch: time between two rounds of questions.
    #[arg(long, default_value = "1s", value_parser = parse_dur, value_name = "DUR")]
    dns_interval: Duration,
    /// With --dns-watch: allow a non-loopback --dns-server.
    #[arg(long)]
    allow_remote: bool,
    /// Print the Prometheus alerting rules (one alert per failure class) and exit.
    #[arg(long, exclusive = true)]
    print_rules: bool,
    /// With --print-rules: where the runbooks are (docs/diagnose.md as you host it).
    #[arg(long, value_name = "URL", default_value = resolvelab_watch::alerts::RUNBOOK_BASE)]
    runbook_base: String,
    /// Stop after this long (default: until Ctrl-C, SIGTERM or the end of standard input).
    #[arg(long, value_parser = parse_dur, value_name = "DUR")]
    duration: Option<Duration>,
}

/// The built-in answer watcher, as `dns watch NAME… --server ADDR` would run it.
fn dns_watch(args: &Args) -> anyhow::Result<Option<resolvelab_dns::watch::Watch>> {
    let Some(server) = args.dns_server else {
        return Ok(None);
    };
    if args.dns_watch.is_empty() {
        anyhow::bail!(
            "--dns-server without --dns-watch NAME: name the upstreams' names to ask for"
        );
    }
    if args.dns_interval.is_zero() {
        anyhow::bail!("--dns-interval must be above 0 (e.g. 1s)");
    }
    let w = resolvelab_dns::watch::Watch {
        names: args.dns_watch.clone(),
        server,
        interval: args.dns_interval,
        allow_remote: args.allow_remote,
        ..resolvelab_dns::watch::Watch::default()
    };
    w.check()?;
    Ok(Some(w))
}

fn parse_dur(s: &str) -> Result<Duration, String> {
    resolvelab_core::dur::parse(s)
}

/// Run `resolvelab watch`.
pub fn run(args: Args, ctx: &Ctx) -> anyhow::Result<ExitCode> {
    if args.print_rules {
        print!(
            "{}",
            resolvelab_watch::alerts::rules_yaml(&args.runbook_base)
        );
        return Ok(ExitCode::SUCCESS);
    }
    fixed_mmap_threshold();
    if args.access.is_empty() && args.error.is_empty() && args.logs.is_empty() {
        anyhow::bail!("nothing to watch: pass --access FILE and --error FILE, or --logs FILE|-");
    }
    let mut inputs = Vec::new();
    let mut stdin = 0;
    for (kind, paths) in [
        (Kind::Access, &args.access),
        (Kind::Error, &args.error),
        (Kind::Mixed, &args.logs),
    ] {
        for p in paths {
            if p.as_os_str() == "-" {
                stdin += 1;
                inputs.push((kind, Input::Stdin));
            } else if let Some(pat) = Pattern::parse(p)? {
                inputs.push((kind, Input::Instances(pat)));
            } else {
                inputs.push((kind, Input::File(p.clone())));
            }
        }
    }
    if stdin > 1 {
        anyhow::bail!("`-` (standard input) can be given once only");
    }
    let plain = inputs
        .iter()
        .any(|(_, i)| !matches!(i, Input::Instances(_)));
    if args.instance.is_some() && !plain {
        anyhow::bail!(
            "--instance names the instance of plain inputs; a path with {{instance}} names its own"
        );
    }
    let template = template(
        &args.reading,
        args.reading.nginx_conf.as_deref(),
        !args.access.is_empty(),
        ctx,
    )?;
    let listener = match args.listen {
        Some(a) => {
            Some(std::net::TcpListener::bind(a).map_err(|e| anyhow::anyhow!("--listen {a}: {e}"))?)
        }
        None => None,
    };
    let dns = dns_watch(&args)?;
    let mut w = Watcher::new(Config {
        inputs,
        template,
        timing: Timing {
            settle: args.settle,
            context: args.context,
            window: args.window,
            reclass: args.reclass,
        },
        interval: args.interval,
        max_upstreams: args.max_upstreams,
        instance: args.instance,
        max_instances: args.max_instances,
        from_start: args.from_start,
        state: args.state,
        events: args.events,
        duration: args.duration,
        dns,
    })?;
    if let Some(l) = listener {
        let addr = l.local_addr()?;
        resolvelab_watch::serve::spawn(l, w.shared.clone(), w.report.clone())?;
        eprintln!("watch: serving http://{addr}/metrics");
    }
    crate::cmd::run::install_signal_handlers();
    w.run(&resolvelab_core::supervise::INTERRUPTED)?;
    // The flag is the process's; nothing else reads it after this.
    resolvelab_core::supervise::INTERRUPTED.store(false, Ordering::SeqCst);
    Ok(ExitCode::SUCCESS)
}

/// Buffers of 1 MB and more are mapped apart and given back when freed. glibc raises this
/// threshold on its own up to 32 MB after a large buffer is freed, and then a tick's lines
/// come from the heap and the heap does not shrink: measured on a backlog of 3 M lines,
/// 446 MB resident at most against 242 MB with the threshold fixed, for the same 250 MB the
/// allocations took at most (heaptrack).
fn fixed_mmap_threshold() {
    // SAFETY: mallopt only sets the allocator's parameters, under glibc's own lock.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
    }
}
