//! `haul netem`.

use std::process::ExitCode;

/// Arguments of `haul netem`.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Runs `haul netem`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("haul netem is not built yet")
}
