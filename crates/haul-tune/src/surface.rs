//! Throughput surfaces for replay: profile tables (a full grid of params → throughput, read from
//! CSV text), the synthetic table shaped like the 380 ms ANL–UChicago profile (§4.5.1 of 000,
//! Fig. 3.17), analytic test surfaces, and multiplicative measurement noise.

use std::collections::HashMap;

use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::space::{MIB, UDT_PAYLOAD_9000};
use crate::TuneError;

/// Anything that maps real-unit parameters to a noise-free throughput.
pub trait Surface {
    /// Throughput at `real`.
    fn value(&self, real: &[f64]) -> f64;
}

impl<F: Fn(&[f64]) -> f64> Surface for F {
    fn value(&self, real: &[f64]) -> f64 {
        self(real)
    }
}

/// A complete grid of measured throughputs; lookups snap to the nearest grid value per axis.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Table {
    /// Column names, one per axis.
    pub names: Vec<String>,
    /// Sorted grid values of each axis, in real units.
    pub axes: Vec<Vec<f64>>,
    /// Throughputs, row-major with the last axis fastest.
    pub values: Vec<f64>,
}

impl Table {
    /// Parses CSV text: a header `name1,...,nameN,throughput`, then one row per grid point.
    /// Blank lines and `#` comments are skipped. The grid must be complete and duplicate-free.
    pub fn from_csv(text: &str) -> Result<Table, TuneError> {
        let err = |line: usize, reason: String| TuneError::Table { line, reason };
        let mut lines = text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty() && !l.trim_start().starts_with('#'));
        let (_, header) = lines.next().ok_or_else(|| err(0, "empty table".into()))?;
        let cols: Vec<String> = header.split(',').map(|s| s.trim().to_string()).collect();
        if cols.len() < 2 {
            return Err(err(
                1,
                format!(
                    "need at least one parameter column and a throughput column, got {header:?}"
                ),
            ));
        }
        let dim = cols.len() - 1;
        let mut rows: Vec<(usize, Vec<f64>)> = Vec::new();
        for (i, line) in lines {
            let nums: Result<Vec<f64>, _> =
                line.split(',').map(|s| s.trim().parse::<f64>()).collect();
            let nums = nums.map_err(|e| err(i + 1, format!("{line:?}: {e}")))?;
            if nums.len() != cols.len() || nums.iter().any(|v| !v.is_finite()) {
                return Err(err(
                    i + 1,
                    format!("{line:?}: need {} finite numbers", cols.len()),
                ));
            }
            rows.push((i + 1, nums));
        }
        let mut axes: Vec<Vec<f64>> = vec![Vec::new(); dim];
        for (_, r) in &rows {
            for (a, &v) in axes.iter_mut().zip(r) {
                a.push(v);
            }
        }
        for a in axes.iter_mut() {
            a.sort_by(f64::total_cmp);
            a.dedup();
        }
        let total: usize = axes.iter().map(Vec::len).product();
        if rows.len() != total {
            return Err(err(
                0,
                format!(
                    "{} rows but the grid {:?} needs {total}",
                    rows.len(),
                    axes.iter().map(Vec::len).collect::<Vec<_>>()
                ),
            ));
        }
        let mut values = vec![f64::NAN; total];
        let mut t = Table {
            names: cols[..dim].to_vec(),
            axes,
            values: Vec::new(),
        };
        let mut seen: HashMap<usize, usize> = HashMap::new();
        for (line, r) in rows {
            let idx = t.index(&r[..dim]);
            if let Some(first) = seen.insert(idx, line) {
                return Err(err(
                    line,
                    format!("duplicate grid point (first on line {first})"),
                ));
            }
            values[idx] = r[dim];
        }
        t.values = values;
        Ok(t)
    }

    /// The table as CSV text (`from_csv` reads it back).
    pub fn to_csv(&self) -> String {
        let mut out = self.names.join(",") + ",throughput\n";
        for (idx, v) in self.values.iter().enumerate() {
            let mut rest = idx;
            let mut coords = vec![0.0; self.axes.len()];
            for (k, a) in self.axes.iter().enumerate().rev() {
                coords[k] = a[rest % a.len()];
                rest /= a.len();
            }
            let cs: Vec<String> = coords.iter().map(|c| c.to_string()).collect();
            out += &format!("{},{v}\n", cs.join(","));
        }
        out
    }

    fn nearest(axis: &[f64], x: f64) -> usize {
        let i = axis.partition_point(|&v| v < x);
        if i == 0 {
            0
        } else if i >= axis.len() {
            axis.len() - 1
        } else if (x - axis[i - 1]) <= (axis[i] - x) {
            i - 1
        } else {
            i
        }
    }

    fn index(&self, real: &[f64]) -> usize {
        self.axes
            .iter()
            .zip(real)
            .fold(0, |acc, (a, &x)| acc * a.len() + Table::nearest(a, x))
    }

    /// Largest value in the table.
    pub fn max(&self) -> f64 {
        self.values
            .iter()
            .copied()
            .fold(f64::NEG_INFINITY, f64::max)
    }

    /// Fraction of grid points with value ≥ `y`.
    pub fn fraction_at_least(&self, y: f64) -> f64 {
        self.values.iter().filter(|&&v| v >= y).count() as f64 / self.values.len().max(1) as f64
    }
}

impl Surface for Table {
    fn value(&self, real: &[f64]) -> f64 {
        if real.len() != self.axes.len() {
            return f64::NAN;
        }
        self.values
            .get(self.index(real))
            .copied()
            .unwrap_or(f64::NAN)
    }
}

/// 10 Gb/s in bytes per second, the ANL–UChicago link rate.
pub const TEN_GBPS: f64 = 1.25e9;
/// BDP of 10 Gb/s × 380 ms, in bytes (475 MB, §4.5.3 of 000).
pub const ANL_BDP: f64 = 475e6;

// Deterministic per-cell uniform in [0, 1) (SplitMix64 of seed and cell).
fn cell_uniform(seed: u64, a: u64, b: u64) -> f64 {
    let mut z =
        seed ^ a.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ b.wrapping_mul(0xC2B2_AE3D_27D4_EB4F);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

/// A 25 × 513 (block × buffer) table shaped like Fig. 3.17 of 000, in bytes/s: below 6 Gb/s when
/// the buffer is under the 475 MB BDP, below 7 Gb/s for blocks of 1–4 payloads, up to ~9.9 Gb/s
/// otherwise (7.4–9.9 Gb/s rising with the block size, peaking near a 780 MiB buffer), with about 8% of the good cells dipping to
/// ~6 Gb/s and ±2% cell roughness. `seed` picks the dips and roughness.
pub fn anl_uchicago_like(seed: u64) -> Table {
    let blocks: Vec<f64> = (1..=25).map(|k| f64::from(k) * UDT_PAYLOAD_9000).collect();
    let buffers: Vec<f64> = (0..513)
        .map(|i| f64::from((1 + 2 * i).min(1024)) * MIB)
        .collect();
    let mut values = Vec::with_capacity(blocks.len() * buffers.len());
    for (ki, _) in blocks.iter().enumerate() {
        let k = ki as f64 + 1.0;
        for (fi, &f) in buffers.iter().enumerate() {
            let rough = 1.0 + 0.02 * (2.0 * cell_uniform(seed, ki as u64, fi as u64) - 1.0);
            let gbps = if f < ANL_BDP {
                // Window-limited: rate ≈ buffer/RTT, capped below 6 Gb/s.
                (5.8 * (f / ANL_BDP).powf(0.8)).min(if k <= 4.0 { 4.4 + 0.5 * k } else { 5.8 })
            } else if k <= 4.0 {
                4.4 + 0.55 * k
            } else {
                let dip = cell_uniform(seed ^ 0xD1B5, ki as u64, fi as u64) < 0.08;
                if dip {
                    5.8 + 0.4 * cell_uniform(seed ^ 0x51ED, ki as u64, fi as u64)
                } else {
                    let plateau = 7.4 + 2.5 * (1.0 - (-(k - 4.0) / 5.0).exp());
                    let u = (f / MIB - 780.0) / 250.0;
                    plateau * (1.0 - 0.10 * u * u)
                }
            };
            values.push((gbps * rough).min(9.95) * TEN_GBPS / 10.0);
        }
    }
    Table {
        names: vec!["block".into(), "buffer".into()],
        axes: vec![blocks, buffers],
        values,
    }
}

/// Multiplicative Gaussian measurement noise: y = max(0, v·(1 + σ·N(0, 1))).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Noise {
    /// Relative standard deviation σ (0.03 by default).
    pub rel_sigma: f64,
}

impl Default for Noise {
    fn default() -> Self {
        Noise { rel_sigma: 0.03 }
    }
}

impl Noise {
    /// One noisy reading of `v`.
    pub fn sample<R: Rng>(&self, v: f64, rng: &mut R) -> f64 {
        (v * (1.0 + self.rel_sigma * gaussian(rng))).max(0.0)
    }
}

/// A standard normal draw (Box–Muller).
pub fn gaussian<R: Rng>(rng: &mut R) -> f64 {
    let u1: f64 = rng.gen_range(f64::MIN_POSITIVE..1.0);
    let u2: f64 = rng.gen();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}
