//! `resolvelab dns` (not wired yet).

use crate::Ctx;
use std::process::ExitCode;

/// Arguments of `resolvelab dns`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Run `resolvelab dns`.
pub fn run(_args: Args, _ctx: &Ctx) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`resolvelab dns` is not available yet")
}
