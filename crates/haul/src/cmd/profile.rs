//! `haul profile`.

use std::process::ExitCode;

/// Arguments of `haul profile`.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Runs `haul profile`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("haul profile is not built yet")
}
