//! `resolvelab` — reproduce, diagnose, lint and simulate DNS-driven nginx upstream failures.
//!
//! This crate is argument parsing and wiring only: every subcommand lives in `cmd/<name>.rs`,
//! which parses its arguments with clap and calls into the library crate that does the work.
//!
//! ```text
//! resolvelab demo                      # a short real reproduction with nginx
//! resolvelab run generation-race       # one scenario from the library
//! resolvelab diagnose --access access.log --error error.log
//! resolvelab lint /etc/nginx/nginx.conf
//! ```

// The binary links only what it uses (docs/ARCHITECTURE.md, "Lints").
#![cfg_attr(not(test), deny(unused_crate_dependencies))]

mod cmd;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

/// Options shared by every subcommand.
#[derive(Debug, Clone, clap::Args)]
pub struct Ctx {
    /// Use this nginx binary instead of the one resolvelab builds from the `nginx-src` crate.
    #[arg(long, global = true, env = "RESOLVELAB_NGINX", value_name = "PATH")]
    pub nginx: Option<PathBuf>,
    /// Use this binary for engine NAME instead of the provisioned one (repeatable), e.g.
    /// `--engine-bin nginx-1.31=/opt/nginx/sbin/nginx`.
    #[arg(long, global = true, value_name = "NAME=PATH", value_parser = parse_engine_bin)]
    pub engine_bin: Vec<(String, PathBuf)>,
}

impl Ctx {
    /// Run options with the binaries these global options name (`--nginx`, `--engine-bin`);
    /// each command sets the rest.
    pub fn run_options(&self) -> resolvelab_lab::options::RunOptions {
        resolvelab_lab::options::RunOptions {
            nginx: self.nginx.clone(),
            engine_bins: self.engine_bins(),
            ..Default::default()
        }
    }

    /// `--engine-bin` by engine id.
    pub fn engine_bins(&self) -> std::collections::BTreeMap<String, PathBuf> {
        self.engine_bin.iter().cloned().collect()
    }
}

/// `NAME=PATH`, NAME an engine id (or alias) that runs a binary.
fn parse_engine_bin(s: &str) -> Result<(String, PathBuf), String> {
    let (name, path) = s
        .split_once('=')
        .ok_or_else(|| format!("`{s}`: expected NAME=PATH, e.g. nginx-1.31=/usr/sbin/nginx"))?;
    let engine = resolvelab_lab::engine::by_name(name).map_err(|e| e.to_string())?;
    if engine.id().is_model() {
        return Err(format!("the {} engine runs no binary", engine.id()));
    }
    Ok((engine.id().to_string(), PathBuf::from(path)))
}

#[derive(Parser)]
#[command(
    name = "resolvelab",
    disable_version_flag = true,
    about = "Reproduce, diagnose, lint and simulate DNS-driven nginx upstream failures (502 no live upstreams).",
    long_about = "resolvelab reproduces DNS-driven nginx upstream failures on one machine with a real \
nginx, diagnoses them from production logs, lints configurations that the lab proves dangerous, and \
simulates nginx's upstream/resolve logic.\n\nAll generated traffic stays on loopback (127.0.0.0/8, ::1).",
    after_help = "Examples:\n  resolvelab demo\n  resolvelab nginx build\n  resolvelab run --list\n  \
resolvelab diagnose --access access.log --error error.log\n  resolvelab lint /etc/nginx/nginx.conf"
)]
struct Cli {
    #[command(flatten)]
    ctx: Ctx,
    /// Print the tool version and the nginx it would use.
    #[arg(short = 'V', long)]
    version: bool,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// A short real reproduction: nginx, DNS, backends, load, verdict.
    Demo(cmd::demo::Args),
    /// Build, locate and inspect the nginx the lab uses.
    Nginx(cmd::nginx::Args),
    /// The engines a scenario runs on (nginx 1.28 and 1.31, HAProxy, Envoy, Caddy, the models)
    /// and their binaries.
    Engine(cmd::engine::Args),
    /// Mode-controlled authoritative DNS server (and `dns ctl` client).
    Dns(cmd::dns::Args),
    /// Fault-injectable HTTP/1.1 backend.
    Backend(cmd::backend::Args),
    /// TCP fault proxy (latency, resets, bandwidth, …).
    Proxy(cmd::proxy::Args),
    /// Open-loop HTTP load generator (and `load report`).
    Load(cmd::load::Args),
    /// Run a scenario from the library (or a file) against real nginx.
    Run(cmd::run::Args),
    /// Run one scenario on several engines (nginx 1.28 and 1.31, HAProxy, Envoy, Caddy, the
    /// models) side by side.
    Compare(cmd::compare::Args),
    /// Explain every 502 in production nginx logs.
    Diagnose(cmd::diagnose::Args),
    /// One report over a fleet: merge the instances' partials (`diagnose --partial`).
    Merge(cmd::merge::Args),
    /// Follow nginx logs and classify their failures while they happen (Prometheus metrics).
    Watch(cmd::watch::Args),
    /// Your configuration in the lab: each DNS-fed upstream through the event library on real
    /// nginx, the linter's fixes before → after, a report card.
    Verify(cmd::verify::Args),
    /// Re-check a lab run directory and write its verdict.
    Analyze(cmd::analyze::Args),
    /// Lint nginx configuration for DNS/upstream failure hazards.
    Lint(cmd::lint::Args),
    /// Simulated nginx and balancing models.
    Sim(cmd::sim::Args),
    /// Internal: used by the test-suite to prove supervision (no orphans under SIGKILL).
    #[command(hide = true, name = "__supervise-selftest")]
    SuperviseSelftest(cmd::selftest::Args),
}

/// `resolvelab … | head` must end quietly like any Unix filter. SIGPIPE stays ignored (sockets
/// must see EPIPE, not die), so a closed stdout surfaces as a panic in `println!`: end with the
/// status a shell reports for SIGPIPE instead of a backtrace.
fn quiet_on_closed_stdout() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let p = info.payload();
        let msg = p
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| p.downcast_ref::<&str>().copied())
            .unwrap_or("");
        if msg.starts_with("failed printing to stdout") && msg.contains("Broken pipe") {
            std::process::exit(141);
        }
        default(info)
    }));
}

/// Where the libraries' progress lands: stderr, the live status line only on a terminal (where
/// `\x1b[K` clears what a longer previous line left behind).
fn progress_to_stderr() {
    use resolvelab_core::progress::Note;
    use std::io::{IsTerminal, Write};
    let tty = std::io::stderr().is_terminal();
    resolvelab_core::progress::set(move |n| match n {
        Note::Line(l) => eprintln!("{l}"),
        Note::Status(s) if tty => {
            eprint!("\r{s}\x1b[K");
            let _ = std::io::stderr().flush();
        }
        Note::EndStatus if tty => eprintln!(),
        Note::Status(_) | Note::EndStatus => {}
    });
}

fn main() -> ExitCode {
    quiet_on_closed_stdout();
    progress_to_stderr();
    // The lab's servers (backends, proxies, DNS, load) each hold many sockets.
    cmd::raise_fd_limit();
    let cli = Cli::parse();
    let ctx = cli.ctx;
    let Some(command) = cli.command else {
        if cli.version {
            println!("resolvelab {}", cmd::version_string(&ctx));
            return ExitCode::SUCCESS;
        }
        use clap::CommandFactory;
        let _ = Cli::command().print_help();
        return ExitCode::from(2);
    };
    let result = match command {
        Command::Demo(a) => cmd::demo::run(a, &ctx),
        Command::Nginx(a) => cmd::nginx::run(a, &ctx),
        Command::Engine(a) => cmd::engine::run(a, &ctx),
        Command::Dns(a) => cmd::dns::run(a, &ctx),
        Command::Backend(a) => cmd::backend::run(a, &ctx),
        Command::Proxy(a) => cmd::proxy::run(a, &ctx),
        Command::Load(a) => cmd::load::run(a, &ctx),
        Command::Run(a) => cmd::run::run(a, &ctx),
        Command::Compare(a) => cmd::compare::run(a, &ctx),
        Command::Diagnose(a) => cmd::diagnose::run(a, &ctx),
        Command::Merge(a) => cmd::merge::run(a, &ctx),
        Command::Watch(a) => cmd::watch::run(a, &ctx),
        Command::Verify(a) => cmd::verify::run(a, &ctx),
        Command::Analyze(a) => cmd::analyze::run(a, &ctx),
        Command::Lint(a) => cmd::lint::run(a, &ctx),
        Command::Sim(a) => cmd::sim::run(a, &ctx),
        Command::SuperviseSelftest(a) => cmd::selftest::run(a, &ctx),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            // One line, no backtrace: user mistakes are explained, not dumped.
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}
