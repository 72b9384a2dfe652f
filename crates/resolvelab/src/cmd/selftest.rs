//! `resolvelab selftest` (not wired yet).

use crate::Ctx;
use std::process::ExitCode;

/// Arguments of `resolvelab selftest`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Run `resolvelab selftest`.
pub fn run(_args: Args, _ctx: &Ctx) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`resolvelab selftest` is not available yet")
}
