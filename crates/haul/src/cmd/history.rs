//! `haul history`.

use std::process::ExitCode;

/// Arguments of `haul history`.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Runs `haul history`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("haul history is not built yet")
}
