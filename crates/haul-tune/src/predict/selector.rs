//! The NWS-style selector (digest §2.3; the thesis cites NWS [91] as a pluggable improvement in
//! §4.4.1 of 002): replay every candidate predictor over a pair's history, score each by its
//! recent error, and answer with the candidate that has erred least.

use super::{EwmaState, Measurement, Prediction, Predictor, Window, DEFAULT_ALPHA, DEFAULT_N};
use crate::TuneError;

/// The default candidates: median of 5, moving average of 5 and the modified EWMA with α = 0.3.
pub const DEFAULT_CANDIDATES: [Predictor; 3] = [
    Predictor::Median { n: DEFAULT_N },
    Predictor::MovingAverage {
        window: Window::Last(DEFAULT_N),
    },
    Predictor::Ewma {
        alpha: DEFAULT_ALPHA,
    },
];

/// Default number of recent predictions a candidate's error is averaged over (k = 10).
pub const DEFAULT_ERROR_WINDOW: usize = 10;

/// A candidate's recent record on a history.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Score {
    /// The candidate.
    pub predictor: Predictor,
    /// Mean absolute percentage error over the scored steps; `None` if it predicted none of them.
    pub error_pct: Option<f64>,
    /// How many of the scored steps it made a prediction for.
    pub scored: usize,
}

/// Chooses, per pair, the candidate with the smallest recent mean absolute percentage error.
///
/// The replay predicts every valid sample from the samples before it (at the sample's own time),
/// exactly as the candidate would have live. The last k such steps are scored with
/// [`step_error`]; ties go to the candidate listed first.
#[derive(Debug, Clone, PartialEq)]
pub struct Selector {
    candidates: Vec<Predictor>,
    k: usize,
}

impl Default for Selector {
    fn default() -> Self {
        Selector {
            candidates: DEFAULT_CANDIDATES.to_vec(),
            k: DEFAULT_ERROR_WINDOW,
        }
    }
}

/// Absolute percentage error of one step, with outages defined: `|P − A| / A × 100` for A > 0;
/// for A = 0 (an outage) 0 if P = 0 and 100 otherwise, mirroring the 100% of predicting 0 for a
/// live pair.
pub fn step_error(predicted: f64, actual: f64) -> f64 {
    if actual > 0.0 {
        (predicted - actual).abs() / actual * 100.0
    } else if predicted == 0.0 {
        0.0
    } else {
        100.0
    }
}

impl Selector {
    /// A selector over `candidates` (in tie-break order) scoring the last `k` steps.
    pub fn new(candidates: Vec<Predictor>, k: usize) -> Result<Self, TuneError> {
        if candidates.is_empty() {
            return Err(TuneError::BadParameter {
                name: "selector candidates",
                reason: "no candidate predictors".into(),
            });
        }
        if k == 0 {
            return Err(TuneError::BadParameter {
                name: "selector error window",
                reason: "k must be at least 1".into(),
            });
        }
        for c in &candidates {
            c.check()?;
        }
        Ok(Selector { candidates, k })
    }

    /// The candidates, in tie-break order.
    pub fn candidates(&self) -> &[Predictor] {
        &self.candidates
    }

    /// Number of recent steps each candidate's error is averaged over.
    pub fn error_window(&self) -> usize {
        self.k
    }

    /// Each candidate's error over the last k steps of `history` (oldest first), in order.
    pub fn scores(&self, history: &[Measurement]) -> Vec<Score> {
        // A step is a valid sample with at least one valid sample before it.
        let mut steps: Vec<usize> = history
            .iter()
            .enumerate()
            .filter(|(_, m)| m.is_valid())
            .map(|(i, _)| i)
            .skip(1)
            .collect();
        steps.drain(..steps.len().saturating_sub(self.k));
        self.candidates
            .iter()
            .map(|p| score(p, history, &steps))
            .collect()
    }

    /// A prediction per group of measurements (a host pair, say), each group in any order:
    /// sorted by time, only its newest `keep` used. Groups nobody can predict are left out.
    pub fn predict_each<K>(
        &self,
        groups: impl IntoIterator<Item = (K, Vec<Measurement>)>,
        keep: usize,
        now: f64,
    ) -> Vec<(K, Prediction)> {
        groups
            .into_iter()
            .filter_map(|(k, mut ms)| {
                ms.sort_by(|a, b| a.at.total_cmp(&b.at));
                let from = ms.len().saturating_sub(keep);
                self.predict(&ms[from..], now).map(|p| (k, p))
            })
            .collect()
    }

    /// The winning candidate's prediction for `now`, carrying its recent error; `None` when no
    /// candidate can predict (no valid sample, or `now` not finite). Candidates without a score
    /// yet (fewer than two samples) lose to any scored one; among them the first wins.
    pub fn predict(&self, history: &[Measurement], now: f64) -> Option<Prediction> {
        let mut best: Option<Prediction> = None;
        for s in self.scores(history) {
            let Some(mut p) = s.predictor.predict(history, now) else {
                continue;
            };
            p.error_pct = s.error_pct;
            let better = match (best.as_ref().map(|b| b.error_pct), s.error_pct) {
                (None, _) => true,
                (Some(None), Some(_)) => true,
                (Some(Some(b)), Some(e)) => e < b,
                (Some(_), None) => false,
            };
            if better {
                best = Some(p);
            }
        }
        best
    }
}

/// Replays `p` over `history`, predicting each step from the samples before it.
fn score(p: &Predictor, history: &[Measurement], steps: &[usize]) -> Score {
    let predictions: Vec<Option<f64>> = match *p {
        Predictor::Ewma { alpha } => ewma_replay(alpha, history, steps),
        _ => steps
            .iter()
            .map(|&i| p.predict(&history[..i], history[i].at).map(|q| q.bps))
            .collect(),
    };
    let errors: Vec<f64> = predictions
        .iter()
        .zip(steps)
        .filter_map(|(pred, &i)| pred.map(|v| step_error(v, history[i].bps)))
        .collect();
    let scored = errors.len();
    Score {
        predictor: *p,
        error_pct: (scored > 0).then(|| errors.iter().sum::<f64>() / scored as f64),
        scored,
    }
}

/// The EWMA's predictions for `steps` in one pass: its state before a step is its prediction.
fn ewma_replay(alpha: f64, history: &[Measurement], steps: &[usize]) -> Vec<Option<f64>> {
    let Ok(mut state) = EwmaState::new(alpha) else {
        return vec![None; steps.len()];
    };
    let mut next = 0;
    steps
        .iter()
        .map(|&i| {
            history[next..i].iter().for_each(|m| state.push(*m));
            next = i;
            state.estimate()
        })
        .collect()
}
