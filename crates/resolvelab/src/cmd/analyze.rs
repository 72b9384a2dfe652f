//! `resolvelab analyze` (not wired yet).

use crate::Ctx;
use std::process::ExitCode;

/// Arguments of `resolvelab analyze`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Run `resolvelab analyze`.
pub fn run(_args: Args, _ctx: &Ctx) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`resolvelab analyze` is not available yet")
}
