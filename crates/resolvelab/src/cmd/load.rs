//! `resolvelab load`: the open-loop load generator, and `resolvelab load report`.

use crate::Ctx;
use resolvelab_load::report::{self, Format};
use resolvelab_load::{CancellationToken, Live, LoadConfig, Mix, Output, RatePlan, run_load};
use std::path::PathBuf;
use std::process::ExitCode;

const AFTER_HELP: &str = "\
Requests leave on the schedule whatever the server does. Latency is reported twice: corrected
(done − scheduled time) and uncorrected (done − actual send). Every scheduled request gets exactly one
record: a request that waited for a keep-alive connection longer than --timeout is `late`, one due
while --max-in-flight requests are outstanding is `dropped`.

Rate plans:
  500                    constant 500 requests/s (needs --duration or --requests)
  100@10s,500@30s        steps: 100/s for 10 s, then 500/s for 30 s
  0..1000@60s            linear ramp from 0 to 1000/s over 60 s (stages can be mixed, `0@5s` pauses)
  max                    closed loop, as fast as --connections allow (a throughput test)

Examples:
  resolvelab load http://127.0.0.1:8080/ --rate 300 --duration 60s --out load.jsonl
  resolvelab load http://127.0.0.1:8080/ --rate 100@10s,0..2000@30s --header-capture x-backend
  resolvelab load http://127.0.0.1:8080/ --rate 500 --requests 10000 --no-keepalive
  # a client that re-sends on a closed keep-alive connection, as browsers do:
  resolvelab load http://127.0.0.1:8080/ --rate 300 --duration 60s --retry-idempotent
  resolvelab load http://127.0.0.1:8080/api --rate 200 --duration 30s \\
      --mix GET=0.8,POST=0.2 --body-size 512
  resolvelab load http://127.0.0.1:8080/ --rate max --connections 64 --duration 10s --threads 1
  # a busy machine, as root:
  resolvelab load http://127.0.0.1:8080/ --rate 5000 --duration 10s --realtime
  resolvelab load report load.jsonl other.jsonl --format html --output load.html

Targets outside 127.0.0.0/8 and ::1 are refused unless --allow-remote is given.";

const REPORT_HELP: &str = "\
Reads result files written by `resolvelab load --out`, merges them by scheduled time, and prints the
summary (text or JSON), the records as vegeta-compatible CSV (timestamp ns, code, latency ns, bytes
out, bytes in, error, body, attack, seq, method, url, headers), or a self-contained HTML page with
SVG charts of latency over time and status classes per second.

Examples:
  resolvelab load report load.jsonl
  resolvelab load report a.jsonl b.jsonl --format json
  resolvelab load report load.jsonl --format csv > results.csv
  resolvelab load report load.jsonl --format html --output load.html";

/// Arguments of `resolvelab load`.
#[derive(Debug, clap::Args)]
#[command(
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true,
    after_help = AFTER_HELP
)]
pub struct Args {
    #[command(subcommand)]
    command: Option<Sub>,
    /// Target URL, e.g. http://127.0.0.1:8080/ (loopback only unless --allow-remote).
    #[arg(value_name = "URL", required = true)]
    url: Option<String>,
    /// Requests per second: a number, a plan (`100@10s,500@30s`, `0..1000@60s`) or `max`.
    #[arg(long, default_value = "100", value_name = "RATE|PLAN|max")]
    rate: String,
    /// Stop scheduling after this long (e.g. 30s, 2m); caps a plan.
    #[arg(long, value_name = "DURATION")]
    duration: Option<String>,
    /// Stop after this many requests.
    #[arg(long, value_name = "N")]
    requests: Option<u64>,
    /// Keep-alive connections (requests wait for a free one); with `--rate max`, the concurrency.
    #[arg(long, default_value_t = 64, value_name = "N")]
    connections: usize,
    /// A new connection per request (`Connection: close`), so nothing ever waits for one.
    #[arg(long)]
    no_keepalive: bool,
    /// Behave like browsers, curl and Go's client: a GET/HEAD/OPTIONS/TRACE sent on a reused
    /// keep-alive connection that closed before any response byte is sent once more on a new
    /// connection (counted as "Retried"). Without it such a request fails ("closed").
    #[arg(long)]
    retry_idempotent: bool,
    /// Method mix, e.g. GET=0.8,POST=0.2.
    #[arg(long, default_value = "GET", value_name = "MIX")]
    mix: String,
    /// Request body size in bytes for POST/PUT/PATCH.
    #[arg(long, default_value_t = 0, value_name = "BYTES")]
    body_size: usize,
    /// Give up on a request this long after its send (`timeout`), or after its scheduled time
    /// while waiting for a connection (`late`).
    #[arg(long, default_value = "10s", value_name = "DURATION")]
    timeout: String,
    /// Most requests outstanding at once; a request due while full is recorded as `dropped`.
    #[arg(long, default_value_t = 10_000, value_name = "N")]
    max_in_flight: usize,
    /// Extra request header, `Name: value` (repeatable).
    #[arg(long = "header", short = 'H', value_name = "NAME: VALUE")]
    headers: Vec<String>,
    /// Record this response header per request (e.g. x-backend).
    #[arg(long, value_name = "NAME")]
    header_capture: Option<String>,
    /// Write one JSON line per request to FILE (`-` for standard output).
    #[arg(long, short = 'o', value_name = "FILE")]
    out: Option<PathBuf>,
    /// Summary format at the end: text, json or none.
    #[arg(long, default_value = "text", value_name = "FORMAT")]
    summary: String,
    /// Allow targets outside 127.0.0.0/8 and ::1.
    #[arg(long)]
    allow_remote: bool,
    /// Seed of the method-mix RNG.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// No progress line.
    #[arg(long, short = 'q')]
    quiet: bool,
    /// Threads that send requests (default: one per core). Each runs its share of the requests
    /// and of the --connections on its own event loop. In an open loop with two or more, each is
    /// pinned to a core of its own and also sends the others' requests that are 250 µs overdue
    /// (a stalled core).
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
    /// Real-time (SCHED_FIFO) priority for the threads that send requests, so a busy machine
    /// cannot delay dispatch (root or CAP_SYS_NICE; open-loop rates only).
    #[arg(long)]
    realtime: bool,
}

#[derive(Debug, clap::Subcommand)]
enum Sub {
    /// Re-read result files (merging several) and print text, JSON, CSV or HTML.
    #[command(after_help = REPORT_HELP)]
    Report(ReportArgs),
}

#[derive(Debug, clap::Args)]
struct ReportArgs {
    /// Result files written by `resolvelab load --out` (`-` for standard input).
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// text, json, csv (vegeta columns) or html.
    #[arg(long, short = 'f', default_value = "text")]
    format: String,
    /// Write here instead of standard output.
    #[arg(long, short = 'o', value_name = "FILE")]
    output: Option<PathBuf>,
}

fn dur(flag: &str, s: &str) -> anyhow::Result<std::time::Duration> {
    resolvelab_core::dur::parse(s).map_err(|e| anyhow::anyhow!("{flag}: {e}"))
}

/// Run `resolvelab load`.
pub fn run(args: Args, _ctx: &Ctx) -> anyhow::Result<ExitCode> {
    if let Some(Sub::Report(r)) = args.command {
        let format: Format = r.format.parse().map_err(|e: String| anyhow::anyhow!(e))?;
        let merged = report::merge(&r.files)?;
        report::write_out(r.output.as_deref(), &report::render(&merged, format)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    let url = args
        .url
        .ok_or_else(|| anyhow::anyhow!("give a target URL, e.g. resolvelab load http://127.0.0.1:8080/ --rate 100 --duration 10s"))?;
    let plan = RatePlan::parse(&args.rate).map_err(|e| anyhow::anyhow!(e))?;
    let mut cfg = LoadConfig::new(&url, plan, args.allow_remote)?;
    cfg.duration = args
        .duration
        .as_deref()
        .map(|d| dur("--duration", d))
        .transpose()?;
    cfg.requests = args.requests;
    cfg.connections = args.connections;
    cfg.keepalive = !args.no_keepalive;
    if args.retry_idempotent && args.rate == "max" {
        anyhow::bail!(
            "--retry-idempotent needs an open-loop --rate (a number or a plan), not `max`"
        );
    }
    cfg.retry_idempotent = args.retry_idempotent;
    cfg.mix = Mix::parse(&args.mix).map_err(|e| anyhow::anyhow!(e))?;
    cfg.body_size = args.body_size;
    cfg.timeout = dur("--timeout", &args.timeout)?;
    cfg.max_in_flight = args.max_in_flight;
    cfg.headers = args
        .headers
        .iter()
        .map(|h| resolvelab_load::config::parse_header(h))
        .collect::<Result<_, _>>()
        .map_err(|e| anyhow::anyhow!(e))?;
    cfg.header_capture = args
        .header_capture
        .as_deref()
        .map(|h| {
            h.parse().map_err(|_| {
                anyhow::anyhow!("--header-capture `{h}` is not a header name (e.g. x-backend)")
            })
        })
        .transpose()?;
    cfg.seed = args.seed;
    cfg.realtime = args.realtime;
    let summary_format = args.summary.to_ascii_lowercase();
    if !["text", "json", "none"].contains(&summary_format.as_str()) {
        anyhow::bail!("--summary `{}`: use text, json or none", args.summary);
    }
    cfg.validate()?;
    let to_stdout = args.out.as_deref().is_some_and(|p| p.as_os_str() == "-");
    let output = match args.out {
        None => Output::None,
        Some(p) if p.as_os_str() == "-" => Output::Stdout,
        Some(p) => Output::File(p),
    };
    let total = match (cfg.duration, cfg.plan.length()) {
        (Some(d), Some(l)) => Some(d.min(l)),
        (d, l) => d.or(l),
    };

    let mut rt = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = args.threads {
        rt.worker_threads(n.max(1));
    }
    let rt = rt.enable_all().build()?;
    let live = Live::new();
    let cancel = CancellationToken::new();
    let progress = resolvelab_load::progress::Progress::start(live.clone(), total, args.quiet);
    let summary = rt.block_on(async {
        let c = cancel.clone();
        tokio::spawn(async move {
            // Ctrl-C, SIGTERM (`timeout … resolvelab load`) and SIGHUP stop the schedule; what
            // already happened is still written and summarised.
            use tokio::signal::unix::{SignalKind, signal};
            let (Ok(mut term), Ok(mut hup)) = (
                signal(SignalKind::terminate()),
                signal(SignalKind::hangup()),
            ) else {
                return;
            };
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
                _ = hup.recv() => {}
            }
            c.cancel();
        });
        run_load(&cfg, output, live, cancel.clone()).await
    });
    progress.finish();
    let summary = summary?;
    let text = match summary_format.as_str() {
        "json" => serde_json::to_string_pretty(&summary)? + "\n",
        "text" => summary.to_text(),
        _ => String::new(),
    };
    if to_stdout {
        eprint!("{text}");
    } else {
        print!("{text}");
    }
    rt.shutdown_timeout(std::time::Duration::from_millis(100));
    Ok(if cancel.is_cancelled() {
        ExitCode::from(130)
    } else {
        ExitCode::SUCCESS
    })
}
