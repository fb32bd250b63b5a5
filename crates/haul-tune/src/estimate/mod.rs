//! Early-stopping sample-throughput estimators (Ch. 4 of 003, §2.5–2.6 of 003-digest). Fit a
//! model on the instantaneous readings x₁..x_n (one per report interval, down to 100 ms), forecast
//! x_{n+1}, and end the sample when the forecast is within θ of the actual next reading. The
//! estimate is the mean of the next `horizon` iterated forecasts. Also the thesis's oracle.

pub mod fit;

use serde::{Deserialize, Serialize};

use crate::TuneError;

/// A time-series model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Model {
    /// AR(p), Eq. 4.2 of 003 (order reduced on short series).
    Ar {
        /// Order p (default 2: the thesis gives none, and 3–6 points allow only 1–2).
        p: usize,
    },
    /// ARIMA(p, d, q); d = 0 is ARMA (Eq. 4.3 of 003), fitted by Hannan–Rissanen.
    Arima {
        /// AR order.
        p: usize,
        /// Differencing order.
        d: usize,
        /// MA order.
        q: usize,
    },
    /// X_t = a − b/t², Eq. 4.1 of 003.
    NegPoly,
    /// Adaptive sampling (ref. 23 of 003): stop when two consecutive readings are within θ;
    /// the estimate is their mean.
    Adaptive,
}

impl Model {
    /// ARMA(p, q).
    pub fn arma(p: usize, q: usize) -> Model {
        Model::Arima { p, d: 0, q }
    }

    /// Short name for reports.
    pub fn name(&self) -> String {
        match *self {
            Model::Ar { p } => format!("AR({p})"),
            Model::Arima { p, d: 0, q } => format!("ARMA({p},{q})"),
            Model::Arima { p, d, q } => format!("ARIMA({p},{d},{q})"),
            Model::NegPoly => "a-b/t^2".into(),
            Model::Adaptive => "adaptive".into(),
        }
    }

    /// `steps` iterated forecasts after `xs`. Always finite: data are normalised by max |x|,
    /// forecasts are kept within one observed span of the observed range, and any model that
    /// cannot be fitted forecasts the last reading.
    pub fn forecast(&self, xs: &[f64], steps: usize) -> Vec<f64> {
        let Some(&last) = xs.last() else {
            return vec![0.0; steps];
        };
        let scale = xs.iter().fold(0.0f64, |m, x| m.max(x.abs()));
        if !(scale.is_finite() && scale > 0.0) {
            return vec![if last.is_finite() { last } else { 0.0 }; steps];
        }
        let z: Vec<f64> = xs.iter().map(|x| x / scale).collect();
        let raw = match *self {
            Model::Ar { p } => fit::forecast_ar(&z, p.max(1), steps),
            Model::Arima { p, d, q } => fit::forecast_arima(&z, p.max(1), d.min(2), q, steps),
            Model::NegPoly => fit::forecast_neg_poly(&z, steps),
            Model::Adaptive => None,
        };
        let zl = last / scale;
        let lo = z.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = z.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let span = (hi - lo).max(0.1);
        raw.unwrap_or_else(|| vec![zl; steps])
            .into_iter()
            .map(|v| {
                let v = if v.is_finite() {
                    v.clamp(lo - span, hi + span)
                } else {
                    zl
                };
                let out = v * scale;
                if out.is_finite() {
                    out
                } else {
                    last
                }
            })
            .collect()
    }
}

/// Where and how a sample ended.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Converged {
    /// Readings consumed, including the one used for the θ check.
    pub readings: usize,
    /// readings × dt, in seconds.
    pub time_s: f64,
    /// Estimated throughput of the whole transfer.
    pub estimate: f64,
}

/// The θ stopping rule around a model (§2.6 of 003-digest).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EarlyStop {
    /// The model.
    pub model: Model,
    /// θ: relative forecast error that ends the sample (default 0.10).
    pub theta: f64,
    /// Readings (blocks, with smoothing) fitted before the first check (3 in the thesis).
    pub min_points: usize,
    /// Forecasts averaged for the estimate (the thesis leaves it open; default 10).
    pub horizon: usize,
    /// Report interval in seconds (1.0 for GridFTP markers, down to 0.1).
    pub dt: f64,
    /// Seconds of transfer that must have been observed before the rule may stop, counting the
    /// checked reading (0: only `min_points` applies, as in the thesis). See [`EarlyStop::min_window`].
    #[serde(default)]
    pub min_window_s: f64,
    /// Readings are averaged over consecutive blocks of this many seconds before fitting and
    /// checking (0 or ≤ dt: raw readings, as in the thesis). See [`EarlyStop::smoothing`].
    #[serde(default)]
    pub smooth_s: f64,
    readings: Vec<f64>,
    /// Zero readings pushed before the first byte moved (not part of the sample).
    #[serde(skip)]
    idle: usize,
}

/// |a − b| / |b| ≤ θ, with a zero reference matching only zero.
fn within(a: f64, b: f64, theta: f64) -> bool {
    if b == 0.0 {
        a == 0.0
    } else {
        ((a - b) / b).abs() <= theta
    }
}

impl EarlyStop {
    /// Default minimum observation window, seconds ([`EarlyStop::min_window`]).
    pub const DEFAULT_MIN_WINDOW_S: f64 = 0.0;
    /// Default smoothing block, seconds ([`EarlyStop::smoothing`]).
    pub const DEFAULT_SMOOTH_S: f64 = 0.0;
    /// The minimum window recommended for sub-second report intervals (100–500 ms), picked by
    /// replay on the real corpus in docs/tuning.md ("Early-stopping estimators"). It changes
    /// nothing at 1 s reports, where the thesis's 3 points already span 3 s.
    pub const RECOMMENDED_MIN_WINDOW_S: f64 = 1.5;

    /// A rule with the thesis defaults (θ = 10%, 3 points) for `model` at interval `dt`.
    pub fn new(model: Model, dt: f64) -> Result<EarlyStop, TuneError> {
        if !(dt.is_finite() && dt > 0.0) {
            return Err(TuneError::BadParameter {
                name: "dt",
                reason: format!("report interval must be positive, got {dt}"),
            });
        }
        Ok(EarlyStop {
            model,
            theta: 0.10,
            min_points: 3,
            horizon: 10,
            dt,
            min_window_s: EarlyStop::DEFAULT_MIN_WINDOW_S,
            smooth_s: EarlyStop::DEFAULT_SMOOTH_S,
            readings: Vec::new(),
            idle: 0,
        })
    }

    /// Sets θ.
    pub fn theta(mut self, theta: f64) -> EarlyStop {
        self.theta = theta;
        self
    }

    /// Sets the minimum observation window: the rule may stop only on a reading that ends at
    /// least `secs` seconds into the sample (readings since the first byte × dt ≥ secs). With
    /// sub-second reports the thesis's 3 points are a fraction of a second of slow start; a
    /// window in seconds keeps the rule meaningful at any interval (see
    /// [`EarlyStop::RECOMMENDED_MIN_WINDOW_S`]). Negative or non-finite values mean no window.
    pub fn min_window(mut self, secs: f64) -> EarlyStop {
        self.min_window_s = if secs.is_finite() { secs.max(0.0) } else { 0.0 };
        self
    }

    /// Sets the smoothing block: readings are averaged over consecutive blocks of `secs` seconds
    /// (⌈secs/dt − ε⌉ readings) and the model is fitted, checked and forecast on the block means,
    /// so the rule only acts at block boundaries. `0` (the default) or anything ≤ dt fits the
    /// raw readings. The estimate is still the mean of `horizon` forecasts (of blocks).
    pub fn smoothing(mut self, secs: f64) -> EarlyStop {
        self.smooth_s = if secs.is_finite() { secs.max(0.0) } else { 0.0 };
        self
    }

    /// Readings per smoothing block (1 without smoothing).
    pub fn block_len(&self) -> usize {
        let k = (self.smooth_s / self.dt - 1e-9).ceil();
        if k.is_finite() && k > 1.0 {
            (k as usize).min(1 << 20)
        } else {
            1
        }
    }

    /// Forgets the readings (a new sample starts).
    pub fn reset(&mut self) {
        self.readings.clear();
        self.idle = 0;
    }

    /// Adds one instantaneous reading; returns the result once the sample has converged.
    /// Non-finite readings are rejected.
    ///
    /// Zero readings before the first non-zero one (connection setup: nothing has moved yet)
    /// are not part of the sample: they are not fitted and do not count towards the window,
    /// though they count in the returned `readings` and `time_s`. A zero reading never ends a
    /// sample.
    #[allow(clippy::manual_is_multiple_of)] // rust-version 1.80 predates is_multiple_of
    pub fn push(&mut self, x: f64) -> Result<Option<Converged>, TuneError> {
        if !x.is_finite() {
            return Err(TuneError::NonFinite {
                what: format!("reading {}", self.idle + self.readings.len() + 1),
                value: x,
            });
        }
        if self.readings.is_empty() && x == 0.0 {
            self.idle += 1;
            return Ok(None);
        }
        self.readings.push(x);
        let n = self.readings.len();
        let consumed = self.idle + n;
        let done = |estimate: f64| {
            Some(Converged {
                readings: consumed,
                time_s: consumed as f64 * self.dt,
                estimate,
            })
        };
        // The checked reading must end at least min_window_s into the sample.
        if (n as f64) * self.dt < self.min_window_s - 1e-9 * self.dt {
            return Ok(None);
        }
        let k = self.block_len();
        if n % k != 0 {
            return Ok(None);
        }
        let blocks: Vec<f64>;
        let xs: &[f64] = if k == 1 {
            &self.readings
        } else {
            blocks = self
                .readings
                .chunks_exact(k)
                .map(|c| c.iter().sum::<f64>() / k as f64)
                .collect();
            &blocks
        };
        let n = xs.len();
        if xs[n - 1] == 0.0 {
            return Ok(None);
        }
        if self.model == Model::Adaptive {
            if n >= 2 && within(xs[n - 1], xs[n - 2], self.theta) {
                return Ok(done((xs[n - 1] + xs[n - 2]) / 2.0));
            }
            return Ok(None);
        }
        if n < self.min_points.max(1) + 1 {
            return Ok(None);
        }
        let f = self.model.forecast(&xs[..n - 1], 1);
        if f.first().is_some_and(|&f| within(f, xs[n - 1], self.theta)) {
            let ahead = self.model.forecast(xs, self.horizon.max(1));
            return Ok(done(ahead.iter().sum::<f64>() / ahead.len() as f64));
        }
        Ok(None)
    }

    /// Feeds a whole trace; the first convergence, or `None` if it never converges.
    pub fn run(&mut self, xs: &[f64]) -> Result<Option<Converged>, TuneError> {
        self.reset();
        for &x in xs {
            if let Some(c) = self.push(x)? {
                return Ok(Some(c));
            }
        }
        Ok(None)
    }
}

/// Whole-transfer average (equal intervals, so bytes/time = mean reading).
pub fn true_average(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len().max(1) as f64
}

/// The thesis's "optimal" oracle (§4 of 003): the first 4-reading sliding window whose mean is
/// within θ of the true average. It knows the answer, so it bounds what any estimator can do.
pub fn oracle(xs: &[f64], theta: f64, dt: f64) -> Option<Converged> {
    oracle_against(xs, true_average(xs), theta, dt)
}

/// [`oracle`] against a given whole-transfer average (a recorded transfer's bytes over time,
/// which a last partial interval makes differ slightly from the mean reading).
pub fn oracle_against(xs: &[f64], truth: f64, theta: f64, dt: f64) -> Option<Converged> {
    xs.windows(4).enumerate().find_map(|(i, w)| {
        let m = w.iter().sum::<f64>() / 4.0;
        within(m, truth, theta).then(|| Converged {
            readings: i + 4,
            time_s: (i + 4) as f64 * dt,
            estimate: m,
        })
    })
}
