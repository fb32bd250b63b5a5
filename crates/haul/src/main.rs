//! The `haul` command line: argument parsing, progress display and wiring. No protocol logic.

use clap::{Parser, Subcommand};

/// Move big data over long, fast networks, tuned automatically.
#[derive(Parser, Debug)]
#[command(name = "haul", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {}
}
