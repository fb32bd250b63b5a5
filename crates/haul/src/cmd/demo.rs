//! `haul demo`.

use std::process::ExitCode;

/// Arguments of `haul demo`.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Runs `haul demo`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("haul demo is not built yet")
}
