//! `resolvelab sim` (not wired yet).

use crate::Ctx;
use std::process::ExitCode;

/// Arguments of `resolvelab sim`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Run `resolvelab sim`.
pub fn run(_args: Args, _ctx: &Ctx) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`resolvelab sim` is not available yet")
}
