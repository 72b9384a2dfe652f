//! `resolvelab diagnose` (not wired yet).

use crate::Ctx;
use std::process::ExitCode;

/// Arguments of `resolvelab diagnose`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Run `resolvelab diagnose`.
pub fn run(_args: Args, _ctx: &Ctx) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`resolvelab diagnose` is not available yet")
}
