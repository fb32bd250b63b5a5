//! Sweeps: run a grid over any parameters of θ and collect the transport profile table
//! TP_t(⟨h_s,h_r⟩, e, θ) of 000 §3 as CSV, one row per grid point and repetition.
//!
//! Parameter names: `block` (bytes), `block_k` and `block_offset` (l = k(m−16) + Δ, Eq. 3.3
//! of 000; Δ defaults to −1), `packet` (m), `buffer` (TCP/UDP socket buffer and all four UDT
//! buffers), `sndbuf` / `rcvbuf` (UDT and UDP send / receive buffers together, Fig. 7 of
//! 001), `udt_sndbuf`, `udt_rcvbuf`, `udp_sndbuf`, `udp_rcvbuf`, `udt_maxbw` (B/s),
//! `streams`, `rate` (b/s), `mss`, `pacing` (B/s), `plut_rate` and `plut_initial_rate`
//! (PLUT's maximum and initial rate per stream, B/s), `duration` (s).

use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::params::ProfileParams;
use crate::{ProfileError, Result};

/// Every parameter a sweep can vary.
pub const NAMES: &[&str] = &[
    "block",
    "block_k",
    "block_offset",
    "packet",
    "buffer",
    "sndbuf",
    "rcvbuf",
    "udt_sndbuf",
    "udt_rcvbuf",
    "udp_sndbuf",
    "udp_rcvbuf",
    "udt_maxbw",
    "streams",
    "rate",
    "mss",
    "pacing",
    "plut_rate",
    "plut_initial_rate",
    "duration",
];

/// One swept parameter and its values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepAxis {
    /// Parameter name (one of [`NAMES`]).
    pub name: String,
    /// Values in sweep order.
    pub values: Vec<f64>,
}

/// Parses a number with an optional binary suffix (`64K`, `1M`, `2G`) or a plain float.
fn number(s: &str) -> Option<f64> {
    let t = s.trim();
    let (num, mult) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let m = match c.to_ascii_lowercase() {
                'k' => 1024.0,
                'm' => 1_048_576.0,
                'g' => 1_073_741_824.0,
                _ => return None,
            };
            (&t[..i], m)
        }
        _ => (t, 1.0),
    };
    num.parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
        .map(|v| v * mult)
}

/// Parses `NAME=V1,V2,...`, `NAME=START:END:STEP` (linear) or `NAME=START:END:xF` (geometric).
pub fn parse_axis(spec: &str) -> Result<SweepAxis> {
    let bad = |r: String| ProfileError::param("--vary", format!("{spec:?}: {r}"));
    let (name, vals) = spec
        .split_once('=')
        .ok_or_else(|| bad("expected NAME=VALUES".into()))?;
    let name = name.trim();
    if !NAMES.contains(&name) {
        return Err(bad(format!(
            "unknown parameter {name:?} (one of {})",
            NAMES.join(", ")
        )));
    }
    let parts: Vec<&str> = vals.split(':').collect();
    let values = match parts.as_slice() {
        [a, b, step] => {
            let (a, b) = (
                number(a).ok_or_else(|| bad(format!("bad start {a:?}")))?,
                number(b).ok_or_else(|| bad(format!("bad end {b:?}")))?,
            );
            let mut out = Vec::new();
            if let Some(f) = step.strip_prefix('x') {
                let f = number(f)
                    .filter(|f| *f > 1.0)
                    .ok_or_else(|| bad("factor must be > 1".into()))?;
                let mut v = a;
                while v <= b * (1.0 + 1e-9) && a > 0.0 && out.len() < 10_000 {
                    out.push(v);
                    v *= f;
                }
            } else {
                let s = number(step)
                    .filter(|s| *s > 0.0)
                    .ok_or_else(|| bad("step must be > 0".into()))?;
                let n = ((b - a) / s + 1e-9).floor();
                if !(0.0..10_000.0).contains(&n) {
                    return Err(bad("range is empty or has more than 10000 points".into()));
                }
                out.extend((0..=n as u64).map(|i| a + i as f64 * s));
            }
            out
        }
        [list] => list
            .split(',')
            .map(|v| number(v).ok_or_else(|| bad(format!("bad value {v:?}"))))
            .collect::<Result<Vec<_>>>()?,
        _ => return Err(bad("expected a list or START:END:STEP".into())),
    };
    if values.is_empty() {
        return Err(bad("no values".into()));
    }
    Ok(SweepAxis {
        name: name.to_string(),
        values,
    })
}

fn uint(name: &str, v: f64) -> Result<u64> {
    if v.is_finite() && v >= 0.0 && v <= u64::MAX as f64 {
        Ok(v.round() as u64)
    } else {
        Err(ProfileError::param(
            name,
            format!("{v} is not a non-negative integer"),
        ))
    }
}

/// θ at one grid point: `base` with each (name, value) applied.
pub fn apply(base: &ProfileParams, point: &[(&str, f64)]) -> Result<ProfileParams> {
    let mut p = base.clone();
    let (mut k, mut offset) = (None, -1.0);
    for &(name, v) in point {
        let u = || uint(name, v);
        match name {
            "block" => p.block = Some(u()?),
            "block_k" => k = Some(u()?),
            "block_offset" => offset = v,
            "packet" => {
                p.packet =
                    Some(u32::try_from(u()?).map_err(|_| ProfileError::param(name, "too large"))?)
            }
            "buffer" => {
                let b = u()?;
                p.buffer = Some(b);
                p.udt.sndbuf = Some(b);
                p.udt.rcvbuf = Some(b);
                p.udt.udp_sndbuf = Some(b);
                p.udt.udp_rcvbuf = Some(b);
            }
            "sndbuf" => {
                p.udt.sndbuf = Some(u()?);
                p.udt.udp_sndbuf = Some(u()?);
            }
            "rcvbuf" => {
                p.udt.rcvbuf = Some(u()?);
                p.udt.udp_rcvbuf = Some(u()?);
            }
            "udt_sndbuf" => p.udt.sndbuf = Some(u()?),
            "udt_rcvbuf" => p.udt.rcvbuf = Some(u()?),
            "udp_sndbuf" => p.udt.udp_sndbuf = Some(u()?),
            "udp_rcvbuf" => p.udt.udp_rcvbuf = Some(u()?),
            "udt_maxbw" => p.udt.maxbw = Some(u()?),
            "streams" => {
                p.streams =
                    u32::try_from(u()?).map_err(|_| ProfileError::param(name, "too large"))?
            }
            "rate" => p.rate_bps = Some(u()?),
            "mss" => {
                p.tcp.mss =
                    Some(u32::try_from(u()?).map_err(|_| ProfileError::param(name, "too large"))?)
            }
            "pacing" => p.tcp.pacing = Some(u()?),
            "plut_rate" => p.plut.max_rate = Some(u()?),
            "plut_initial_rate" => p.plut.initial_rate = Some(u()?),
            "duration" => p.duration_s = v,
            other => {
                return Err(ProfileError::param(
                    "--vary",
                    format!("unknown parameter {other:?}"),
                ))
            }
        }
    }
    if let Some(k) = k {
        // Eq. 3.3 of 000: l = k(m − 16) ± Δ_l.
        let l = (k * p.udt_payload()) as f64 + offset;
        p.block = Some(uint("block_offset", l.max(1.0))?);
    }
    p.validate()?;
    Ok(p)
}

/// Every grid point (row-major: the last axis varies fastest).
pub fn grid(axes: &[SweepAxis]) -> Vec<Vec<f64>> {
    let mut out: Vec<Vec<f64>> = vec![Vec::new()];
    for a in axes {
        out = out
            .iter()
            .flat_map(|prefix| {
                a.values
                    .iter()
                    .map(move |v| [prefix.as_slice(), &[*v]].concat())
            })
            .collect();
    }
    out
}

/// One row of the profile table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// Axis values, in axis order.
    pub values: Vec<f64>,
    /// Repetition index.
    pub rep: u32,
    /// Block size in effect.
    pub block: u64,
    /// G(θ), bits per second (0 on failure).
    pub aggregate_bps: f64,
    /// Sender rate, bits per second.
    pub sender_bps: f64,
    /// Mean RTT over streams, ms.
    pub rtt_ms: Option<f64>,
    /// Retransmissions (sum over streams).
    pub retransmits: Option<u64>,
    /// The error, if the run failed.
    pub error: Option<String>,
}

/// Runs every grid point `reps` times against `server`; a failed point is a row with its error.
pub fn run(
    base: &ProfileParams,
    server: &str,
    axes: &[SweepAxis],
    reps: u32,
    mut on_row: impl FnMut(&Row),
) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    for values in grid(axes) {
        let point: Vec<(&str, f64)> = axes
            .iter()
            .map(|a| a.name.as_str())
            .zip(values.iter().copied())
            .collect();
        let p = apply(base, &point)?;
        for rep in 0..reps.max(1) {
            let row = match crate::run_client(p.clone(), crate::driver::ClientOptions::new(server))
            {
                Ok(r) => {
                    let rtts: Vec<f64> = r.streams.iter().filter_map(|s| s.rtt_ms).collect();
                    Row {
                        values: values.clone(),
                        rep,
                        block: r.block_size,
                        aggregate_bps: r.aggregate_bps,
                        sender_bps: r.sender_bps,
                        rtt_ms: (!rtts.is_empty())
                            .then(|| rtts.iter().sum::<f64>() / rtts.len() as f64),
                        retransmits: r.streams.iter().map(|s| s.retransmits).sum(),
                        error: None,
                    }
                }
                Err(e) => Row {
                    values: values.clone(),
                    rep,
                    block: p.block_size(),
                    aggregate_bps: 0.0,
                    sender_bps: 0.0,
                    rtt_ms: None,
                    retransmits: None,
                    error: Some(e.to_string()),
                },
            };
            on_row(&row);
            rows.push(row);
        }
    }
    Ok(rows)
}

/// Writes the profile table as CSV.
pub fn write_csv(path: &Path, axes: &[SweepAxis], rows: &[Row]) -> Result<()> {
    let err = |e: std::io::Error| ProfileError::Output {
        path: path.display().to_string(),
        reason: e.to_string(),
    };
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).map_err(err)?);
    let names: Vec<&str> = axes.iter().map(|a| a.name.as_str()).collect();
    writeln!(
        f,
        "{},rep,block,aggregate_bps,sender_bps,rtt_ms,retransmits,error",
        names.join(",")
    )
    .map_err(err)?;
    for r in rows {
        let vals: Vec<String> = r.values.iter().map(|v| format!("{v}")).collect();
        let opt = |v: Option<String>| v.unwrap_or_default();
        let e = r
            .error
            .as_deref()
            .unwrap_or("")
            .replace(['"', '\n', ','], " ");
        writeln!(
            f,
            "{},{},{},{:.0},{:.0},{},{},{e}",
            vals.join(","),
            r.rep,
            r.block,
            r.aggregate_bps,
            r.sender_bps,
            opt(r.rtt_ms.map(|v| format!("{v:.3}"))),
            opt(r.retransmits.map(|v| v.to_string()))
        )
        .map_err(err)?;
    }
    f.flush().map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::TransportKind;

    #[test]
    fn axes_parse_lists_ranges_and_factors() {
        assert_eq!(
            parse_axis("block=1K,89559").unwrap().values,
            vec![1024.0, 89_559.0]
        );
        assert_eq!(
            parse_axis("block_k=1:5:2").unwrap().values,
            vec![1.0, 3.0, 5.0]
        );
        assert_eq!(parse_axis("buffer=128K:1M:x2").unwrap().values.len(), 4);
        assert!(parse_axis("colour=1").is_err());
        assert!(parse_axis("block=1:2:0").is_err());
        assert!(parse_axis("block").is_err());
    }

    #[test]
    fn grid_is_the_cartesian_product() {
        let a = [
            SweepAxis {
                name: "a".into(),
                values: vec![1.0, 2.0],
            },
            SweepAxis {
                name: "b".into(),
                values: vec![3.0, 4.0, 5.0],
            },
        ];
        let g = grid(&a);
        assert_eq!(g.len(), 6);
        assert_eq!(g[1], vec![1.0, 4.0]);
    }

    #[test]
    fn block_k_and_offset_follow_eq_3_3() {
        let base = ProfileParams {
            transport: TransportKind::Udt,
            packet: Some(8972),
            ..Default::default()
        };
        assert_eq!(
            apply(&base, &[("block_k", 10.0)]).unwrap().block,
            Some(89_559)
        );
        assert_eq!(
            apply(&base, &[("block_k", 10.0), ("block_offset", 0.0)])
                .unwrap()
                .block,
            Some(89_560)
        );
        let p = apply(&base, &[("buffer", 1_048_576.0)]).unwrap();
        assert_eq!(
            (p.udt.sndbuf, p.udt.udp_rcvbuf),
            (Some(1_048_576), Some(1_048_576))
        );
        assert!(apply(&base, &[("streams", 0.0)]).is_err());
        let p = apply(&base, &[("plut_rate", 125e6), ("plut_initial_rate", 1e7)]).unwrap();
        assert_eq!(
            (p.plut.max_rate, p.plut.initial_rate),
            (Some(125_000_000), Some(10_000_000))
        );
    }
}
