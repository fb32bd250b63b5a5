//! `haul cp`.

use std::process::ExitCode;

/// Arguments of `haul cp`.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Runs `haul cp`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("haul cp is not built yet")
}
