//! `resolvelab nginx build | path | version` — the nginx the lab runs.

use crate::Ctx;
use resolvelab_nginx::{Nginx, Origin};
use std::process::ExitCode;

/// Arguments of `resolvelab nginx`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  resolvelab nginx build        # build nginx 1.28 from the nginx-src crate (cached)\n  \
resolvelab nginx path         # print the binary's path (builds on first use)\n  \
resolvelab nginx version      # nginx -V of the binary the lab uses\n  \
resolvelab --nginx /usr/local/sbin/nginx nginx version"
)]
pub struct Args {
    #[command(subcommand)]
    what: What,
}

#[derive(Debug, clap::Subcommand)]
enum What {
    /// Build nginx from the vendored source (no-op when the cached build exists).
    #[command(after_help = "Examples:\n  resolvelab nginx build\n  \
XDG_CACHE_HOME=/tmp/cache resolvelab nginx build   # build into another cache")]
    Build,
    /// Print the path of the nginx binary the lab uses.
    #[command(after_help = "Examples:\n  resolvelab nginx path\n  \
$(resolvelab nginx path) -V                      # run the lab's nginx yourself")]
    Path,
    /// Print `nginx -V` of the binary the lab uses and whether it supports `resolve`.
    #[command(after_help = "Examples:\n  resolvelab nginx version\n  \
resolvelab --nginx /usr/sbin/nginx nginx version   # another nginx: can it run `resolve`?")]
    Version,
}

/// Run `resolvelab nginx`.
pub fn run(args: Args, ctx: &Ctx) -> anyhow::Result<ExitCode> {
    let nginx = Nginx::obtain(ctx.nginx.as_deref())?;
    match args.what {
        What::Build => {
            let how = match nginx.origin {
                Origin::Built => "built from the nginx-src crate",
                Origin::Explicit => "explicit (--nginx / RESOLVELAB_NGINX): nothing to build",
                Origin::Fetched => "fetched from a package registry",
            };
            println!(
                "nginx/{} at {} ({how})",
                nginx.info.version,
                nginx.path.display()
            );
        }
        What::Path => println!("{}", nginx.path.display()),
        What::Version => {
            println!("{}", nginx.info.raw);
            println!(
                "resolve support: {}",
                if nginx.info.supports_resolve() {
                    "yes (>= 1.27.3, with the peer-generation check)"
                } else {
                    "NO (needs nginx >= 1.27.3)"
                }
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
