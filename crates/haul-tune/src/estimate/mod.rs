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
    /// Readings fitted before the first check (3 in the thesis).
    pub min_points: usize,
    /// Forecasts averaged for the estimate (the thesis leaves it open; default 10).
    pub horizon: usize,
    /// Report interval in seconds (1.0 for GridFTP markers, down to 0.1).
    pub dt: f64,
    readings: Vec<f64>,
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
            readings: Vec::new(),
        })
    }

    /// Sets θ.
    pub fn theta(mut self, theta: f64) -> EarlyStop {
        self.theta = theta;
        self
    }

    /// Forgets the readings (a new sample starts).
    pub fn reset(&mut self) {
        self.readings.clear();
    }

    /// Adds one instantaneous reading; returns the result once the sample has converged.
    /// Non-finite readings are rejected.
    pub fn push(&mut self, x: f64) -> Result<Option<Converged>, TuneError> {
        if !x.is_finite() {
            return Err(TuneError::NonFinite {
                what: format!("reading {}", self.readings.len() + 1),
                value: x,
            });
        }
        self.readings.push(x);
        let xs = &self.readings;
        let n = xs.len();
        let done = |estimate: f64| {
            Some(Converged {
                readings: n,
                time_s: n as f64 * self.dt,
                estimate,
            })
        };
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
    let truth = true_average(xs);
    xs.windows(4).enumerate().find_map(|(i, w)| {
        let m = w.iter().sum::<f64>() / 4.0;
        within(m, truth, theta).then(|| Converged {
            readings: i + 4,
            time_s: (i + 4) as f64 * dt,
            estimate: m,
        })
    })
}
