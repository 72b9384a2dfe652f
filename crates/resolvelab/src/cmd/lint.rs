//! `resolvelab lint` (not wired yet).

use crate::Ctx;
use std::process::ExitCode;

/// Arguments of `resolvelab lint`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Run `resolvelab lint`.
pub fn run(_args: Args, _ctx: &Ctx) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`resolvelab lint` is not available yet")
}
