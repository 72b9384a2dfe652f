//! `resolvelab load` (not wired yet).

use crate::Ctx;
use std::process::ExitCode;

/// Arguments of `resolvelab load`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Run `resolvelab load`.
pub fn run(_args: Args, _ctx: &Ctx) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`resolvelab load` is not available yet")
}
