//! Log-replay harness for the estimators (§2.6 of 003-digest): run an [`EarlyStop`] rule over
//! per-interval throughput traces and report convergence time and error against each trace's
//! whole-transfer average, next to the thesis's 4-point oracle.

use serde::{Deserialize, Serialize};

use crate::estimate::{oracle, true_average, EarlyStop};
use crate::TuneError;

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
    /// Mean |estimate − average| / average over converged traces, percent.
    pub mean_error_pct: f64,
    /// The oracle's mean stopping time, s (full duration when no window qualifies).
    pub oracle_time_s: f64,
    /// The oracle's mean error, percent, over traces where it stopped.
    pub oracle_error_pct: f64,
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

/// Replays `rule` over every trace (readings at the rule's interval `dt`).
pub fn evaluate<T: AsRef<[f64]>>(
    rule: &EarlyStop,
    traces: &[T],
) -> Result<EstimateReport, TuneError> {
    let mut rule = rule.clone();
    let (mut conv, mut t_sum, mut e_sum) = (0usize, 0.0, 0.0);
    let (mut o_conv, mut o_t, mut o_e) = (0usize, 0.0, 0.0);
    for tr in traces {
        let xs = tr.as_ref();
        let truth = true_average(xs);
        let full = xs.len() as f64 * rule.dt;
        match rule.run(xs)? {
            Some(c) => {
                conv += 1;
                t_sum += c.time_s;
                e_sum += rel_err(c.estimate, truth);
            }
            None => t_sum += full,
        }
        match oracle(xs, rule.theta, rule.dt) {
            Some(c) => {
                o_conv += 1;
                o_t += c.time_s;
                o_e += rel_err(c.estimate, truth);
            }
            None => o_t += full,
        }
    }
    let n = traces.len().max(1) as f64;
    Ok(EstimateReport {
        model: rule.model.name(),
        theta: rule.theta,
        traces: traces.len(),
        converged_pct: 100.0 * conv as f64 / n,
        mean_time_s: t_sum / n,
        mean_error_pct: e_sum / conv.max(1) as f64,
        oracle_time_s: o_t / n,
        oracle_error_pct: o_e / o_conv.max(1) as f64,
    })
}
