//! Log-replay harness for the estimators (§2.6 of 003-digest): run an [`EarlyStop`] rule over
//! per-interval throughput traces and report convergence time and error against each trace's
//! whole-transfer average, next to the thesis's 4-point oracle. Traces are synthetic
//! ([`evaluate`]) or recorded transfers with their own interval and average ([`evaluate_traces`];
//! `haul history replay` feeds it the history store).

use serde::{Deserialize, Serialize};

use crate::estimate::{oracle_against, true_average, Converged, EarlyStop};
use crate::TuneError;

/// The accuracy bar of issue 6: error below `error_pct` by `deadline_s` seconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Bar {
    /// Seconds into the transfer by which the estimate must be in.
    pub deadline_s: f64,
    /// Largest acceptable |estimate − average| / average, percent.
    pub error_pct: f64,
}

impl Default for Bar {
    /// Error < 10% within 3 s.
    fn default() -> Self {
        Bar {
            deadline_s: 3.0,
            error_pct: 10.0,
        }
    }
}

/// One recorded transfer's readings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplayTrace {
    /// Instantaneous readings, one per interval.
    pub readings: Vec<f64>,
    /// Report interval, seconds.
    pub dt: f64,
    /// The whole-transfer average the estimate is judged against (same unit as the readings).
    pub average: f64,
}

impl ReplayTrace {
    /// A trace whose average is the mean reading (equal intervals).
    pub fn new(readings: Vec<f64>, dt: f64) -> ReplayTrace {
        let average = true_average(&readings);
        ReplayTrace {
            readings,
            dt,
            average,
        }
    }

    /// Duration covered by the readings, seconds.
    pub fn duration_s(&self) -> f64 {
        self.readings.len() as f64 * self.dt
    }

    /// The same transfer as if sampled every `k` intervals: readings are means of `k`
    /// consecutive ones (a last, shorter group of its own), dt grows k-fold, the average stays.
    pub fn resample(&self, k: usize) -> ReplayTrace {
        let k = k.max(1);
        ReplayTrace {
            readings: self
                .readings
                .chunks(k)
                .map(|c| c.iter().sum::<f64>() / c.len() as f64)
                .collect(),
            dt: self.dt * k as f64,
            average: self.average,
        }
    }
}

/// What the rule and the oracle did on one trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TraceOutcome {
    /// Where the rule stopped, if it did.
    pub stop: Option<Converged>,
    /// Its error against the average, percent.
    pub error_pct: Option<f64>,
    /// Where the oracle stopped, if a window qualified.
    pub oracle: Option<Converged>,
    /// The oracle's error, percent.
    pub oracle_error_pct: Option<f64>,
    /// Duration of the trace, seconds.
    pub duration_s: f64,
}

impl TraceOutcome {
    /// Stopping time, or the whole trace when the rule never stopped.
    pub fn time_s(&self) -> f64 {
        self.stop.map_or(self.duration_s, |c| c.time_s)
    }

    /// True when the rule stopped by the deadline with an error under the bar.
    pub fn meets(&self, bar: Bar) -> bool {
        meets(self.stop, self.error_pct, bar)
    }

    /// True when the oracle stopped by the deadline with an error under the bar.
    pub fn oracle_meets(&self, bar: Bar) -> bool {
        meets(self.oracle, self.oracle_error_pct, bar)
    }
}

fn meets(stop: Option<Converged>, err: Option<f64>, bar: Bar) -> bool {
    match (stop, err) {
        (Some(c), Some(e)) => c.time_s <= bar.deadline_s + 1e-9 && e < bar.error_pct,
        _ => false,
    }
}

/// Aggregate results over a set of traces.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EstimateReport {
    /// Model name.
    pub model: String,
    /// θ used.
    pub theta: f64,
    /// Traces replayed.
    pub traces: usize,
    /// Percent of traces where the rule converged before the trace ended.
    pub converged_pct: f64,
    /// Mean convergence time, s; a trace that never converges counts its full duration.
    pub mean_time_s: f64,
    /// Median convergence time, s (same convention).
    pub median_time_s: f64,
    /// Mean |estimate − average| / average over converged traces, percent.
    pub mean_error_pct: f64,
    /// Median error over converged traces, percent.
    pub median_error_pct: f64,
    /// Percent of all traces where the rule stopped by `bar.deadline_s` with error < `bar.error_pct`.
    pub within_bar_pct: f64,
    /// The bar `within_bar_pct` uses.
    pub bar: Bar,
    /// Percent of traces where some oracle window qualified.
    pub oracle_converged_pct: f64,
    /// The oracle's mean stopping time, s (full duration when no window qualifies).
    pub oracle_time_s: f64,
    /// The oracle's median stopping time, s.
    pub oracle_median_time_s: f64,
    /// The oracle's mean error, percent, over traces where it stopped.
    pub oracle_error_pct: f64,
    /// Percent of all traces where the oracle stopped by the deadline under the error bar.
    pub oracle_within_bar_pct: f64,
}

fn rel_err(est: f64, truth: f64) -> f64 {
    if truth == 0.0 {
        if est == 0.0 {
            0.0
        } else {
            100.0
        }
    } else {
        100.0 * ((est - truth) / truth).abs()
    }
}

fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        0.0
    } else {
        xs.iter().sum::<f64>() / xs.len() as f64
    }
}

/// Median (mean of the middle two for even counts); 0 for no values.
pub fn median(xs: &[f64]) -> f64 {
    let mut v: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

/// Replays `rule` (its `dt` replaced by the trace's) and the oracle on one trace.
pub fn replay_trace(rule: &EarlyStop, trace: &ReplayTrace) -> Result<TraceOutcome, TuneError> {
    let mut rule = rule.clone();
    if !(trace.dt.is_finite() && trace.dt > 0.0) {
        return Err(TuneError::BadParameter {
            name: "dt",
            reason: format!("trace interval must be positive, got {}", trace.dt),
        });
    }
    rule.dt = trace.dt;
    let stop = rule.run(&trace.readings)?;
    let oracle = oracle_against(&trace.readings, trace.average, rule.theta, trace.dt);
    Ok(TraceOutcome {
        stop,
        error_pct: stop.map(|c| rel_err(c.estimate, trace.average)),
        oracle,
        oracle_error_pct: oracle.map(|c| rel_err(c.estimate, trace.average)),
        duration_s: trace.duration_s(),
    })
}

/// Summarises per-trace outcomes of one rule.
pub fn summarize(rule: &EarlyStop, outcomes: &[TraceOutcome], bar: Bar) -> EstimateReport {
    let n = outcomes.len().max(1) as f64;
    let pct = |k: usize| 100.0 * k as f64 / n;
    let times: Vec<f64> = outcomes.iter().map(TraceOutcome::time_s).collect();
    let errs: Vec<f64> = outcomes.iter().filter_map(|o| o.error_pct).collect();
    let o_times: Vec<f64> = outcomes
        .iter()
        .map(|o| o.oracle.map_or(o.duration_s, |c| c.time_s))
        .collect();
    let o_errs: Vec<f64> = outcomes.iter().filter_map(|o| o.oracle_error_pct).collect();
    EstimateReport {
        model: rule.model.name(),
        theta: rule.theta,
        traces: outcomes.len(),
        converged_pct: pct(outcomes.iter().filter(|o| o.stop.is_some()).count()),
        mean_time_s: mean(&times),
        median_time_s: median(&times),
        mean_error_pct: mean(&errs),
        median_error_pct: median(&errs),
        within_bar_pct: pct(outcomes.iter().filter(|o| o.meets(bar)).count()),
        bar,
        oracle_converged_pct: pct(outcomes.iter().filter(|o| o.oracle.is_some()).count()),
        oracle_time_s: mean(&o_times),
        oracle_median_time_s: median(&o_times),
        oracle_error_pct: mean(&o_errs),
        oracle_within_bar_pct: pct(outcomes.iter().filter(|o| o.oracle_meets(bar)).count()),
    }
}

/// Replays `rule` over recorded traces, each at its own interval and judged against its own
/// whole-transfer average.
pub fn evaluate_traces(
    rule: &EarlyStop,
    traces: &[ReplayTrace],
    bar: Bar,
) -> Result<EstimateReport, TuneError> {
    let outcomes = traces
        .iter()
        .map(|t| replay_trace(rule, t))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(summarize(rule, &outcomes, bar))
}

/// Replays `rule` over every trace (readings at the rule's interval `dt`, average = mean
/// reading), with the default bar (< 10% within 3 s).
pub fn evaluate<T: AsRef<[f64]>>(
    rule: &EarlyStop,
    traces: &[T],
) -> Result<EstimateReport, TuneError> {
    let traces: Vec<ReplayTrace> = traces
        .iter()
        .map(|t| ReplayTrace::new(t.as_ref().to_vec(), rule.dt))
        .collect();
    evaluate_traces(rule, &traces, Bar::default())
}

/// Builds a [`ReplayTrace`] from recorded samples `(t_s, bytes)`: `t_s` is the end of each
/// interval in seconds since the start, `bytes` what moved in it. The interval is the median
/// spacing (the first interval counts from 0); a reading is bytes × 8 over its interval's own
/// length (at least dt/2), in bits per second; the average is all bytes × 8 over the time they
/// took. With `from_first_byte`, the leading intervals in which nothing moved (connection setup)
/// are dropped, and the clock and the average start at the first byte. `None` when nothing is
/// left or the times do not increase.
pub fn trace_from_samples(samples: &[(f64, u64)], from_first_byte: bool) -> Option<ReplayTrace> {
    let skip = if from_first_byte {
        samples.iter().position(|&(_, b)| b > 0)?
    } else {
        0
    };
    let t0 = if skip > 0 { samples[skip - 1].0 } else { 0.0 };
    let shifted: Vec<(f64, u64)> = samples[skip..].iter().map(|&(t, b)| (t - t0, b)).collect();
    trace_from(&shifted)
}

fn trace_from(samples: &[(f64, u64)]) -> Option<ReplayTrace> {
    let &(t_end, _) = samples.last()?;
    let mut prev = 0.0;
    let mut gaps = Vec::with_capacity(samples.len());
    for &(t, _) in samples {
        let g = t - prev;
        if !(g.is_finite() && g > 0.0) {
            return None;
        }
        gaps.push(g);
        prev = t;
    }
    // The median of all but the last (possibly partial) interval.
    let body = if gaps.len() > 1 {
        &gaps[..gaps.len() - 1]
    } else {
        &gaps[..]
    };
    let dt = median(body);
    let readings = samples
        .iter()
        .zip(&gaps)
        .map(|(&(_, b), &g)| b as f64 * 8.0 / g.max(dt * 0.5))
        .collect();
    let total: f64 = samples.iter().map(|&(_, b)| b as f64).sum();
    Some(ReplayTrace {
        readings,
        dt,
        average: total * 8.0 / t_end,
    })
}
