//! `resolvelab __supervise-selftest` (hidden): start nginx and a plain child under a supervisor,
//! report the process group, then wait. The test-suite kills this process with SIGKILL and checks
//! that nothing of the group survives.

use crate::Ctx;
use resolvelab_core::supervise::Supervisor;
use resolvelab_nginx::{Instance, Nginx, conf};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Arguments of the supervision self-test.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Directory for nginx's files.
    #[arg(long)]
    run_dir: PathBuf,
    /// Loopback address nginx listens on.
    #[arg(long, default_value = "127.0.0.1:18090")]
    listen: std::net::SocketAddr,
    /// How long to wait before exiting by itself (bounded, so a failed test leaves nothing).
    #[arg(long, default_value = "60")]
    seconds: u64,
}

/// Run the self-test.
pub fn run(args: Args, ctx: &Ctx) -> anyhow::Result<ExitCode> {
    resolvelab_core::policy::check_target(args.listen, false).map_err(anyhow::Error::msg)?;
    let nginx = Nginx::obtain(ctx.nginx.as_deref())?;
    std::fs::create_dir_all(&args.run_dir)?;
    let run_dir = std::fs::canonicalize(&args.run_dir)?;
    let sup = Supervisor::new()?;
    let body = format!(
        "server {{\n  listen {};\n  return 200 ok;\n}}\n",
        args.listen
    );
    let text = conf::lab_conf(&run_dir, &body);
    let mut nx = Instance::start(&nginx, &run_dir, &text, &sup)?;
    nx.wait_listening(args.listen, Duration::from_secs(10))?;
    let _sleeper = sup.spawn(std::process::Command::new("sleep").arg(args.seconds.to_string()))?;
    println!("pgid={}", sup.pgid());
    std::thread::sleep(Duration::from_secs(args.seconds));
    Ok(ExitCode::SUCCESS)
}
