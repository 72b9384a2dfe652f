//! `resolvelab nginx` (not wired yet).

use crate::Ctx;
use std::process::ExitCode;

/// Arguments of `resolvelab nginx`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Run `resolvelab nginx`.
pub fn run(_args: Args, _ctx: &Ctx) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`resolvelab nginx` is not available yet")
}
