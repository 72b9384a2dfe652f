//! `resolvelab proxy` — a TCP fault proxy (Toxiproxy-like) with per-fault hit counters and a
//! JSON Lines log of every connection.

use crate::Ctx;
use resolvelab_proxy::control::{self, ProxySet};
use resolvelab_proxy::{Proxy, ProxyConfig, ToxicSpec, file};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

const AFTER_HELP: &str = "\
Examples:
  # 200 ms on every response chunk of a DB link (DOMAIN.md §6), control API on 8474
  resolvelab proxy --listen 127.0.0.40:5432 --upstream 127.0.0.41:5432 \\
      --fault latency:delay=200ms,jitter=10ms,direction=downstream --control 127.0.0.1:8474

  # several named proxies from a file, every connection logged
  resolvelab proxy --config proxies.toml --log proxy.jsonl

  # faults at runtime (the proxy is named `main` unless --name is given)
  curl -d 'reset_peer:timeout=0,toxicity=0.2' http://127.0.0.1:8474/proxies/main/faults
  curl http://127.0.0.1:8474/proxies/main/faults      # hit counters
  curl -X DELETE http://127.0.0.1:8474/proxies/main/faults/reset_peer_downstream
  curl -X POST http://127.0.0.1:8474/reset            # remove every fault
  curl http://127.0.0.1:8474/metrics                  # Prometheus text

Faults (SPEC = KIND[:key=value,...]; every kind also takes direction=upstream|downstream
(default downstream = server->client), toxicity=0..1 (per connection), for=DUR, seed=N, name=NAME):
  latency      delay=DUR, jitter=DUR         each chunk forwarded delay±jitter after it arrived
  bandwidth    rate=KB/s                     pace the direction
  slicer       average_size=N, size_variation=N, delay=DUR   cut chunks into small pieces
  timeout      timeout=DUR                   drop data; close after DUR (0 = never)
  reset_peer   timeout=DUR                   TCP RST after DUR (0 = at once)
  limit_data   bytes=N                       close after N bytes
  slow_close   delay=DUR                     hold the close back
  down                                       stop listening (connection refused); use for=DUR
Hits count the connections a fault really acted on (for `down`: windows the port was closed);
bytes and chunks affected are counted too.

Proxy file (--config):
  control = \"127.0.0.1:8474\"
  log = \"proxy.jsonl\"
  [[proxy]]
  name = \"db\"
  listen = \"127.0.0.40:5432\"
  upstream = \"127.0.0.41:5432\"
  faults = [\"latency:delay=200ms,direction=downstream\"]

Log: JSON Lines, first line {\"schema\":\"resolvelab.proxy/v1\"}, then open/close events per
connection (open_us close_us bytes_up bytes_down faults end) and fault/down/up events.";

/// Arguments of `resolvelab proxy`.
#[derive(Debug, clap::Args)]
#[command(
    about = "TCP fault proxy: latency, bandwidth, slicer, timeout, reset_peer, limit_data, slow_close, down",
    after_help = AFTER_HELP,
    group(clap::ArgGroup::new("what").required(true).args(["listen", "config"]))
)]
pub struct Args {
    /// Address to listen on (with --upstream).
    #[arg(
        long,
        value_name = "ADDR:PORT",
        requires = "upstream",
        conflicts_with = "config"
    )]
    listen: Option<SocketAddr>,
    /// Address to forward to (loopback only unless --allow-remote).
    #[arg(long, value_name = "ADDR:PORT", requires = "listen")]
    upstream: Option<SocketAddr>,
    /// Name of the proxy in the control API.
    #[arg(long, default_value = "main")]
    name: String,
    /// A fault active from the start (repeatable); see the list below.
    #[arg(long = "fault", value_name = "SPEC", value_parser = parse_toxic, requires = "listen")]
    faults: Vec<ToxicSpec>,
    /// Several named proxies from a TOML file.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Control API address (overrides the file's `control`).
    #[arg(long, value_name = "ADDR:PORT")]
    control: Option<SocketAddr>,
    /// Connection log (JSON Lines; overrides the file's `log`).
    #[arg(long, value_name = "FILE")]
    log: Option<PathBuf>,
    /// Stop after this long (default: until Ctrl-C or SIGTERM).
    #[arg(long, value_name = "DUR", value_parser = parse_dur)]
    duration: Option<Duration>,
    /// Permit non-loopback addresses.
    #[arg(long)]
    allow_remote: bool,
}

fn parse_toxic(s: &str) -> Result<ToxicSpec, String> {
    s.parse()
}

fn parse_dur(s: &str) -> Result<Duration, String> {
    resolvelab_core::dur::parse(s)
}

/// Run `resolvelab proxy`.
pub fn run(args: Args, _ctx: &Ctx) -> anyhow::Result<ExitCode> {
    let (mut control_addr, mut log_path, mut configs) = (None, None, Vec::new());
    if let Some(path) = &args.config {
        let f = file::load(path)?;
        control_addr = f.control;
        log_path = f.log.clone();
        for p in &f.proxy {
            let mut c = ProxyConfig::new(&p.name, p.listen, p.upstream);
            c.faults = p.specs(path)?;
            configs.push(c);
        }
    }
    if let (Some(listen), Some(upstream)) = (args.listen, args.upstream) {
        let mut c = ProxyConfig::new(&args.name, listen, upstream);
        c.faults = args.faults.clone();
        configs.push(c);
    }
    control_addr = args.control.or(control_addr);
    log_path = args.log.clone().or(log_path);
    for c in &configs {
        resolvelab_core::policy::check_target(c.listen, args.allow_remote)
            .map_err(anyhow::Error::msg)?;
    }
    if let Some(c) = control_addr {
        resolvelab_core::policy::check_target(c, args.allow_remote).map_err(anyhow::Error::msg)?;
    }
    let log = log_path
        .as_deref()
        .map(|p| resolvelab_core::jsonl::JsonlWriter::create(p, resolvelab_proxy::LOG_SCHEMA))
        .transpose()?
        .map(Arc::new);
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async move {
        let set = ProxySet::new();
        for mut c in configs {
            c.log = log.clone();
            c.allow_remote = args.allow_remote;
            let name = c.name.clone();
            let p = Proxy::start(c)
                .await
                .map_err(|e| anyhow::anyhow!("proxy `{name}`: {e:#}"))?;
            println!(
                "proxy {} listening on {} -> {}",
                p.name(),
                p.local_addr(),
                p.upstream()
            );
            for f in p.faults() {
                println!("  fault {}: {}", f.name, f.spec);
            }
            set.insert(p);
        }
        if let Some(addr) = control_addr {
            let l = tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|e| anyhow::anyhow!("cannot listen on control address {addr}: {e}"))?;
            println!("control API on http://{}", l.local_addr()?);
            control::serve(set.clone(), l);
        }
        super::backend::until_stopped(args.duration).await;
        let all: Vec<_> = set.all().iter().map(|p| p.stats()).collect();
        set.shutdown().await;
        for s in all {
            eprintln!(
                "proxy {}: {} connections, {} B up, {} B down, {} connect errors",
                s.name, s.connections, s.bytes_upstream, s.bytes_downstream, s.connect_errors
            );
            for f in s.faults {
                eprintln!(
                    "  fault {}: {} hits ({} chunks, {} B)",
                    f.name, f.hits, f.chunks, f.bytes
                );
            }
        }
        Ok(ExitCode::SUCCESS)
    })
}
