//! `resolvelab dns` — the mode-controlled authoritative DNS server, and `dns ctl`, its client.

use crate::Ctx;
use anyhow::Context;
use resolvelab_dns::{
    ControlClient, DnsConfig, DnsServer, MODES_HELP, NameConfig, NameStatus, SetRequest, Timeline,
    Unknown, Zone, zone,
};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

const AFTER_HELP: &str = "\
Examples:
  # GSLB-style: one A record per answer, alternating, TTL 1 s; control API on :5380
  resolvelab dns --listen 127.0.0.1:5300 \\
      --name app.test.local=alternate:127.0.0.20,127.0.0.30 \\
      --control 127.0.0.1:5380 --log dns.jsonl
  dig @127.0.0.1 -p 5300 app.test.local A +short

  # NXDOMAIN for 2 s, starting exactly at the next query for the name
  export RESOLVELAB_DNS_CONTROL=127.0.0.1:5380
  resolvelab dns ctl set app.test.local nxdomain --for 2s --align next-query
  resolvelab dns ctl show

  # names from a TOML zone file, scheduled changes from a timeline file
  resolvelab dns --listen 127.0.0.1:5300 --zone zone.toml --timeline timeline.toml

  # a name with its own TTL and an AAAA record (the \"AAAA pollution\" case)
  resolvelab dns --name 'app.test.local=static:127.0.0.20;ttl=5s;aaaa=::1'

Modes (per name, switchable at runtime with `dns ctl set`):
";

const AFTER_HELP_TAIL: &str = "

Files:
  --zone FILE       [names.\"app.test.local\"] mode = \"…\", ttl = \"1s\", aaaa = [\"::1\"];
                    top level: ttl, unknown = \"nxdomain\"|\"refused\", seed
  --timeline FILE   [[change]] at = \"10s\", name = \"…\", mode = \"nxdomain\", for = \"2s\",
                    align = \"next-query\"
  --log FILE        JSON Lines, first line {\"schema\":\"resolvelab.dns/v1\"}, then one object per
                    query: t_us client qname qtype transport id mode rcode answers ttl changed injected
                    (view K on a --view address)

Control API (--control ADDR): GET /names, GET|PUT /names/NAME {\"mode\",\"for\",\"align\"},
PUT|DELETE /names/NAME/views/K {\"mode\"} (a --view's own answer: `dns ctl set … --view K`),
GET /metrics (Prometheus), GET /healthz. Only loopback addresses are served and answered
unless --allow-remote.";

fn long_help() -> String {
    format!("{AFTER_HELP}{MODES_HELP}{AFTER_HELP_TAIL}")
}

/// Arguments of `resolvelab dns`.
#[derive(Debug, clap::Args)]
#[command(
    about = "Mode-controlled authoritative DNS server (UDP+TCP) with a control API",
    after_help = long_help(),
    args_conflicts_with_subcommands = true
)]
pub struct Args {
    /// UDP and TCP address to serve on (port 0 picks a free port, printed on stdout).
    #[arg(long, default_value = "127.0.0.1:5300", value_name = "ADDR:PORT")]
    listen: SocketAddr,
    /// A name and its mode: NAME=MODE[;ttl=DUR][;aaaa=IP,…] (repeatable).
    #[arg(long = "name", value_name = "NAME=MODE", value_parser = NameConfig::parse_cli)]
    names: Vec<NameConfig>,
    /// TOML zone file with names, modes, TTLs and AAAA records.
    #[arg(long, value_name = "FILE")]
    zone: Option<PathBuf>,
    /// Default TTL of the records (`1s`, `30s`, or seconds).
    #[arg(long, value_name = "DUR", value_parser = zone::parse_ttl)]
    ttl: Option<u32>,
    /// How to answer names that are not served.
    #[arg(long, value_name = "nxdomain|refused")]
    unknown: Option<Unknown>,
    /// Seed of the `weighted` mode's RNG.
    #[arg(long, value_name = "N")]
    seed: Option<u64>,
    /// Query log, JSON Lines (schema resolvelab.dns/v1).
    #[arg(long, value_name = "FILE")]
    log: Option<PathBuf>,
    /// Serve the HTTP JSON control API and /metrics on this address.
    #[arg(long, value_name = "ADDR:PORT")]
    control: Option<SocketAddr>,
    /// Serve this address too, as view K (the K-th `--view`, from 1): it answers as the main
    /// address until `dns ctl set NAME MODE --view K` gives it its own answer — one resolver
    /// (one site's, one instance's) per view. Repeatable; port 0 picks a free one.
    #[arg(long = "view", value_name = "ADDR:PORT")]
    views: Vec<SocketAddr>,
    /// Bearer token the control API requires.
    #[arg(
        long,
        env = "RESOLVELAB_DNS_TOKEN",
        value_name = "TOKEN",
        hide_env_values = true
    )]
    token: Option<String>,
    /// Scheduled mode changes (TOML, `[[change]]` entries).
    #[arg(long, value_name = "FILE")]
    timeline: Option<PathBuf>,
    /// Stop after this long (default: until Ctrl-C).
    #[arg(long, value_name = "DUR", value_parser = resolvelab_core::dur::parse)]
    duration: Option<std::time::Duration>,
    /// Allow non-loopback listen/control addresses and answers.
    #[arg(long)]
    allow_remote: bool,
    /// Print every query on stderr.
    #[arg(short, long)]
    verbose: bool,
    #[command(subcommand)]
    command: Option<Sub>,
}

#[derive(Debug, clap::Subcommand)]
enum Sub {
    /// Talk to a running server's control API.
    Ctl(CtlArgs),
    /// Probe a resolver: every name's answers over time (evidence for `diagnose --dns`).
    Watch(super::dns_watch::WatchArgs),
}

/// `resolvelab dns ctl`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  resolvelab dns ctl --control 127.0.0.1:5380 show
  resolvelab dns ctl --control 127.0.0.1:5380 show app.test.local --json
  resolvelab dns ctl --control 127.0.0.1:5380 set app.test.local alternate:127.0.0.20,127.0.0.30
  resolvelab dns ctl --control 127.0.0.1:5380 set app.test.local nxdomain --for 6s \\
      --align next-query
  resolvelab dns ctl --control 127.0.0.1:5380 set app.test.local delay:300ms --for 10s
  resolvelab dns ctl --control 127.0.0.1:5380 set app.test.local default
  resolvelab dns ctl --control 127.0.0.1:5380 metrics")]
struct CtlArgs {
    /// The server's control address.
    #[arg(
        long,
        env = "RESOLVELAB_DNS_CONTROL",
        default_value = "127.0.0.1:5380",
        value_name = "ADDR:PORT"
    )]
    control: SocketAddr,
    /// Bearer token, if the server requires one.
    #[arg(
        long,
        env = "RESOLVELAB_DNS_TOKEN",
        value_name = "TOKEN",
        hide_env_values = true
    )]
    token: Option<String>,
    /// Allow a non-loopback control address.
    #[arg(long)]
    allow_remote: bool,
    #[command(subcommand)]
    op: CtlOp,
}

#[derive(Debug, clap::Subcommand)]
enum CtlOp {
    /// Show every name (or one) with its mode, hits and pending changes.
    #[command(
        after_help = "Examples:\n  resolvelab dns ctl --control 127.0.0.1:5380 show\n  \
resolvelab dns ctl --control 127.0.0.1:5380 show app.test.local --json"
    )]
    Show {
        /// One name only.
        name: Option<String>,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Set a name's mode (`default` = its configured mode).
    #[command(after_help = "Examples:\n  \
resolvelab dns ctl --control 127.0.0.1:5380 set app.test.local alternate:127.0.0.20,127.0.0.30\n  \
resolvelab dns ctl --control 127.0.0.1:5380 set app.test.local nxdomain --for 6s \\\n      \
--align next-query\n  \
resolvelab dns ctl --control 127.0.0.1:5380 set app.test.local default\n  \
resolvelab dns ctl --control 127.0.0.1:5380 set app.test.local static:127.0.0.30 --view 1")]
    Set {
        /// The name.
        name: String,
        /// The mode (see `resolvelab dns --help`).
        mode: String,
        /// Revert to the previous mode after this long.
        #[arg(long = "for", value_name = "DUR")]
        for_: Option<String>,
        /// `next-query`: take effect exactly at the next query for the name.
        #[arg(long, value_name = "next-query")]
        align: Option<String>,
        /// Only the queries that arrive on view K (the K-th `--view` of the server): a
        /// resolver of one site gets its own answer, as a topology-aware GSLB gives it
        /// (`default`: as the name again). Not with `--for`/`--align`.
        #[arg(long, value_name = "K", conflicts_with_all = ["for_", "align"])]
        view: Option<u16>,
        /// Print JSON instead of a line.
        #[arg(long)]
        json: bool,
    },
    /// Print the Prometheus metrics.
    #[command(
        after_help = "Examples:\n  resolvelab dns ctl --control 127.0.0.1:5380 metrics\n  \
resolvelab dns ctl --control 127.0.0.1:5380 metrics | grep resolvelab_dns_queries"
    )]
    Metrics,
}

/// Run `resolvelab dns`.
pub fn run(args: Args, _ctx: &Ctx) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    match args.command {
        Some(Sub::Ctl(c)) => rt.block_on(ctl(c)),
        Some(Sub::Watch(w)) => rt.block_on(super::dns_watch::run(w)),
        None => rt.block_on(serve(args)),
    }
}

async fn serve(args: Args) -> anyhow::Result<ExitCode> {
    let mut cfg = DnsConfig {
        listen: args.listen,
        log: args.log,
        control: args.control,
        token: args.token,
        allow_remote: args.allow_remote,
        views: args.views.clone(),
        ..DnsConfig::default()
    };
    if let Some(p) = &args.zone {
        let z = Zone::load(p).map_err(anyhow::Error::msg)?;
        cfg.ttl = z.ttl.unwrap_or(cfg.ttl);
        cfg.unknown = z.unknown.unwrap_or(cfg.unknown);
        cfg.seed = z.seed.unwrap_or(cfg.seed);
        cfg.names = z.names;
    }
    cfg.names.extend(args.names);
    if let Some(t) = args.ttl {
        cfg.ttl = t;
    }
    if let Some(u) = args.unknown {
        cfg.unknown = u;
    }
    if let Some(s) = args.seed {
        cfg.seed = s;
    }
    if let Some(p) = &args.timeline {
        cfg.timeline = Some(Timeline::load(p).map_err(anyhow::Error::msg)?);
    }
    if cfg.names.is_empty() {
        eprintln!(
            "dns: warning: no names given (--name NAME=MODE or --zone FILE): every query gets {}",
            match cfg.unknown {
                Unknown::Nxdomain => "NXDOMAIN",
                Unknown::Refused => "REFUSED",
            }
        );
    }
    let names = cfg.names.clone();
    let dns = DnsServer::start(cfg).await?;
    // A machine-readable first line: tests and scripts read the bound port from it.
    println!("listening udp+tcp {}", dns.local_addr());
    for (k, v) in dns.view_addrs().iter().enumerate() {
        println!("view {} udp+tcp {v}", k + 1);
    }
    if let Some(c) = dns.control_addr() {
        println!("control http://{c}");
    }
    for n in &names {
        eprintln!("dns: {} = {}", n.name, n.mode);
    }
    use std::io::Write;
    let _ = std::io::stdout().flush();

    let mut changes = dns.subscribe_changes();
    let mut queries = args.verbose.then(|| dns.subscribe());
    let stop = async {
        match args.duration {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(stop);
    // SIGTERM (supervisors, `kill`) stops as cleanly as Ctrl-C: the query log is flushed.
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("cannot watch SIGTERM")?;
    loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => break,
            _ = term.recv() => break,
            _ = &mut stop => break,
            c = changes.recv() => {
                if let Ok(c) = c {
                    eprintln!("dns: {} {}: {} -> {} (hits {})", c.reason, c.name, c.from, c.to, c.hits);
                }
            }
            q = async { match queries.as_mut() { Some(r) => r.recv().await.ok(), None => std::future::pending().await } } => {
                if let Some(q) = q {
                    let answers: Vec<String> = q.answers.iter().map(|a| a.to_string()).collect();
                    eprintln!(
                        "dns: {} {} {} {} {} [{}]{}",
                        q.transport_str(), q.client, q.qname, q.qtype, q.rcode,
                        answers.join(","), if q.changed { " changed" } else { "" }
                    );
                }
            }
        }
    }
    let hits = dns.hits();
    dns.shutdown().await?;
    eprintln!("dns: stopped ({hits} injection hits)");
    Ok(ExitCode::SUCCESS)
}

trait TransportStr {
    fn transport_str(&self) -> &'static str;
}

impl TransportStr for resolvelab_dns::QueryEvent {
    fn transport_str(&self) -> &'static str {
        match self.transport {
            resolvelab_dns::Transport::Udp => "udp",
            resolvelab_dns::Transport::Tcp => "tcp",
        }
    }
}

fn print_table(rows: &[NameStatus]) {
    println!(
        "{:<32} {:<44} {:>8} {:>8}  NOTE",
        "NAME", "MODE", "QUERIES", "HITS"
    );
    for s in rows {
        let mut note = Vec::new();
        if s.injected {
            note.push(format!("default {}", s.default_mode));
        }
        if let Some(p) = &s.pending {
            let f = s
                .pending_for_ms
                .map(|ms| format!(" for {ms}ms"))
                .unwrap_or_default();
            note.push(format!("pending {p}{f} at next query"));
        }
        if let (Some(to), Some(ms)) = (&s.revert_to, s.revert_in_ms) {
            note.push(format!("reverts to {to} in {ms}ms"));
        }
        for (k, m) in &s.views {
            note.push(format!("view {k}: {m}"));
        }
        println!(
            "{:<32} {:<44} {:>8} {:>8}  {}",
            s.name,
            s.mode,
            s.queries,
            s.hits,
            note.join("; ")
        );
    }
}

async fn ctl(c: CtlArgs) -> anyhow::Result<ExitCode> {
    let client = ControlClient::new(c.control, c.token, c.allow_remote)?;
    match c.op {
        CtlOp::Show { name, json } => {
            let rows = match name {
                Some(n) => vec![client.show(&n).await?],
                None => client.list().await?,
            };
            if json {
                println!("{}", serde_json::to_string_pretty(&rows)?);
            } else {
                print_table(&rows);
            }
        }
        CtlOp::Set {
            name,
            mode,
            for_,
            align,
            view,
            json,
        } => {
            // Validate locally first so typos get the full mode list, not an HTTP error.
            let spec = mode
                .parse::<resolvelab_dns::ModeSpec>()
                .map_err(anyhow::Error::msg)?;
            if let Some(k) = view {
                let mode = (spec != resolvelab_dns::ModeSpec::Default).then_some(mode.as_str());
                let s = client.set_view(&name, k, mode).await?;
                match json {
                    true => println!("{}", serde_json::to_string_pretty(&s)?),
                    false => print_table(&[s]),
                }
                return Ok(ExitCode::SUCCESS);
            }
            if let Some(f) = &for_ {
                resolvelab_core::dur::parse(f).map_err(|e| anyhow::anyhow!("--for: {e}"))?;
            }
            if let Some(a) = &align {
                a.parse::<resolvelab_dns::Align>()
                    .map_err(|e| anyhow::anyhow!("--align: {e}"))?;
            }
            let s = client.set(&name, &SetRequest { mode, for_, align }).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&s)?);
            } else {
                print_table(&[s]);
            }
        }
        CtlOp::Metrics => print!("{}", client.metrics().await?),
    }
    Ok(ExitCode::SUCCESS)
}
