//! The record of one transfer: what was moved, how, how fast, and how it ended.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// How a transfer ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// Every byte arrived and was verified.
    Ok,
    /// The transfer stopped on an error.
    Failed,
    /// The user or a signal stopped the transfer.
    Interrupted,
}

impl Outcome {
    /// The lowercase name stored in the database and printed by the CLI.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Failed => "failed",
            Outcome::Interrupted => "interrupted",
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Outcome {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "ok" => Ok(Outcome::Ok),
            "failed" => Ok(Outcome::Failed),
            "interrupted" => Ok(Outcome::Interrupted),
            other => Err(format!(
                "unknown outcome {other:?} (expected ok, failed or interrupted)"
            )),
        }
    }
}

/// Tuning parameters of a transfer. Absent values were not set (defaults applied).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Params {
    /// TCP streams per file (GridFTP `-p`).
    pub parallelism: Option<u32>,
    /// Files in flight at once (GridFTP `-cc`).
    pub concurrency: Option<u32>,
    /// Commands in flight on one control channel (GridFTP `-pp` depth).
    pub pipelining: Option<u32>,
    /// TCP socket buffer in bytes.
    pub tcp_buffer: Option<u64>,
    /// MODE E block size in bytes.
    pub block_size: Option<u64>,
    /// Checksum algorithm (e.g. `adler32`, `md5`, `xxh3`).
    pub checksum: Option<String>,
    /// Data-channel transport (e.g. `tcp`, `plut`, `udt`).
    pub transport: Option<String>,
    /// Anything else, free-form (tuner state, profiler settings, ...).
    pub extra: serde_json::Value,
}

/// Throughput over one interval of a transfer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// End of the interval, seconds since the transfer started.
    pub t_s: f64,
    /// Bytes moved in the interval.
    pub bytes: u64,
    /// Throughput over the interval, bits per second.
    pub bps: f64,
}

/// One transfer (or profiler run) as stored in the history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TransferRecord {
    /// Row id; `None` until inserted.
    pub id: Option<i64>,
    /// What produced the record: `cp`, `profile`, ...
    pub kind: String,
    /// Start time, Unix seconds (UTC, fractional).
    pub started_at: f64,
    /// Wall-clock duration in seconds.
    pub duration_s: f64,
    /// Source URL or path as given by the user.
    pub source: String,
    /// Destination URL or path as given by the user.
    pub destination: String,
    /// Source host as `host:port`, or `local`.
    pub source_host: String,
    /// Destination host as `host:port`, or `local`.
    pub destination_host: String,
    /// Tuning parameters used.
    pub params: Params,
    /// Number of files moved.
    pub files: u64,
    /// Number of bytes moved.
    pub bytes: u64,
    /// How the transfer ended.
    pub outcome: Outcome,
    /// Error message when the transfer did not succeed.
    pub error: Option<String>,
    /// Per-interval throughput; empty when not loaded (listings) or not recorded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub samples: Vec<Sample>,
}

impl TransferRecord {
    /// Mean throughput in bits per second (0 when the duration is 0).
    pub fn mean_bps(&self) -> f64 {
        if self.duration_s > 0.0 {
            self.bytes as f64 * 8.0 / self.duration_s
        } else {
            0.0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcome_parses_case_insensitively_and_rejects_others() {
        assert_eq!("OK".parse::<Outcome>(), Ok(Outcome::Ok));
        assert_eq!("interrupted".parse::<Outcome>(), Ok(Outcome::Interrupted));
        assert!("done".parse::<Outcome>().is_err());
    }

    #[test]
    fn mean_rate_is_bits_per_second() {
        let r = TransferRecord {
            id: None,
            kind: "cp".into(),
            started_at: 0.0,
            duration_s: 2.0,
            source: "a".into(),
            destination: "b".into(),
            source_host: "local".into(),
            destination_host: "local".into(),
            params: Params::default(),
            files: 1,
            bytes: 1000,
            outcome: Outcome::Ok,
            error: None,
            samples: vec![],
        };
        assert_eq!(r.mean_bps(), 4000.0);
    }
}
