//! `resolvelab run` (not wired yet).

use crate::Ctx;
use std::process::ExitCode;

/// Arguments of `resolvelab run`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Run `resolvelab run`.
pub fn run(_args: Args, _ctx: &Ctx) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`resolvelab run` is not available yet")
}
