//! `resolvelab backend` — a fault-injectable HTTP/1.1 origin (or, with `--echo-db`, the DB
//! stand-in of the slow-dependency experiment).

use crate::Ctx;
use resolvelab_backend::{
    Backend, BackendConfig, BackendFault, DbConfig, EchoDb, Latency, StatusMix, fault, response,
};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

const AFTER_HELP: &str = "\
Examples:
  # a plain keep-alive origin; every response names it (x-backend header and body)
  resolvelab backend --listen 127.0.0.20:8080 --name b1

  # the keep-alive reclaim race: 30 % of responses are followed by a silent close 0-50 ms later
  resolvelab backend --listen 127.0.0.20:8080 --fault reclaim:toxicity=0.3,delay=0ms..50ms \\
      --control 127.0.0.20:9000 --log b1.jsonl

  # refuse connections for 2 s, 10 % of requests answered 503, log-normal latency
  resolvelab backend --listen 127.0.0.30:8080 --fault refuse:for=2s \\
      --fault status:code=503,toxicity=0.1 --latency lognormal:p50=2ms,p99=40ms

  # DOMAIN.md §6: a DB stand-in, a 200 ms proxy in front of it, a backend with a pool of 4
  resolvelab backend --echo-db --listen 127.0.0.41:5432
  resolvelab proxy --listen 127.0.0.40:5432 --upstream 127.0.0.41:5432 \\
      --fault latency:delay=200ms,direction=downstream
  resolvelab backend --listen 127.0.0.20:8080 --db 127.0.0.40:5432 --round-trips 9 --pool 4 \\
      --acquire-timeout 30s --control 127.0.0.20:9000

  # faults at runtime
  curl -d 'rst:toxicity=0.5,for=5s' http://127.0.0.20:9000/faults
  curl http://127.0.0.20:9000/faults          # hit counters
  curl -X DELETE http://127.0.0.20:9000/faults/rst
  curl http://127.0.0.20:9000/metrics         # Prometheus text

Faults (SPEC = KIND[:key=value,...]; every kind also takes toxicity=0..1, for=DUR, seed=N, name=NAME):
  reclaim               after a response, close the idle connection after delay=LO..HI (default
                        0ms..50ms) without a byte; a request arriving in that gap is dropped
  idle-timeout:DUR      close keep-alive connections idle for DUR
  rst                   accept, then reset (SO_LINGER 0)
  refuse                stop listening (connection refused) while active; use for=DUR
  hang                  accept and never answer
  close-after-headers   send the headers, then close before the body
  status:CODE           answer CODE
  slow-headers:DUR      wait DUR before the headers
Every fault counts its hits (GET /faults, /metrics, and the summary printed on exit).

Endpoints: / (anything) answers with the status mix; /health always 200; /ready needs a DB pool
connection when --db is set. Request log: JSON Lines, first line {\"schema\":\"resolvelab.backend/v1\"},
then one object per request (t_us conn req method path status dur_us pool_wait_us faults) and per
connection/fault event.";

/// Arguments of `resolvelab backend`.
#[derive(Debug, clap::Args)]
#[command(
    about = "Fault-injectable HTTP/1.1 keep-alive origin (and the --echo-db DB stand-in)",
    after_help = AFTER_HELP
)]
pub struct Args {
    /// Address to serve on (loopback only unless --allow-remote; port 0 picks a free one).
    #[arg(long, default_value = "127.0.0.20:8080", value_name = "ADDR:PORT")]
    listen: SocketAddr,
    /// Name in the x-backend header, the body, the log and metrics (default: the listen address).
    #[arg(long)]
    name: Option<String>,
    /// Latency before the headers: 2ms, uniform:1ms..5ms or lognormal:p50=2ms,p99=40ms.
    #[arg(long, default_value = "0", value_name = "MODEL", value_parser = parse_latency)]
    latency: Latency,
    /// Pad every body to this size (512, 4k, 1m).
    #[arg(long, value_name = "SIZE", value_parser = response::parse_size)]
    body_size: Option<usize>,
    /// Status mix: 200, or 200=0.9,503=0.1.
    #[arg(long, default_value = "200", value_name = "MIX", value_parser = parse_status)]
    status: StatusMix,
    /// A fault active from the start (repeatable); see the list below.
    #[arg(long = "fault", value_name = "SPEC", value_parser = parse_fault)]
    faults: Vec<BackendFault>,
    /// Request log (JSON Lines).
    #[arg(long, value_name = "FILE")]
    log: Option<PathBuf>,
    /// Control API address (/metrics, /stats, /faults).
    #[arg(long, value_name = "ADDR:PORT")]
    control: Option<SocketAddr>,
    /// Seed of the latency/status random stream (faults take their own seed=).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Run the DB stand-in instead: echo every line received on --listen.
    #[arg(long, conflicts_with_all = ["db", "faults", "control", "log"])]
    echo_db: bool,
    /// Each request makes --round-trips sequential round trips to this DB through a pool.
    #[arg(long, value_name = "ADDR:PORT")]
    db: Option<SocketAddr>,
    /// Round trips per request (with --db).
    #[arg(long, default_value_t = 1, value_name = "K", requires = "db")]
    round_trips: u32,
    /// Pool size (with --db).
    #[arg(long, default_value_t = 10, value_name = "N", requires = "db")]
    pool: usize,
    /// Longest wait for a pool connection before 503 (with --db).
    #[arg(long, default_value = "30s", value_name = "DUR", value_parser = parse_dur, requires = "db")]
    acquire_timeout: Duration,
    /// Stop after this long (default: until Ctrl-C or SIGTERM).
    #[arg(long, value_name = "DUR", value_parser = parse_dur)]
    duration: Option<Duration>,
    /// Permit non-loopback addresses.
    #[arg(long)]
    allow_remote: bool,
}

fn parse_latency(s: &str) -> Result<Latency, String> {
    s.parse()
}

fn parse_status(s: &str) -> Result<StatusMix, String> {
    s.parse()
}

fn parse_fault(s: &str) -> Result<BackendFault, String> {
    s.parse()
}

fn parse_dur(s: &str) -> Result<Duration, String> {
    resolvelab_core::dur::parse(s)
}

/// Wait for Ctrl-C, SIGTERM or the optional duration.
pub(crate) async fn until_stopped(duration: Option<Duration>) {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    let term = async {
        match term.as_mut() {
            Some(t) => {
                t.recv().await;
            }
            None => std::future::pending::<()>().await,
        }
    };
    let timer = async {
        match duration {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term => {}
        _ = timer => {}
    }
}

/// Run `resolvelab backend`.
pub fn run(args: Args, _ctx: &Ctx) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async move {
        resolvelab_core::policy::check_target(args.listen, args.allow_remote)
            .map_err(anyhow::Error::msg)?;
        if args.echo_db {
            let db = EchoDb::start(args.listen).await?;
            println!("echo-db listening on {}", db.local_addr());
            until_stopped(args.duration).await;
            db.shutdown();
            eprintln!("echo-db: {} queries", db.queries());
            return Ok(ExitCode::SUCCESS);
        }
        let mut cfg = BackendConfig::new(&args.name.clone().unwrap_or_default(), args.listen);
        cfg.latency = args.latency;
        cfg.body_size = args.body_size;
        cfg.status = args.status;
        cfg.faults = args.faults;
        cfg.log = args.log;
        cfg.control = args.control;
        cfg.seed = args.seed;
        cfg.allow_remote = args.allow_remote;
        cfg.db = args.db.map(|addr| DbConfig {
            addr,
            round_trips: args.round_trips,
            pool: args.pool,
            acquire_timeout: args.acquire_timeout,
        });
        let b = Backend::start(cfg).await?;
        match b.control_addr() {
            Some(c) => println!(
                "backend {} listening on {} (control http://{c})",
                b.name(),
                b.local_addr()
            ),
            None => println!("backend {} listening on {}", b.name(), b.local_addr()),
        }
        for f in b.faults() {
            println!("  fault {}: {}", f.name, f.spec);
        }
        until_stopped(args.duration).await;
        let stats = b.stats();
        b.shutdown().await;
        eprintln!(
            "backend {}: {} requests on {} connections",
            stats.name, stats.requests, stats.connections
        );
        for f in &stats.faults {
            eprintln!("  fault {}: {} hits{}", f.name, f.hits, caught(f));
        }
        Ok(ExitCode::SUCCESS)
    })
}

fn caught(f: &fault::FaultStatus) -> String {
    if f.kind == "reclaim" {
        format!(" ({} requests caught in the gap)", f.caught)
    } else {
        String::new()
    }
}
