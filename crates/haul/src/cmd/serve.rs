//! `haul serve`.

use std::process::ExitCode;

/// Arguments of `haul serve`.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Runs `haul serve`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("haul serve is not built yet")
}
