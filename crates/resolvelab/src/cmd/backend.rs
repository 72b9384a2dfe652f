//! `resolvelab backend` (not wired yet).

use crate::Ctx;
use std::process::ExitCode;

/// Arguments of `resolvelab backend`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Run `resolvelab backend`.
pub fn run(_args: Args, _ctx: &Ctx) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`resolvelab backend` is not available yet")
}
