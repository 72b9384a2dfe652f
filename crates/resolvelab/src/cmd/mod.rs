//! One module per subcommand. Each exposes `Args` (clap) and `run(args, ctx)`.

pub mod analyze;
pub mod backend;
pub mod demo;
pub mod diagnose;
pub mod dns;
pub mod lint;
pub mod load;
pub mod nginx;
pub mod proxy;
pub mod run;
pub mod selftest;
pub mod sim;

/// `--version` text: the tool version and the nginx it would use.
pub fn version_string(ctx: &crate::Ctx) -> String {
    format!(
        "{}\nnginx: {}",
        env!("CARGO_PKG_VERSION"),
        resolvelab_nginx::describe(ctx.nginx.as_deref())
    )
}
