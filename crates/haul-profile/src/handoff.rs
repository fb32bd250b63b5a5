//! What a profile hands to a transfer: the streams, block and socket buffer a `haul profile tune`
//! result chose (its best θ), or that a `haul profile run` measured with, read back from the
//! JSON either command prints with `--json`.

use serde::Deserialize;

use crate::{ProfileError, ProfileParams, Result, TransportKind};

/// The settings of a profile that a transfer can use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransferSettings {
    /// The transport the profile measured.
    pub transport: TransportKind,
    /// Parallel streams.
    pub streams: u32,
    /// Bytes per send / recv call (None: the profiler's default).
    pub block: Option<u64>,
    /// Socket buffer in bytes (None: kernel autotuning).
    pub buffer: Option<u64>,
}

impl From<&ProfileParams> for TransferSettings {
    fn from(p: &ProfileParams) -> TransferSettings {
        TransferSettings {
            transport: p.transport,
            streams: p.streams,
            block: p.block,
            buffer: p.buffer,
        }
    }
}

/// The two JSON shapes that carry a θ: a tune result's `best_params`, a run report's `params`.
#[derive(Deserialize)]
struct Shapes {
    best_params: Option<ProfileParams>,
    params: Option<ProfileParams>,
}

impl TransferSettings {
    /// Reads the output of `haul profile tune --json` (its best θ) or `haul profile run --json`
    /// (the θ it ran with).
    pub fn from_json(text: &str) -> Result<TransferSettings> {
        let bad = |why: String| ProfileError::param("profile result", why);
        let s: Shapes = serde_json::from_str(text).map_err(|e| {
            bad(format!(
                "not the JSON of `haul profile tune` or `haul profile run`: {e}"
            ))
        })?;
        match (s.best_params, s.params) {
            (Some(p), _) | (None, Some(p)) => Ok(TransferSettings::from(&p)),
            (None, None) => Err(bad(
                "it names no parameters (a tune that found no best probe has none)".into(),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn theta() -> ProfileParams {
        ProfileParams {
            streams: 6,
            block: Some(262_144),
            buffer: Some(8 << 20),
            ..ProfileParams::default()
        }
    }

    #[test]
    fn reads_a_tune_result_and_a_run_report() {
        let want = TransferSettings {
            transport: TransportKind::Tcp,
            streams: 6,
            block: Some(262_144),
            buffer: Some(8 << 20),
        };
        let tune = serde_json::json!({ "best": null, "best_params": theta(), "trace": {} });
        assert_eq!(
            TransferSettings::from_json(&tune.to_string()).unwrap(),
            want
        );
        let run = serde_json::json!({ "aggregate_bps": 1e9, "params": theta() });
        assert_eq!(TransferSettings::from_json(&run.to_string()).unwrap(), want);
    }

    #[test]
    fn refuses_what_carries_no_parameters() {
        let empty = serde_json::json!({ "best": null, "best_params": null, "trace": {} });
        assert!(TransferSettings::from_json(&empty.to_string()).is_err());
        assert!(TransferSettings::from_json("not json").is_err());
    }
}
