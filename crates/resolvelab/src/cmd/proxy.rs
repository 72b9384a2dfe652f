//! `resolvelab proxy` (not wired yet).

use crate::Ctx;
use std::process::ExitCode;

/// Arguments of `resolvelab proxy`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Run `resolvelab proxy`.
pub fn run(_args: Args, _ctx: &Ctx) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`resolvelab proxy` is not available yet")
}
