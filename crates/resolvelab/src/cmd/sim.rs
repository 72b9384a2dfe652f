//! `resolvelab sim` — deterministic models: the simulated nginx (`sim nginx`, `sim predict`)
//! and the DNS-vs-proxy balancing model (`sim balance`).

use crate::Ctx;
use anyhow::Context;
use resolvelab_sim::balance::{self, BalanceInput, Strategy};
use resolvelab_sim::nginx::predict::{PredictInput, predict};
use resolvelab_sim::nginx::{Latency, SimConfig, Us};
use resolvelab_sim::text;
use std::path::PathBuf;
use std::process::ExitCode;

/// Deterministic models: simulated nginx, production predictions, DNS vs proxy balancing.
#[derive(Debug, clap::Args)]
#[command(
    about = "Deterministic models: simulated nginx, production predictions, DNS vs proxy balancing.",
    after_help = "Examples:\n  resolvelab sim nginx --print-example > sim.toml\n  resolvelab sim nginx --config sim.toml --out runs/sim-race\n  \
resolvelab sim predict --rps 8000 --swap-interval 6s --first-try-failure 0.001\n  resolvelab sim balance --golden\n  \
resolvelab sim balance --golden --strategy proxy-least --format json\n  \
resolvelab sim fidelity --replay runs/all --update docs/FIDELITY-RUNS.md\n  resolvelab sim calibrate runs/all"
)]
pub struct Args {
    #[command(subcommand)]
    command: Option<SimCommand>,
}

#[derive(Debug, clap::Subcommand)]
enum SimCommand {
    /// Simulated nginx: run a config through the model and write nginx-format logs.
    Nginx(NginxArgs),
    /// Expected `no live upstreams` per day at production scale, and each mitigation's effect.
    Predict(PredictArgs),
    /// DNS vs proxy balancing (DOMAIN.md §7): DNS cache, weighted RR, least-conn, connection reuse.
    Balance(BalanceArgs),
    /// Compare real-nginx runs with the model (docs/FIDELITY.md): one pair, or every lab run replayed.
    Fidelity(FidelityArgs),
    /// Fit the model's first-pick window to real-nginx runs.
    Calibrate(CalibrateArgs),
}

/// Arguments of `resolvelab sim fidelity`.
#[derive(Debug, clap::Args)]
#[command(
    about = "Compare real-nginx runs with the model: one pair of run directories, or every lab run replayed (docs/FIDELITY.md).",
    long_about = "Diagnose a real-nginx run and a simulated run with the same checker and compare them class by \
class: the same classes present and absent; failed requests of each class within each other's Poisson 95 % \
interval; the longest incident of each class within 10 % in duration (compared only when one of the two \
lasts 2 s or more: isolated events have no meaningful duration). The bound is fixed: fix the model, never \
the bound.\n\n\
With --replay RUNS every lab run directory under RUNS (the --out of `resolvelab run --all`) is replayed on \
the model first: the lab run's own scenario.toml (as it was when the lab ran), its seed, its loopback /24, \
its load start (the same phase of nginx's one-second clock) and its requests' actual send times. The \
result is the generated docs/FIDELITY-RUNS.md (--update writes it between the page's markers and keeps \
the hand-written text), with first-pick races pooled over every row against the model's expectation.\n\n\
Exit status: 0 = the model agrees with nginx (every row with --replay), 1 = a disagreement (or a row \
that could not be compared), 2 = an error.",
    after_help = "Examples:\n  resolvelab run --all --out runs/all -q                   # real nginx, ~40 min\n  \
resolvelab sim fidelity --replay runs/all --update docs/FIDELITY-RUNS.md\n  \
resolvelab sim fidelity --replay runs/all/generation-race-20261130T060000Z     # one lab run\n  \
resolvelab sim fidelity --replay runs/all --format json --sim-out /tmp/model-runs\n  \
resolvelab sim fidelity --lab LAB_DIR --sim SIM_DIR --name generation-race\n  \
resolvelab sim fidelity --lab LAB_DIR --sim SIM_DIR --json-out row.json > row.md  # both\n\n\
--lab/--sim with --format json prints one object:\n  \
{\"name\": \"generation-race\",\n   \
\"lab\":   {\"requests\": 36000, \"failed\": 41, \"swaps\": 20},\n   \
\"model\": {\"requests\": 36000, \"failed\": 38, \"swaps\": 20},\n   \
\"classes\": [{\"class\": \"generation-race-retry\", \"lab_count\": 41, \"model_count\": 38,\n                \
\"counts_agree\": true, \"lab_longest_ms\": 310, \"model_longest_ms\": 295,\n                \
\"duration_compared\": false, \"durations_agree\": true}],\n   \
\"agree\": true}\n\
counts_agree includes presence (a class seen in one run only disagrees); durations are compared \
only for bursts of 2 s or more (duration_compared), and durations_agree is true when they are not. \
--replay with --format json prints {\"lab_runs\", \"rows\": [{\"title\", \"lab_run\", \"model_run\", \
\"lab_status\", \"model_status\", \"outcome\": \"agree|disagree|sim-failed|compare-failed\", \"why\", \
\"fidelity\": {…as above}, \"first_pick\": [lab, model, expected]}]}."
)]
struct FidelityArgs {
    /// Run directory of the real-nginx run.
    #[arg(long, value_name = "DIR", conflicts_with = "replay", requires = "sim")]
    lab: Option<PathBuf>,
    /// Run directory of the simulated run.
    #[arg(long, value_name = "DIR", conflicts_with = "replay", requires = "lab")]
    sim: Option<PathBuf>,
    /// Scenario name for the heading (default: the lab directory's name).
    #[arg(long, conflicts_with = "replay")]
    name: Option<String>,
    /// Replay every lab run under RUNS (or the one run directory RUNS) on the model and compare.
    #[arg(long, value_name = "RUNS")]
    replay: Option<PathBuf>,
    /// With --replay: write the generated section into this page (docs/FIDELITY.md) instead of
    /// printing it.
    #[arg(long, value_name = "FILE", requires = "replay")]
    update: Option<PathBuf>,
    /// With --replay: where the model runs go (default: a new directory under the system's
    /// temporary directory; kept, and named at the end).
    #[arg(long, value_name = "DIR", requires = "replay")]
    sim_out: Option<PathBuf>,
    /// With --replay: no progress line per run.
    #[arg(long, short, requires = "replay")]
    quiet: bool,
    /// Output format: Markdown (text) or JSON.
    #[arg(long, value_enum, default_value = "text")]
    format: SummaryFormat,
    /// With --lab/--sim: also write the comparison as JSON to FILE (the same result as
    /// --format json, from the same comparison as what is printed).
    #[arg(long, value_name = "FILE", conflicts_with = "replay")]
    json_out: Option<PathBuf>,
}

/// Arguments of `resolvelab sim calibrate`.
#[derive(Debug, clap::Args)]
#[command(
    about = "Fit the model's first-pick window (first_pick_window_us) to real-nginx runs.",
    long_about = "A first-pick generation race needs a request in a worker that does not resolve (nginx 1.28 \
resolves every name in worker 0) to sit between its snapshot and its first pick at the moment the \
resolving worker changes the peer list. Each change catches one with probability ≈ rate × window, so \
over many runs the races are Poisson with mean window × exposure. Every lab run is replayed on the model \
exactly as `sim fidelity --replay` does, and the model's exposure (sim.json first_pick_exposure_per_us, \
the races it expects per µs of window) is weighed against the generation-race-first-pick requests the \
checker finds in the lab run: the maximum-likelihood window is races / exposure, its 95 % interval the \
Poisson interval of the race count over the same exposure. A run directory name seen twice (copied \
evidence sets) counts once. Exit status: 0 = fitted, 2 = an error (no run with a peer-list change).",
    after_help = "Examples:\n  resolvelab sim calibrate runs/all\n  resolvelab sim calibrate /tmp/runs-a /tmp/runs-b --format json"
)]
struct CalibrateArgs {
    /// Directories of lab runs (the --out of `resolvelab run`), or run directories.
    #[arg(value_name = "RUNS", required = true)]
    runs: Vec<PathBuf>,
    /// Keep the model runs here (default: a temporary directory, removed at the end).
    #[arg(long, value_name = "DIR")]
    sim_out: Option<PathBuf>,
    /// Output format: text or JSON.
    #[arg(long, value_enum, default_value = "text")]
    format: SummaryFormat,
}

/// Arguments of `resolvelab sim nginx`.
#[derive(Debug, clap::Args)]
#[command(
    about = "Run the simulated nginx (upstream zone, resolve, max_fails, keep-alive, retries) and write the same logs as a lab run.",
    long_about = "Run a configuration through the deterministic model of nginx 1.28's upstream/resolve \
logic and write access.log (lab log_format), error.log (nginx's format), dns.jsonl, events.jsonl and \
load.jsonl into --out, exactly like a real lab run, so `resolvelab analyze` reads it the same way. The \
same seed gives byte-identical files. The config is TOML or JSON; start from --print-example and see \
docs/sim.md for every field.",
    after_help = "Examples:\n  resolvelab sim nginx --print-example > sim.toml\n  resolvelab sim nginx --config sim.toml --out runs/sim-race\n  \
resolvelab sim nginx --config sim.toml --seed 7 --duration 1h --count-only\n  resolvelab sim nginx --config sim.toml --out /tmp/x --format json"
)]
struct NginxArgs {
    /// Simulation config (.toml or .json).
    #[arg(long, value_name = "FILE", required_unless_present = "print_example")]
    config: Option<PathBuf>,
    /// Output directory for the logs (created).
    #[arg(long, value_name = "DIR", required_unless_present_any = ["print_example", "count_only"])]
    out: Option<PathBuf>,
    /// Override the config's seed.
    #[arg(long)]
    seed: Option<u64>,
    /// Override the load duration (`90s`, `1h`).
    #[arg(long, value_name = "DUR")]
    duration: Option<String>,
    /// Override the request rate.
    #[arg(long)]
    rps: Option<f64>,
    /// Write no logs, only print the counts (fast).
    #[arg(long)]
    count_only: bool,
    /// Print an example config and exit.
    #[arg(long)]
    print_example: bool,
    /// Summary format.
    #[arg(long, value_enum, default_value = "text")]
    format: SummaryFormat,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum SummaryFormat {
    Text,
    Json,
}

/// Arguments of `resolvelab sim predict`.
#[derive(Debug, clap::Args)]
#[command(
    about = "Predict `no live upstreams` per day by class (95 % interval) and compare mitigations side by side.",
    long_about = "Simulate production traffic (one upstream name whose answer changes every \
--swap-interval, with a first-try failure rate on cached keep-alive connections) for --sample of \
traffic per variant, scale the counts to a day with a Poisson 95 % interval, and show the effect of \
each mitigation: per-DC names, the error_page retry shim, max_fails=0, a larger resolver valid, and \
keep-alive hygiene.",
    after_help = "Examples:\n  resolvelab sim predict --rps 8000 --swap-interval 6s --first-try-failure 0.001\n  \
resolvelab sim predict --rps 2000 --swap-interval 31s --latency lognormal:20ms,0.8 --sample 24h\n  \
resolvelab sim predict --config sim.toml --sample 10m      # your own upstream as the baseline\n  \
resolvelab sim predict --rps 8000 --format json\n  \
# the same churn on another proxy's DNS and retry policy\n  \
resolvelab sim predict --engine haproxy --rps 8000 --swap-interval 6s --first-try-failure 0.001\n  \
# stale addresses: the backend moves 24 times a day — each way of using its name\n  \
resolvelab sim predict --moves-per-day 24 --rps 300 --valid 5s --grace 0s --reload-after 5m\n  \
# a fleet of 20 instances sharing the traffic, each at its own re-query phase\n  \
resolvelab sim predict --rps 8000 --instances 20 --sample 10m\n  \
resolvelab sim predict --moves-per-day 24 --rps 3000 --instances 20"
)]
struct PredictArgs {
    /// Whose policy: `nginx` (the nginx model and its mitigations), or the model of `haproxy`,
    /// `envoy` or `caddy` (their DNS-event policies, client errors per day; `--keepalive`,
    /// `--workers` and `--first-pick-window-us` are nginx's).
    #[arg(long, default_value = "nginx", value_parser = ["nginx", "haproxy", "envoy", "caddy"])]
    engine: String,
    /// Stale addresses instead: the backend moves this often, and every way nginx can use its
    /// name (resolved at start, per request, `resolve`) is compared (see --valid, --grace,
    /// --reload-after, --moves).
    #[arg(long, value_name = "N")]
    moves_per_day: Option<f64>,
    /// With --moves-per-day: the resolver's `valid=`.
    #[arg(long, default_value = "5s", value_name = "DUR")]
    valid: String,
    /// With --moves-per-day: how long the old address keeps serving after the move.
    #[arg(long, default_value = "0s", value_name = "DUR")]
    grace: String,
    /// With --moves-per-day: when someone reloads nginx after a move (ends a resolve-once pin).
    #[arg(long, default_value = "5m", value_name = "DUR")]
    reload_after: String,
    /// With --moves-per-day: moves simulated per setup, each at a random phase.
    #[arg(long, default_value_t = 16, value_name = "N")]
    moves: u32,
    /// Requests per second through the upstream.
    #[arg(long, default_value_t = 8000.0)]
    rps: f64,
    /// Time between answer changes (the requery period, valid + 1 s).
    #[arg(long, default_value = "6s", value_name = "DUR")]
    swap_interval: String,
    /// Probability that a try on a cached keep-alive connection fails (reclaim race).
    #[arg(long, default_value_t = 0.001, value_name = "P")]
    first_try_failure: f64,
    /// How long such a failure takes to be seen (uniform range).
    #[arg(long, default_value = "0ms..50ms", value_name = "RANGE")]
    failure_delay: String,
    /// Latency of successful tries: fixed:3ms, uniform:1ms..5ms, exp:5ms, lognormal:5ms,0.6.
    #[arg(long, default_value = "lognormal:5ms,0.6", value_name = "DIST")]
    latency: String,
    /// Upstream keep-alive connections.
    #[arg(long, default_value_t = 32)]
    keepalive: u32,
    /// nginx worker processes (`worker_processes`; `auto` = one per core).
    #[arg(long, default_value_t = 4)]
    workers: u32,
    /// Snapshot → first-pick window in µs (calibrated on the lab's runs).
    #[arg(long, default_value_t = resolvelab_sim::nginx::FIRST_PICK_WINDOW_US, value_name = "US")]
    first_pick_window_us: f64,
    /// `valid` of the larger-valid mitigation.
    #[arg(long, default_value = "30s", value_name = "DUR")]
    larger_valid: String,
    /// First-try failure factor of the keep-alive-hygiene mitigation.
    #[arg(long, default_value_t = 0.1)]
    hygiene_factor: f64,
    /// Simulated traffic per variant (more = tighter intervals, slower).
    #[arg(long, default_value = "1h", value_name = "DUR")]
    sample: String,
    /// RNG seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// A fleet: N nginx instances share --rps (each at rps/N, its own re-query phase and
    /// races); the counts are the fleet's, with each instance's spread (nginx only).
    #[arg(long, default_value_t = 1, value_name = "N")]
    instances: u32,
    /// Use this simulator config (TOML/JSON, see `sim nginx --print-example`) as the baseline
    /// instead of the one-name model built from --rps/--swap-interval/--first-try-failure.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    format: SummaryFormat,
}

/// Arguments of `resolvelab sim balance`.
#[derive(Debug, clap::Args)]
#[command(
    about = "Trace DNS vs proxy balancing: what DNS returned vs which backend and connection each request reached.",
    long_about = "Trace the deterministic balancing model of DOMAIN.md §7. Four layers are kept apart: the DNS \
answer and its TTL cache (refreshed only at expiry), proxy weighted round-robin (weight slots cycled \
independently of DNS; proxy-rr uses the same slots), proxy least-connections (active/weight, ties to \
the backend id) and connection reuse (same address, reusableUntil > t, activeStreams < maxStreams).\n\n\
The input (JSON or TOML, camelCase keys) holds requests {arrival, service}, dns answers {at, \
addresses, ttl}, backends {id, weight, healthy}, pre-existing connections {id, address, \
reusableUntil}, connectionLifetime and maxStreams. See docs/balance.md.",
    after_help = "Examples:\n  # the golden trace of DOMAIN.md §7, DNS strategy\n  \
resolvelab sim balance --golden\n  \
resolvelab sim balance --golden --strategy proxy-weighted\n  \
resolvelab sim balance --golden --format html --out balance.html\n  \
# start your own input from the golden one\n  \
resolvelab sim balance --golden --print-input > my.json\n  \
resolvelab sim balance --input my.json --strategy proxy-least --format json"
)]
struct BalanceArgs {
    /// Input file (.json or .toml).
    #[arg(long, value_name = "FILE", conflicts_with = "golden")]
    input: Option<PathBuf>,
    /// Use the seed's golden input (the default when --input is not given).
    #[arg(long)]
    golden: bool,
    /// dns | proxy-weighted | proxy-rr | proxy-least (default: the input's `strategy`, else dns).
    #[arg(long, value_name = "NAME")]
    strategy: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    format: Format,
    /// Write the output to FILE instead of standard output.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Print the input (as JSON) instead of running it.
    #[arg(long)]
    print_input: bool,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Format {
    Table,
    Json,
    Html,
}

/// Run `resolvelab sim`.
pub fn run(args: Args, _ctx: &Ctx) -> anyhow::Result<ExitCode> {
    match args.command {
        Some(SimCommand::Balance(a)) => run_balance(a),
        Some(SimCommand::Nginx(a)) => run_nginx(a),
        Some(SimCommand::Predict(a)) => run_predict(a),
        Some(SimCommand::Fidelity(a)) => run_fidelity(a),
        Some(SimCommand::Calibrate(a)) => run_calibrate(a),
        None => {
            use clap::CommandFactory;
            #[derive(clap::Parser)]
            #[command(name = "resolvelab sim")]
            struct Wrapper {
                #[command(flatten)]
                args: Args,
            }
            let _ = Wrapper::command().print_help();
            Ok(ExitCode::from(2))
        }
    }
}

fn run_balance(a: BalanceArgs) -> anyhow::Result<ExitCode> {
    let input = match &a.input {
        Some(path) => BalanceInput::from_path(path)?,
        None => balance::golden_input(),
    };
    let text = if a.print_input {
        serde_json::to_string_pretty(&input)? + "\n"
    } else {
        let strategy: Strategy = a
            .strategy
            .as_deref()
            .or(input.strategy.as_deref())
            .unwrap_or("dns")
            .parse()?;
        let rows = balance::simulate(&input, strategy)?;
        match a.format {
            Format::Table => balance::render_table(&rows),
            Format::Json => serde_json::to_string_pretty(&rows)? + "\n",
            Format::Html => balance::render_html(&input, strategy, &rows),
        }
    };
    match &a.out {
        Some(path) => std::fs::write(path, text)
            .with_context(|| format!("cannot write {}", path.display()))?,
        None => emit(&text)?,
    }
    Ok(ExitCode::SUCCESS)
}

fn dur_arg(flag: &str, v: &str) -> anyhow::Result<Us> {
    resolvelab_core::dur::parse(v)
        .map(|d| Us(d.as_micros() as i64))
        .map_err(|e| anyhow::anyhow!("{flag} {v:?}: {e}"))
}

fn run_nginx(a: NginxArgs) -> anyhow::Result<ExitCode> {
    if a.print_example {
        emit(resolvelab_sim::nginx::EXAMPLE_TOML)?;
        return Ok(ExitCode::SUCCESS);
    }
    let path = a.config.as_ref().context("--config FILE is required")?;
    let mut cfg = SimConfig::from_path(path)?;
    if let Some(seed) = a.seed {
        cfg.seed = seed;
    }
    if let Some(d) = &a.duration {
        cfg.duration = dur_arg("--duration", d)?;
    }
    if let Some(r) = a.rps {
        cfg.rps = r;
    }
    let started = std::time::Instant::now();
    let summary = match (&a.out, a.count_only) {
        (_, true) | (None, _) => resolvelab_sim::nginx::simulate_counts(&cfg)?,
        (Some(dir), false) => resolvelab_sim::nginx::simulate(&cfg, dir)?,
    };
    let wall = started.elapsed().as_secs_f64();
    match a.format {
        SummaryFormat::Json => emit(&(serde_json::to_string_pretty(&summary)? + "\n"))?,
        SummaryFormat::Text => {
            let mut text = text::summary(&summary);
            text += &format!(
                "simulated {:.0} s of traffic in {wall:.2} s ({:.0} requests/s)\n",
                summary.simulated_us as f64 / 1e6,
                summary.requests as f64 / wall.max(1e-9)
            );
            if let (Some(dir), false) = (&a.out, a.count_only) {
                text += &format!(
                    "logs: {}/{{access.log,error.log,dns.jsonl,events.jsonl,load.jsonl}}\n",
                    dir.display()
                );
            }
            emit(&text)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn run_predict(a: PredictArgs) -> anyhow::Result<ExitCode> {
    if let Some(per_day) = a.moves_per_day {
        return run_moves(&a, per_day);
    }
    let delay = resolvelab_core::dur::Range::parse(&a.failure_delay)
        .map_err(|e| anyhow::anyhow!("--failure-delay {:?}: {e}", a.failure_delay))?;
    let input = PredictInput {
        rps: a.rps,
        swap_interval: dur_arg("--swap-interval", &a.swap_interval)?,
        first_try_failure: a.first_try_failure,
        failure_delay: (
            Us(delay.lo.as_micros() as i64),
            Us(delay.hi.as_micros() as i64),
        ),
        latency: Latency::parse(&a.latency)?,
        keepalive: a.keepalive,
        workers: a.workers,
        first_pick_window_us: a.first_pick_window_us,
        larger_valid: dur_arg("--larger-valid", &a.larger_valid)?,
        hygiene_factor: a.hygiene_factor,
        sample: dur_arg("--sample", &a.sample)?,
        seed: a.seed,
        instances: a.instances,
    };
    if let Some(proxy) = resolvelab_lab::replay::model_of(&a.engine) {
        if a.instances > 1 {
            anyhow::bail!(
                "--instances is the nginx model's fleet: leave it out with --engine {}",
                a.engine
            );
        }
        if a.config.is_some() {
            anyhow::bail!(
                "--config is an nginx model's configuration: leave it out with --engine {}",
                a.engine
            );
        }
        let rows = resolvelab_sim::proxies::predict(&input, proxy)?;
        match a.format {
            SummaryFormat::Json => emit(&(serde_json::to_string_pretty(&rows)? + "\n"))?,
            SummaryFormat::Text => emit(&text::proxy_table(&a.engine, &input, &rows))?,
        }
        return Ok(ExitCode::SUCCESS);
    }
    let rows = match &a.config {
        Some(path) => {
            let mut base = SimConfig::from_path(path)?;
            base.seed = a.seed;
            resolvelab_sim::nginx::predict::predict_from(&base, &input)?
        }
        None => predict(&input)?,
    };
    match a.format {
        SummaryFormat::Json => emit(&(serde_json::to_string_pretty(&rows)? + "\n"))?,
        SummaryFormat::Text => emit(&text::predict_table(&input, &rows))?,
    }
    Ok(ExitCode::SUCCESS)
}

/// `sim predict --moves-per-day`: the stale-address cost of each setup.
fn run_moves(a: &PredictArgs, moves_per_day: f64) -> anyhow::Result<ExitCode> {
    use resolvelab_sim::nginx::moves::{MovesInput, predict_moves};
    let m = MovesInput {
        rps: a.rps,
        moves_per_day,
        valid: dur_arg("--valid", &a.valid)?,
        grace: dur_arg("--grace", &a.grace)?,
        reload_after: dur_arg("--reload-after", &a.reload_after)?,
        samples: a.moves,
        seed: a.seed,
        instances: a.instances,
    };
    let rows = predict_moves(&m)?;
    if matches!(a.format, SummaryFormat::Json) {
        emit(&(serde_json::to_string_pretty(&rows)? + "\n"))?;
        return Ok(ExitCode::SUCCESS);
    }
    emit(&text::moves_table(&m, &rows))?;
    Ok(ExitCode::SUCCESS)
}

fn run_fidelity(a: FidelityArgs) -> anyhow::Result<ExitCode> {
    use resolvelab_lab::fidelity;
    if let Some(runs) = &a.replay {
        return run_replay(&a, runs);
    }
    let (Some(lab), Some(sim)) = (&a.lab, &a.sim) else {
        anyhow::bail!(
            "give --lab LAB_DIR --sim SIM_DIR (one comparison) or --replay RUNS (every lab run)"
        );
    };
    let name = a.name.clone().unwrap_or_else(|| {
        lab.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    });
    let f = fidelity::compare_dirs(name, lab, sim)?;
    let json = || serde_json::to_string_pretty(&f).map(|s| s + "\n");
    if let Some(path) = &a.json_out {
        std::fs::write(path, json()?).with_context(|| {
            format!(
                "cannot write --json-out {}: give a writable file path",
                path.display()
            )
        })?;
    }
    match a.format {
        SummaryFormat::Text => emit(&f.markdown())?,
        SummaryFormat::Json => emit(&json()?)?,
    }
    Ok(if f.agree {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// `sim fidelity --replay RUNS`: every lab run replayed on the model and compared; the
/// generated section printed, or written into --update's page.
fn run_replay(a: &FidelityArgs, runs: &std::path::Path) -> anyhow::Result<ExitCode> {
    use resolvelab_lab::fidelity;
    let sim_out = a.sim_out.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!(
            "resolvelab-fidelity-{}",
            resolvelab_core::time::stamp_utc(resolvelab_core::time::now_us())
        ))
    });
    let report = fidelity::replay_all(runs, &sim_out, &mut |i, n, r| {
        if !a.quiet {
            let result = match &r.outcome {
                fidelity::Outcome::Agree => "agree".to_string(),
                fidelity::Outcome::Disagree => "DISAGREE".to_string(),
                fidelity::Outcome::SimFailed(w) => format!("sim run failed: {w}"),
                fidelity::Outcome::CompareFailed(w) => format!("comparison failed: {w}"),
            };
            eprintln!("[{i}/{n}] {}: {result}", r.title);
        }
    })?;
    let (agree, disagree, failed) = report.counts();
    if matches!(a.format, SummaryFormat::Json) {
        emit(&(serde_json::to_string_pretty(&report)? + "\n"))?;
    } else {
        let now = resolvelab_core::time::now_us() / 1_000_000 * 1_000_000;
        let md = report.markdown(
            &resolvelab_core::time::rfc3339(now),
            &format!("resolvelab {}", env!("CARGO_PKG_VERSION")),
        );
        match &a.update {
            Some(page) => fidelity::update_page(page, &md)?,
            None => emit(&md)?,
        }
    }
    eprintln!(
        "sim fidelity: {agree} agree, {disagree} disagree, {failed} could not be compared{}; model runs in {}",
        a.update
            .as_ref()
            .map(|p| format!("; wrote {}", p.display()))
            .unwrap_or_default(),
        sim_out.display()
    );
    Ok(if disagree + failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn run_calibrate(a: CalibrateArgs) -> anyhow::Result<ExitCode> {
    // The model runs are kept under --sim-out, else removed with the temporary directory.
    let tmp;
    let sim_out = match &a.sim_out {
        Some(d) => d.clone(),
        None => {
            tmp = tempfile::tempdir()?;
            tmp.path().to_path_buf()
        }
    };
    let c = resolvelab_lab::fidelity::calibrate_first_pick(&a.runs, &sim_out)?;
    if matches!(a.format, SummaryFormat::Json) {
        emit(&(serde_json::to_string_pretty(&c)? + "\n"))?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut out = String::new();
    for (run, n, e) in &c.with_races {
        out.push_str(&format!(
            "{run}: {n} first-pick race(s), model exposure {e:.4} per µs\n"
        ));
    }
    out.push_str(&format!(
        "runs: {} ({} the model cannot run), exposure: {:.4} expected races per µs of window, first-pick races: {}\n\
first_pick_window_us = {:.2} (95 % interval {:.2} … {:.2})\n",
        c.runs, c.skipped, c.exposure_per_us, c.races, c.window_us, c.interval_us.0, c.interval_us.1
    ));
    emit(&out)?;
    Ok(ExitCode::SUCCESS)
}

/// Write to stdout; a closed pipe (`| head`) ends the output quietly instead of panicking.
fn emit(text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}
