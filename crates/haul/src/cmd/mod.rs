//! One module per subcommand; shared output helpers and exit codes.

pub mod cp;
pub mod demo;
pub mod history;
pub mod netem;
pub mod profile;
pub mod route;
pub mod send;
pub mod serve;

use std::process::ExitCode;

/// Exit codes, documented in docs/cli.md.
pub mod exit {
    /// Any failure without a more specific code.
    pub const FAILURE: u8 = 1;
    /// Bad command-line usage (clap uses 2 as well).
    pub const USAGE: u8 = 2;
    /// The server could not be reached.
    pub const CONNECTION: u8 = 3;
    /// Login rejected.
    pub const AUTH: u8 = 4;
    /// A path does not exist.
    pub const NO_SUCH_PATH: u8 = 5;
    /// Access denied.
    pub const PERMISSION: u8 = 6;
    /// Data did not verify, even after a re-transfer.
    pub const CHECKSUM: u8 = 7;
    /// `haul plan` / `haul send`: the request cannot be met (deadline, rate, cost,
    /// requirements); nothing moved.
    pub const REFUSED: u8 = 8;
}

/// Parses a byte count: `65536`, `64K`, `4MiB`, `1G` (powers of 1024), `1GB` (of 1000); the
/// grammar is `haul_units`, shared by every flag (docs/cli.md, "Units").
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    haul_units::parse_size(s).map_err(|e| e.to_string())
}

/// Parses a duration into seconds: `10s`, `500ms`, `2m` (docs/cli.md, "Units").
pub fn parse_seconds(s: &str) -> Result<f64, String> {
    haul_units::parse_duration(s).map_err(|e| e.to_string())
}

/// Parses a rate into bytes per second; the unit must say bits or bytes: `1gbit`, `10Gb/s`,
/// `125MB/s` (docs/cli.md, "Units").
pub fn parse_rate_bytes(s: &str) -> Result<u64, String> {
    let r = haul_units::parse_rate(s).map_err(|e| e.to_string())?;
    Ok(r.bytes_per_sec().round() as u64)
}

/// Parses a rate into bits per second; the unit must say bits or bytes: `500mbit`, `1Gb/s`,
/// `62.5MB/s` (docs/cli.md, "Units").
pub fn parse_rate_bits(s: &str) -> Result<u64, String> {
    let r = haul_units::parse_rate(s).map_err(|e| e.to_string())?;
    Ok(r.bits_per_sec().round() as u64)
}

/// Formats bytes for people: `1.5 GiB`.
pub fn human_bytes(b: u64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut i = 0;
    while v >= 1024.0 && i + 1 < units.len() {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", units[i])
    }
}

/// Formats a rate in bits per second for people: `9.41 Gb/s`.
pub fn human_rate(bps: f64) -> String {
    if bps >= 1e9 {
        format!("{:.2} Gb/s", bps / 1e9)
    } else if bps >= 1e6 {
        format!("{:.1} Mb/s", bps / 1e6)
    } else {
        format!("{:.1} kb/s", bps / 1e3)
    }
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
pub fn exit_code_for(e: &anyhow::Error) -> ExitCode {
    ExitCode::from(exit_status(e))
}

/// The documented exit code of an error, as a number (for `haul cp --progress json`).
pub fn exit_status(e: &anyhow::Error) -> u8 {
    use haul_xfer::{ErrorKind, XferError};
    match e.downcast_ref::<XferError>().map(XferError::kind) {
        Some(ErrorKind::ConnectionRefused) => exit::CONNECTION,
        Some(ErrorKind::AuthenticationFailed) => exit::AUTH,
        Some(ErrorKind::NoSuchPath) => exit::NO_SUCH_PATH,
        Some(ErrorKind::PermissionDenied) => exit::PERMISSION,
        Some(ErrorKind::ChecksumMismatch) => exit::CHECKSUM,
        Some(ErrorKind::Other)
            if matches!(e.downcast_ref::<XferError>(), Some(XferError::Usage(_))) =>
        {
            exit::USAGE
        }
        _ => exit::FAILURE,
    }
}

/// Whether a recorded transfer went through relays at either end: its rate is the whole
/// route's, not one leg's.
pub fn relayed(r: &haul_store::TransferRecord) -> bool {
    route(&r.source).len() > 1 || route(&r.destination).len() > 1
}

/// The servers a transfer of `endpoint` passes (`scheme://host:port`, relays first; see
/// docs/relay.md), or `["local"]` for a local path.
pub fn route(endpoint: &str) -> Vec<String> {
    match haul_xfer::Endpoint::parse(endpoint) {
        Ok(haul_xfer::Endpoint::Remote(u)) => u.route(),
        _ => vec!["local".to_string()],
    }
}

/// The host an end is known by, in the history and in route choice alike: `host:port`, or
/// [`LOCAL`](haul_overlay::gather::LOCAL) for a local path.
pub fn host_id(e: &haul_xfer::Endpoint) -> String {
    match e {
        haul_xfer::Endpoint::Local(_) => haul_overlay::gather::LOCAL.to_string(),
        haul_xfer::Endpoint::Remote(r) => r.host_port(),
    }
}

/// The current time in Unix seconds (0 before the epoch).
pub fn now_unix() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sizes() {
        assert_eq!(parse_bytes("65536"), Ok(65536));
        assert_eq!(parse_bytes("4M"), Ok(4 << 20));
        assert_eq!(parse_bytes("1GB"), Ok(1_000_000_000));
        assert_eq!(parse_rate_bytes("100MB/s"), Ok(100_000_000));
        assert_eq!(parse_rate_bytes("1gbit"), Ok(125_000_000));
        assert!(parse_rate_bytes("10M").is_err(), "bits or bytes?");
        assert_eq!(parse_bytes("1.5GiB"), Ok(3 << 29));
        assert!(parse_bytes("4X").is_err());
        assert!(parse_bytes("").is_err());
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_rate(9.41e9), "9.41 Gb/s");
    }
}
