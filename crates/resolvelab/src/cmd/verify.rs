//! `resolvelab verify`: your nginx configuration's DNS-fed upstreams played through the event
//! library on real nginx, with the linter's fixes before → after, as a report card.

use crate::Ctx;
use anyhow::Context as _;
use resolvelab_lab::engine;
use resolvelab_lab::options::RunOptions;
use resolvelab_verify::events::Event;
use resolvelab_verify::fixes::Selection;
use resolvelab_verify::rewrite::Tls;
use resolvelab_verify::{Request, card};
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Output format of the card.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Format {
    /// Markdown.
    Md,
    /// JSON (`resolvelab.verify/v1`).
    Json,
    /// Self-contained HTML.
    Html,
}

/// Arguments of `resolvelab verify`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Each upstream whose peers come from DNS (`server NAME … resolve`, a name resolved at start, \
a variable proxy_pass with a resolver) is played on real nginx through the event library: nxdomain, servfail, \
silence, swap-race, restart, move, reload-nxdomain. The lab keeps your blocks as written and lists every line it \
changed (resolver → its DNS authority, ports → its backends, listen → loopback) or dropped (logs, TLS toward \
clients, caches, other servers). https:// upstreams are played over TLS on an nginx with the SSL module \
(--engine nginx-1.31 or nginx-1.22): the backends present a certificate of an authority the run makes; on the \
lab's 1.28.3 build (no SSL module) they are rewritten to http://, and the card says so. Nothing in your configuration can reach the network: the rendered configuration \
names only loopback before nginx starts.\n\n\
Each event's scenario is written to DIR/scenarios/ (`resolvelab run FILE` plays it again) and its run to DIR/runs/.\n\n\
Examples:\n  resolvelab verify --nginx-conf /etc/nginx/nginx.conf\n  \
nginx -T | resolvelab verify --nginx-conf - --upstream be\n  \
resolvelab verify --nginx-conf nginx.conf --events nxdomain,reload-nxdomain --no-fixes\n  \
resolvelab verify --nginx-conf nginx.conf --events restart --fix max-fails-0   # one fix's A/B\n  \
resolvelab verify --nginx-conf nginx.conf --plan            # what would run, and every change\n  \
resolvelab verify --nginx-conf nginx.conf --repeat 3        # each cell's spread over 3 runs\n  \
resolvelab verify --nginx-conf nginx.conf --engine nginx-1.31   # https:// upstreams over TLS\n  \
resolvelab verify --nginx-conf nginx.conf --quick --per-day 8000   # a day at your traffic\n  \
resolvelab --nginx /usr/sbin/nginx verify --nginx-conf nginx.conf --format html -o card.html\n  \
# CI on a configuration repository: exit 1 when an event got worse\n  \
resolvelab verify --nginx-conf nginx.conf --format json --baseline main.json\n\n\
Exit status: 0 the card was written, 1 an event got worse than --baseline, 2 error (unreadable configuration; a construct the lab cannot play — the card is still written, naming the line)."
)]
pub struct Args {
    /// The configuration: nginx.conf (includes followed), a conf.d fragment, or `nginx -T`
    /// output; `-` reads standard input.
    #[arg(long, value_name = "FILE|-")]
    nginx_conf: PathBuf,
    /// Verify only this upstream (or host of a `proxy_pass`); repeatable.
    #[arg(long, value_name = "NAME")]
    upstream: Vec<String>,
    /// The events to play, comma-separated (default: all).
    #[arg(long, value_delimiter = ',', value_name = "EVENT,…")]
    events: Vec<Event>,
    /// Requests per second of every run.
    #[arg(long, default_value_t = 200)]
    rate: u32,
    /// The requests' methods (`GET=0.8,POST=0.2`): a retry must not send a POST twice, and the
    /// card shows which methods still fail.
    #[arg(long, value_name = "METHOD=SHARE,…")]
    mix: Option<String>,
    /// TTL of the lab's answers: nginx's re-query period when your resolver sets no `valid=`.
    #[arg(long, default_value = "10s", value_parser = humantime_like)]
    ttl: std::time::Duration,
    /// The request path (default: the first prefix location that sends to the upstream).
    #[arg(long)]
    path: Option<String>,
    /// Leave out this directive (a third-party module's the lab's nginx lacks); repeatable,
    /// listed on the card.
    #[arg(long, value_name = "DIRECTIVE")]
    drop: Vec<String>,
    /// Look up absolute `include` paths under DIR (a copy of the machine's /etc/nginx…), as
    /// `lint --sysroot` does.
    #[arg(long, value_name = "DIR")]
    sysroot: Option<PathBuf>,
    /// Play the events only, not the linter's fixes.
    #[arg(long)]
    no_fixes: bool,
    /// Replay only these of the linter's fixes, comma-separated: a fix (`max-fails-0`,
    /// `per-dc`, `retry-shim`, …) or a rule (`resolve-max-fails`: each of its fixes); the
    /// others are listed as left out.
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "FIX|RULE,…",
        conflicts_with = "no_fixes"
    )]
    fix: Vec<String>,
    /// Runs per event, seeds 1 to N (1–10): each cell shows the median run and the runs'
    /// range, and a fix is judged run by run (`mixed` when the runs disagree).
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=10))]
    repeat: u32,
    /// Also predict a day at this many requests per second on the model: each upstream under
    /// production's churn (the answer changing at every re-query, --first-try-failure), with
    /// what each mitigation would change.
    #[arg(long, value_name = "RPS", conflicts_with = "plan")]
    per_day: Option<f64>,
    /// With --per-day: the probability that a try on a reused keep-alive connection fails.
    #[arg(long, default_value_t = 0.001, value_name = "P", requires = "per_day")]
    first_try_failure: f64,
    /// With --per-day: traffic simulated per variant (more = tighter intervals).
    #[arg(long, default_value = "10m", value_parser = humantime_like, requires = "per_day")]
    sample: std::time::Duration,
    /// Play on the model (nginx 1.28's upstream/resolve logic, `--engine sim`) instead of real
    /// nginx: seconds instead of minutes, for what the model plays (round-robin upstreams).
    #[arg(long, conflicts_with = "engine")]
    quick: bool,
    /// Print what would be played — targets, events, every change — and run nothing.
    #[arg(long)]
    plan: bool,
    /// nginx engine: `nginx` (1.28.3, or the global --nginx binary; the lab's build has no SSL
    /// module, so `https://` is played as `http://`), `nginx-1.31` or `nginx-1.22` (Debian 12's:
    /// no `resolve`, so a target that needs it is refused, and so is the `resolve` fix); both
    /// play `https://` over TLS.
    #[arg(long, default_value = "nginx", value_parser = ["nginx", "nginx-1.28", "nginx-1.31", "nginx-1.22"])]
    engine: String,
    /// Where the scenarios and runs go (default: runs/verify-<UTC stamp>).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// An earlier card (`--format json`): exit 1 when an event now fails at least twice as
    /// often, and 10 requests more, than it did there (CI on a configuration repository).
    #[arg(long, value_name = "OLD.json", conflicts_with = "plan")]
    baseline: Option<PathBuf>,
    /// Card format.
    #[arg(long, value_enum, default_value = "md")]
    format: Format,
    /// Write the card here instead of standard output.
    #[arg(long, short = 'o', value_name = "FILE")]
    output: Option<PathBuf>,
}

/// `--per-day`'s traffic, checked at the edge.
fn traffic(
    rps: f64,
    p: f64,
    sample: std::time::Duration,
) -> anyhow::Result<resolvelab_verify::perday::Traffic> {
    if !(rps.is_finite() && rps > 0.0 && rps <= 1e6) {
        anyhow::bail!("--per-day {rps}: give requests per second above 0 (at most 1,000,000)");
    }
    if !(0.0..=1.0).contains(&p) {
        anyhow::bail!("--first-try-failure {p}: give a probability within 0..=1");
    }
    if sample < std::time::Duration::from_secs(1) {
        anyhow::bail!("--sample must be at least 1s");
    }
    Ok(resolvelab_verify::perday::Traffic {
        rps,
        first_try_failure: p,
        sample: resolvelab_sim::nginx::Us(sample.as_micros() as i64),
    })
}

fn humantime_like(s: &str) -> Result<std::time::Duration, String> {
    s.parse::<resolvelab_core::dur::Dur>()
        .map(|d| d.get())
        .map_err(|e| e.to_string())
}

/// Read the configuration (a FIFO such as `<(…)` too) and load it in its context.
fn load(path: &Path, sysroot: Option<&Path>) -> anyhow::Result<(String, resolvelab_lint::Config)> {
    let (name, text, prefix) = if path.as_os_str() == "-" {
        let mut t = String::new();
        std::io::stdin()
            .read_to_string(&mut t)
            .context("reading standard input")?;
        ("-".to_string(), t, None)
    } else {
        let bytes =
            std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
        (
            path.display().to_string(),
            String::from_utf8_lossy(&bytes).into_owned(),
            path.parent().map(Path::to_path_buf),
        )
    };
    // An include this machine cannot read (another machine's /etc/nginx/…) is left out and
    // listed on the card, not a stop: what matters is the upstreams, usually in the main file.
    let cfg = resolvelab_lint::load::load_text_lenient(&name, text, prefix.as_deref(), sysroot)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let cfg = resolvelab_lint::in_context(cfg, resolvelab_lint::Context::Auto);
    Ok((name, cfg))
}

/// Run `resolvelab verify`.
pub fn run(args: Args, ctx: &Ctx) -> anyhow::Result<ExitCode> {
    let (source, cfg) = load(&args.nginx_conf, args.sysroot.as_deref())?;
    let baseline: Option<serde_json::Value> = match &args.baseline {
        Some(p) => Some(
            serde_json::from_slice(
                &std::fs::read(p).with_context(|| format!("cannot read {}", p.display()))?,
            )
            .with_context(|| format!("{}: not JSON", p.display()))?,
        ),
        None => None,
    };
    let req = Request {
        events: if args.events.is_empty() {
            Event::ALL.to_vec()
        } else {
            args.events.clone()
        },
        only: args.upstream.clone(),
        settings: resolvelab_verify::events::Settings {
            rate: args.rate,
            ttl: args.ttl,
            fixed_names: false,
            mix: args.mix.clone(),
        },
        rewrite: resolvelab_verify::rewrite::Options {
            path: args.path.clone(),
            drop: args.drop.clone(),
            tls: if args.quick {
                Tls::MODEL
            } else if engine::by_name(&args.engine)?.upstream_tls(&ctx.run_options()) {
                Tls::Play
            } else {
                Tls::NO_SSL
            },
        },
        fixes: match (args.no_fixes, args.fix.is_empty()) {
            (true, _) => Selection::None,
            (false, true) => Selection::All,
            (false, false) => Selection::only(&args.fix).map_err(anyhow::Error::msg)?,
        },
        model: args.quick,
        repeat: args.repeat,
        per_day: args
            .per_day
            .map(|rps| traffic(rps, args.first_try_failure, args.sample))
            .transpose()?,
    };
    let plans = resolvelab_verify::prepare(&cfg, &req);
    if plans.is_empty() {
        // What an unread include defines is not seen: say so where "nothing found" is said.
        for (at, file, why) in &cfg.unread {
            eprintln!(
                "verify: {at}: include {file} not read ({why}): an upstream it defines is not seen"
            );
        }
    }
    if !args.upstream.is_empty() && plans.is_empty() {
        anyhow::bail!(
            "{source}: no DNS-fed upstream named {}: `resolvelab verify --plan --nginx-conf {source}` lists them",
            args.upstream.join(", ")
        );
    }
    let cards = if args.plan {
        plans
            .iter()
            .map(|p| card::TargetCard::planned(p, &req.settings))
            .collect()
    } else {
        Vec::new()
    };
    let (nginx, cards) = if args.plan {
        ("none (--plan: nothing was run)".to_string(), cards)
    } else {
        play(&cfg, &plans, &req, &args, ctx)?
    };
    let card = resolvelab_verify::card(&source, &nginx, &req, cards);
    let text = match args.format {
        Format::Md => resolvelab_core::doc::markdown::render(&card::doc(&card)),
        Format::Json => serde_json::to_string_pretty(&card)? + "\n",
        Format::Html => resolvelab_core::doc::html::render(&card::doc(&card), ""),
    };
    match &args.output {
        Some(p) => {
            std::fs::write(p, text).with_context(|| format!("cannot write {}", p.display()))?
        }
        None => std::io::stdout().write_all(text.as_bytes())?,
    }
    let refused: Vec<&str> = card
        .targets
        .iter()
        .filter(|t| !t.target.locations.is_empty())
        .filter_map(|t| t.refused.as_deref())
        .collect();
    for r in &refused {
        eprintln!("error: {r}");
    }
    if !refused.is_empty() {
        return Ok(ExitCode::from(2));
    }
    if let (Some(old), Some(p)) = (&baseline, &args.baseline) {
        let worse = card::regressions(&card, old)
            .map_err(|e| anyhow::anyhow!("--baseline {}: {e}", p.display()))?;
        for w in &worse {
            eprintln!("worse than {}: {w}", p.display());
        }
        if !worse.is_empty() {
            return Ok(ExitCode::from(1));
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn play(
    cfg: &resolvelab_lint::Config,
    plans: &[resolvelab_verify::Planned],
    req: &Request,
    args: &Args,
    ctx: &Ctx,
) -> anyhow::Result<(String, Vec<card::TargetCard>)> {
    let dir = args.out.clone().unwrap_or_else(|| {
        PathBuf::from("runs").join(format!(
            "verify-{}",
            resolvelab_core::time::stamp_utc(resolvelab_core::time::now_us())
        ))
    });
    let opts = RunOptions {
        out: dir.join("runs"),
        ..ctx.run_options()
    };
    let engine = engine::by_name(if args.quick { "sim" } else { &args.engine })?;
    crate::cmd::run::install_signal_handlers();
    let nginx = if args.quick {
        format!("the model — {}", engine.describe())
    } else {
        engine.provision(&opts)?
    };
    eprintln!(
        "verify: {} target(s) on {nginx}; runs in {}",
        plans.len(),
        dir.display()
    );
    let cards = resolvelab_verify::run(cfg, plans, req, engine, &opts, &dir)?;
    Ok((nginx, cards))
}
