//! One module per subcommand; shared output helpers and exit codes.

pub mod cp;
pub mod demo;
pub mod history;
pub mod netem;
pub mod serve;

use std::process::ExitCode;

/// Exit codes, documented in docs/cli.md.
pub mod exit {
    /// Success.
    pub const OK: u8 = 0;
    /// Any failure without a more specific code.
    pub const FAILURE: u8 = 1;
    /// Bad command-line usage (clap uses 2 as well).
    pub const USAGE: u8 = 2;
}

/// Sets up `tracing` from `HAUL_LOG` (default: warnings only).
pub fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("HAUL_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

/// Maps an error to the documented exit code.
pub fn exit_code_for(_e: &anyhow::Error) -> ExitCode {
    ExitCode::from(exit::FAILURE)
}
