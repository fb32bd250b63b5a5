//! The parameter box. Iterates live in [1, 25] on every axis and are mapped to real units
//! linearly or exponentially (Eqs. 4.8, 4.9, 4.12 of 000); projection keeps them in the box.

use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::TuneError;

/// Lower end of every iterate axis (Eq. 4.12 of 000: l'_min = f'_min = 1.0).
pub const ITER_MIN: f64 = 1.0;
/// Upper end of every iterate axis (Eq. 4.12 of 000: l'_max = f'_max = 25.0).
pub const ITER_MAX: f64 = 25.0;

/// A point in iterate space, one coordinate per axis.
pub type Point = Vec<f64>;

/// How an iterate maps to a real value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Scale {
    /// λ(θ') = (θ' − 1)·(max − min)/24 + min (Eq. 4.12 of 000).
    Linear,
    /// λ(θ') = min·(max/min)^((θ' − 1)/24): the 2^{f'} form of §4.4 of 000, stretched to the range.
    Exponential,
}

/// One tunable parameter: a range in "precision units" and the unit size μ in real units.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Axis {
    /// Name for traces and reports.
    pub name: String,
    /// Smallest value, in units of `unit` (l_min, f_min).
    pub min: f64,
    /// Largest value, in units of `unit` (l_max, f_max).
    pub max: f64,
    /// Precision μ: real value = round(λ(θ')·μ).
    pub unit: f64,
    /// Linear or exponential mapping.
    pub scale: Scale,
}

/// UDT payload per packet at MTU 9000: m − 16 = 8,972 − 16 (§3 of 000).
pub const UDT_PAYLOAD_9000: f64 = 8956.0;
/// One MiB, the buffer precision μ_f of the emulation in §4.5.2 of 000.
pub const MIB: f64 = 1_048_576.0;

impl Axis {
    /// A validated axis.
    pub fn new(name: &str, min: f64, max: f64, unit: f64, scale: Scale) -> Result<Axis, TuneError> {
        let ok = min.is_finite() && max.is_finite() && unit.is_finite() && unit > 0.0 && min < max;
        if !ok || (scale == Scale::Exponential && min <= 0.0) {
            return Err(TuneError::BadParameter {
                name: "axis",
                reason: format!("{name}: need finite 0 < unit, min < max (min > 0 for exponential); got min {min}, max {max}, unit {unit}"),
            });
        }
        Ok(Axis {
            name: name.to_string(),
            min,
            max,
            unit,
            scale,
        })
    }

    /// Block size: 1–25 UDT payloads of 8,956 B (§4.5.2 of 000).
    pub fn block_payloads() -> Axis {
        Axis {
            name: "block".into(),
            min: 1.0,
            max: 25.0,
            unit: UDT_PAYLOAD_9000,
            scale: Scale::Linear,
        }
    }

    /// Buffer size: 1 MiB – 1 GiB in 1 MiB precision (§4.5.2 of 000).
    pub fn buffer_mib() -> Axis {
        Axis {
            name: "buffer".into(),
            min: 1.0,
            max: 1024.0,
            unit: MIB,
            scale: Scale::Linear,
        }
    }

    /// Parallel streams 1..=max.
    pub fn streams(max: u32) -> Axis {
        Axis {
            name: "streams".into(),
            min: 1.0,
            max: f64::from(max.max(2)),
            unit: 1.0,
            scale: Scale::Linear,
        }
    }

    /// Packet size in bytes (e.g. 1472..8972 for UDT over MTU 1500..9000).
    pub fn packet(min: f64, max: f64) -> Result<Axis, TuneError> {
        Axis::new("packet", min, max, 1.0, Scale::Linear)
    }

    /// λ(θ'): the value in precision units (before multiplying by μ).
    pub fn lambda(&self, it: f64) -> f64 {
        let u = ((it.clamp(ITER_MIN, ITER_MAX)) - ITER_MIN) / (ITER_MAX - ITER_MIN);
        match self.scale {
            Scale::Linear => u * (self.max - self.min) + self.min,
            Scale::Exponential => self.min * (self.max / self.min).powf(u),
        }
    }

    /// Real value round(λ(θ')·μ) (Eq. 4.12 of 000).
    pub fn to_real(&self, it: f64) -> f64 {
        (self.lambda(it) * self.unit).round()
    }

    /// Inverse map: the iterate whose real value is closest to `real` (clamped to the box).
    pub fn to_iterate(&self, real: f64) -> f64 {
        let v = (real / self.unit).clamp(self.min, self.max);
        let u = match self.scale {
            Scale::Linear => (v - self.min) / (self.max - self.min),
            Scale::Exponential => (v / self.min).ln() / (self.max / self.min).ln(),
        };
        ITER_MIN + u * (ITER_MAX - ITER_MIN)
    }

    /// The 𝒜 rule (§4.4.3 of 000): raise the lower end so real values stay ≥ `floor_real`
    /// (e.g. the BDP for a buffer axis). No-op if the floor is below the range; capped at `max`.
    pub fn with_floor(&self, floor_real: f64) -> Axis {
        let mut a = self.clone();
        let f = floor_real / self.unit;
        if f.is_finite() && f > a.min {
            a.min = f.min(a.max);
            if a.min >= a.max {
                a.min = a.max - f64::EPSILON * a.max.abs().max(1.0);
            }
        }
        a
    }
}

/// A box of axes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Space {
    /// The axes, in coordinate order.
    pub axes: Vec<Axis>,
}

impl Space {
    /// A space from axes.
    pub fn new(axes: Vec<Axis>) -> Space {
        Space { axes }
    }

    /// FastProf's default space: block size × buffer size (§4.3 of 000).
    pub fn block_buffer() -> Space {
        Space::new(vec![Axis::block_payloads(), Axis::buffer_mib()])
    }

    /// Number of coordinates.
    pub fn dim(&self) -> usize {
        self.axes.len()
    }

    /// Real-unit parameters for an iterate.
    pub fn to_real(&self, p: &[f64]) -> Vec<f64> {
        self.axes
            .iter()
            .zip(p)
            .map(|(a, &x)| a.to_real(x))
            .collect()
    }

    /// Iterate for real-unit parameters (for start points from history).
    pub fn to_iterate(&self, real: &[f64]) -> Point {
        self.axes
            .iter()
            .zip(real)
            .map(|(a, &x)| a.to_iterate(x))
            .collect()
    }

    /// Nearest feasible point: clamps every coordinate to [1, 25]; NaN goes to the centre.
    pub fn project(&self, p: &mut Point) {
        p.resize(self.dim(), (ITER_MIN + ITER_MAX) / 2.0);
        for x in p.iter_mut() {
            *x = if x.is_nan() {
                (ITER_MIN + ITER_MAX) / 2.0
            } else {
                x.clamp(ITER_MIN, ITER_MAX)
            };
        }
    }

    /// A uniform random point in the box (FastProf's random start, §4.4.3 of 000).
    pub fn random_point<R: Rng>(&self, rng: &mut R) -> Point {
        (0..self.dim())
            .map(|_| rng.gen_range(ITER_MIN..=ITER_MAX))
            .collect()
    }

    /// Integer key of the real-unit point (for memoising and tabu lists).
    pub fn key(&self, p: &[f64]) -> Vec<i64> {
        self.to_real(p).iter().map(|&v| v as i64).collect()
    }

    /// Applies the 𝒜 rule to the named axis (usually "buffer").
    pub fn with_floor(&self, axis: &str, floor_real: f64) -> Space {
        let axes = self
            .axes
            .iter()
            .map(|a| {
                if a.name == axis {
                    a.with_floor(floor_real)
                } else {
                    a.clone()
                }
            })
            .collect();
        Space { axes }
    }
}

/// Largest step t ≤ `c` such that `p + t·d` stays in the box, for d a ±1 vector
/// (the per-side step shrink of the author's fastprof_udt.cpp, §4 of 000).
pub fn feasible_step(p: &[f64], d: &[f64], c: f64) -> f64 {
    p.iter().zip(d).fold(c, |t, (&x, &s)| {
        let room = if s > 0.0 {
            ITER_MAX - x
        } else if s < 0.0 {
            x - ITER_MIN
        } else {
            f64::INFINITY
        };
        t.min(room.max(0.0))
    })
}
