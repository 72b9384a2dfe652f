//! `resolvelab demo` (not wired yet).

use crate::Ctx;
use std::process::ExitCode;

/// Arguments of `resolvelab demo`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Run `resolvelab demo`.
pub fn run(_args: Args, _ctx: &Ctx) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`resolvelab demo` is not available yet")
}
