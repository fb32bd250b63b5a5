//! History-based BTC (bulk transfer capacity) predictors of the GridFTP overlay thesis
//! (§4.4.1 and §5.3.3 of 002; digest §2.3): the median of the last n transfers, a moving average
//! over the last n transfers or a time window, the modified EWMA that passes outages and
//! recoveries through at once, and (as the Network Weather Service does) a [`Selector`] that
//! answers with whichever of them has had the smallest recent error for the pair.
//!
//! Everything here is a pure function of one pair's history (oldest first) and the time the
//! prediction is wanted for: no IO, no clock. The caller keeps one history per (source,
//! destination, transfer type: D2D or M2M) and passes `now` itself. Samples that are not
//! [valid](Measurement::is_valid) (a non-finite time or rate, a negative rate) are skipped by
//! every predictor; [`validate_history`] names them for callers that want to reject them instead.

pub mod accuracy;
mod selector;

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::TuneError;

pub use selector::{step_error, Score, Selector, DEFAULT_CANDIDATES, DEFAULT_ERROR_WINDOW};

/// Default sample count of the median and the moving average (n = 5, §5.3.3 of 002).
pub const DEFAULT_N: usize = 5;
/// Default weight of the newest sample in the modified EWMA (α = 0.3, §5.3.3 of 002).
pub const DEFAULT_ALPHA: f64 = 0.3;

/// One BTC measurement of a pair: a finished transfer's unique bytes over its elapsed time.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Measurement {
    /// When the measurement was taken (the transfer ended), unix seconds.
    pub at: f64,
    /// BTC in bits per second (RFC 3148, digest §2.1); 0 records an outage.
    pub bps: f64,
}

impl Measurement {
    /// A measurement of `bps` bits per second taken at `at` (unix seconds).
    pub fn new(at: f64, bps: f64) -> Self {
        Measurement { at, bps }
    }

    /// True when usable: a finite time and a finite, non-negative rate.
    pub fn is_valid(&self) -> bool {
        self.at.is_finite() && self.bps.is_finite() && self.bps >= 0.0
    }
}

/// Checks a history: every sample valid and the times non-decreasing (oldest first).
pub fn validate_history(history: &[Measurement]) -> Result<(), TuneError> {
    let mut prev = f64::NEG_INFINITY;
    for (i, m) in history.iter().enumerate() {
        for (what, value) in [("time", m.at), ("rate", m.bps)] {
            if !value.is_finite() {
                return Err(TuneError::NonFinite {
                    what: format!("sample {i} {what}"),
                    value,
                });
            }
        }
        if m.bps < 0.0 {
            return Err(TuneError::BadParameter {
                name: "history",
                reason: format!("sample {i} has a negative rate {}", m.bps),
            });
        }
        if m.at < prev {
            return Err(TuneError::BadParameter {
                name: "history",
                reason: format!("sample {i} at {} is older than the one before it", m.at),
            });
        }
        prev = m.at;
    }
    Ok(())
}

/// Percent error of a prediction, `|P − A| / A × 100` (§5.3.5 of 002, digest §2.1); `None` unless
/// both are finite and the actual value is positive.
pub fn percent_error(predicted: f64, actual: f64) -> Option<f64> {
    (predicted.is_finite() && actual.is_finite() && actual > 0.0)
        .then(|| (predicted - actual).abs() / actual * 100.0)
}

/// Percent improvement of a split path over the direct one, `(S − N) / N × 100` (digest §2.1);
/// `None` unless both are finite and the direct throughput is positive.
pub fn improvement(split: f64, direct: f64) -> Option<f64> {
    (split.is_finite() && direct.is_finite() && direct > 0.0)
        .then(|| (split - direct) / direct * 100.0)
}

/// Which samples a windowed predictor uses (§5.3.3 of 002: a constant n, or a constant span).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum Window {
    /// The last n valid samples (fewer if the history is shorter); n ≥ 1.
    Last(usize),
    /// The valid samples taken at or after `now − s` seconds; s > 0 and finite.
    Seconds(f64),
}

impl Window {
    /// True when the window can hold a sample.
    pub fn is_valid(&self) -> bool {
        match *self {
            Window::Last(n) => n >= 1,
            Window::Seconds(s) => s.is_finite() && s > 0.0,
        }
    }

    /// The samples in the window, newest first (assumes `history` is oldest first).
    fn samples(
        self,
        history: &[Measurement],
        now: f64,
    ) -> impl Iterator<Item = &Measurement> + Clone {
        let (limit, cutoff) = match self {
            Window::Last(n) => (n, f64::NEG_INFINITY),
            Window::Seconds(s) => (usize::MAX, now - s),
        };
        history
            .iter()
            .rev()
            .filter(|m| m.is_valid())
            .take(limit)
            .take_while(move |m| m.at >= cutoff)
    }
}

/// A history-based BTC predictor (§5.3.3 of 002, digest §2.3).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum Predictor {
    /// Median of the last n samples; for an even count, the mean of the two middle ones.
    Median {
        /// Samples used (5 in the thesis); n ≥ 1.
        n: usize,
    },
    /// Moving average `Â_i = (1/n) Σ_{k=i−n}^{i−1} X_k` over a count or a time window.
    MovingAverage {
        /// Which samples are averaged.
        window: Window,
    },
    /// The thesis's modified EWMA: outages and recoveries pass through at once (see [`EwmaState`]).
    Ewma {
        /// Weight of the newest sample, 0 < α ≤ 1 (0.3 in the thesis).
        alpha: f64,
    },
}

impl Predictor {
    /// True when the parameters are usable.
    pub fn is_valid(&self) -> bool {
        match *self {
            Predictor::Median { n } => n >= 1,
            Predictor::MovingAverage { window } => window.is_valid(),
            Predictor::Ewma { alpha } => alpha_is_valid(alpha),
        }
    }

    /// `Ok` when the parameters are usable, else an error naming the bad one.
    pub fn check(&self) -> Result<(), TuneError> {
        if self.is_valid() {
            return Ok(());
        }
        let name = match self {
            Predictor::Median { .. } => "median n",
            Predictor::MovingAverage { .. } => "moving-average window",
            Predictor::Ewma { .. } => "ewma alpha",
        };
        Err(TuneError::BadParameter {
            name,
            reason: format!("{self:?} is out of range"),
        })
    }

    /// The prediction for a transfer at `now` from `history` (oldest first); `None` when the
    /// parameters are invalid, `now` is not finite or no valid sample is in the window.
    pub fn predict(&self, history: &[Measurement], now: f64) -> Option<Prediction> {
        if !self.is_valid() || !now.is_finite() {
            return None;
        }
        let (bps, newest_at, samples) = match *self {
            Predictor::Median { n } => median(Window::Last(n).samples(history, now))?,
            Predictor::MovingAverage { window } => mean(window.samples(history, now))?,
            Predictor::Ewma { alpha } => {
                let mut state = EwmaState::new(alpha).ok()?;
                history.iter().for_each(|m| state.push(*m));
                (state.estimate()?, state.newest_at()?, state.samples())
            }
        };
        Some(Prediction {
            bps,
            age_s: (now - newest_at).max(0.0),
            samples,
            predictor: *self,
            error_pct: None,
        })
    }
}

impl fmt::Display for Predictor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Predictor::Median { n } => write!(f, "median({n})"),
            Predictor::MovingAverage {
                window: Window::Last(n),
            } => write!(f, "mavg({n})"),
            Predictor::MovingAverage {
                window: Window::Seconds(s),
            } => write!(f, "mavg({s}s)"),
            Predictor::Ewma { alpha } => write!(f, "ewma({alpha})"),
        }
    }
}

/// A BTC prediction for one pair, with what it rests on.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Prediction {
    /// Predicted BTC, bits per second (0: the pair is predicted to be in an outage).
    pub bps: f64,
    /// `now` minus the time of the newest sample used, seconds (0 if that sample is later).
    pub age_s: f64,
    /// Samples behind the value (for the EWMA: those since its last outage reset).
    pub samples: usize,
    /// The predictor that made it (for a [`Selector`], the winning candidate).
    pub predictor: Predictor,
    /// The predictor's recent mean absolute percentage error (set by a [`Selector`] only).
    pub error_pct: Option<f64>,
}

/// Median of the window, its newest time and its size (digest §2.3; O(n log n)).
fn median<'a>(window: impl Iterator<Item = &'a Measurement>) -> Option<(f64, f64, usize)> {
    let mut newest_at = None;
    let mut xs: Vec<f64> = window
        .inspect(|m| {
            newest_at.get_or_insert(m.at);
        })
        .map(|m| m.bps)
        .collect();
    let newest_at = newest_at?;
    xs.sort_by(f64::total_cmp);
    let mid = xs.len() / 2;
    let value = if xs.len() % 2 == 1 {
        xs[mid]
    } else {
        // Written so that it cannot overflow: xs[mid] ≥ xs[mid − 1] ≥ 0.
        xs[mid - 1] + (xs[mid] - xs[mid - 1]) / 2.0
    };
    Some((value, newest_at, xs.len()))
}

/// Mean of the window, its newest time and its size, clamped to the window's range.
fn mean<'a>(window: impl Iterator<Item = &'a Measurement> + Clone) -> Option<(f64, f64, usize)> {
    let newest_at = window.clone().next()?.at;
    let (count, lo, hi) = window
        .clone()
        .fold((0usize, f64::INFINITY, 0.0f64), |acc, m| {
            (acc.0 + 1, acc.1.min(m.bps), acc.2.max(m.bps))
        });
    // Summing x/n rather than x keeps the sum finite for any finite samples; the clamp undoes
    // rounding (three samples of 0.1 would otherwise average 0.10000000000000002).
    let n = count as f64;
    let value = window.map(|m| m.bps / n).sum::<f64>().clamp(lo, hi);
    Some((value, newest_at, count))
}

fn alpha_is_valid(alpha: f64) -> bool {
    alpha.is_finite() && alpha > 0.0 && alpha <= 1.0
}

/// Running state of the thesis's modified EWMA (§5.3.3 of 002, digest §2.3), fed one sample at
/// a time: `X̂_i = X_{i−1}` if `X_{i−1} = 0` or `X_{i−2} = 0`, else `α·X_{i−1} + (1−α)·X̂_{i−1}`.
/// The first estimate is the first sample (`X̂_1 = X_0`), so an outage is predicted as 0 at once
/// and the first value after a 0 is passed through unchanged.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EwmaState {
    alpha: f64,
    estimate: Option<f64>,
    last: Option<f64>,
    newest_at: Option<f64>,
    samples: usize,
}

impl EwmaState {
    /// An empty state with weight `alpha` (0 < α ≤ 1) for the newest sample.
    pub fn new(alpha: f64) -> Result<Self, TuneError> {
        if !alpha_is_valid(alpha) {
            return Err(TuneError::BadParameter {
                name: "ewma alpha",
                reason: format!("{alpha} is not in (0, 1]"),
            });
        }
        Ok(EwmaState {
            alpha,
            estimate: None,
            last: None,
            newest_at: None,
            samples: 0,
        })
    }

    /// Folds in the next sample (oldest first); an invalid one is skipped.
    pub fn push(&mut self, m: Measurement) {
        if !m.is_valid() {
            return;
        }
        let x = m.bps;
        match self.estimate {
            Some(prev) if x != 0.0 && self.last != Some(0.0) => {
                let (lo, hi) = (prev.min(x), prev.max(x));
                // prev + α(x − prev) cannot overflow; the clamp absorbs rounding.
                self.estimate = Some((prev + self.alpha * (x - prev)).clamp(lo, hi));
                self.samples += 1;
            }
            _ => {
                self.estimate = Some(x);
                self.samples = 1;
            }
        }
        self.last = Some(x);
        self.newest_at = Some(m.at);
    }

    /// The prediction for the next sample, once there has been one.
    pub fn estimate(&self) -> Option<f64> {
        self.estimate
    }

    /// Samples folded in since the last pass-through (first sample, outage or recovery).
    pub fn samples(&self) -> usize {
        self.samples
    }

    /// Time of the newest sample folded in.
    pub fn newest_at(&self) -> Option<f64> {
        self.newest_at
    }
}
