//! How well the predictors would have done on a recorded history: every measurement of a pair
//! is predicted from the ones before it, as it would have been live, by each candidate and by the
//! [`Selector`] itself, and the percent errors are summarised as the thesis's Table 5.3 does
//! (§5.3.5 of 002: mean, median and spread of the % error).
//!
//! A last column, [`Column::Hindsight`], is not a predictor: it predicts each measurement by the
//! median of all the pair's other measurements, later ones included. It shows how noisy the pair
//! is. A predictor that sees only the past cannot be expected to beat it by much.

use super::{step_error, Measurement, Predictor, Selector};

/// One replayed step: a measurement and what each column predicted for it.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// When the measurement was taken.
    pub at: f64,
    /// The measured rate, bits per second.
    pub actual: f64,
    /// Per column ([`columns`]), the prediction made from the earlier measurements.
    pub predicted: Vec<Option<f64>>,
}

impl Step {
    /// Per column, the step's absolute percentage error ([`step_error`]).
    pub fn errors(&self) -> impl Iterator<Item = Option<f64>> + '_ {
        self.predicted
            .iter()
            .map(|p| p.map(|p| step_error(p, self.actual)))
    }
}

/// What a replay's columns are: the selector's candidates in order, then the selector.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Column {
    /// One candidate predictor on its own.
    Candidate(Predictor),
    /// The selector, answering with its recently best candidate.
    Selector,
    /// Not a predictor: the median of the pair's other measurements, before and after.
    Hindsight,
}

impl std::fmt::Display for Column {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Column::Candidate(p) => write!(f, "{p}"),
            Column::Selector => f.write_str("selector"),
            Column::Hindsight => f.write_str("hindsight"),
        }
    }
}

/// The columns of [`replay`] for `selector`: its candidates, itself, then [`Column::Hindsight`].
pub fn columns(selector: &Selector) -> Vec<Column> {
    let mut c: Vec<Column> = selector
        .candidates()
        .iter()
        .copied()
        .map(Column::Candidate)
        .collect();
    c.push(Column::Selector);
    c.push(Column::Hindsight);
    c
}

/// Replays one pair's history (oldest first): every valid measurement after the first `warmup`
/// valid ones is predicted, at its own time, from the measurements before it. Invalid samples are
/// neither predicted nor used. The last column ([`Column::Hindsight`]) predicts each step from all
/// the other valid measurements instead.
pub fn replay(history: &[Measurement], selector: &Selector, warmup: usize) -> Vec<Step> {
    let valid: Vec<Measurement> = history.iter().copied().filter(|m| m.is_valid()).collect();
    let everyone = Predictor::Median { n: valid.len() };
    (warmup.max(1)..valid.len())
        .map(|i| {
            let (before, m) = (&valid[..i], valid[i]);
            let mut predicted: Vec<Option<f64>> = selector
                .candidates()
                .iter()
                .map(|p| p.predict(before, m.at).map(|q| q.bps))
                .collect();
            predicted.push(selector.predict(before, m.at).map(|q| q.bps));
            let others: Vec<Measurement> = before.iter().chain(&valid[i + 1..]).copied().collect();
            predicted.push(everyone.predict(&others, m.at).map(|q| q.bps));
            Step {
                at: m.at,
                actual: m.bps,
                predicted,
            }
        })
        .collect()
}

/// Mean, median and spread of a set of percent errors.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct ErrorSummary {
    /// How many errors.
    pub steps: usize,
    /// Mean, percent.
    pub mean: f64,
    /// Median, percent.
    pub median: f64,
    /// Population standard deviation, percent.
    pub sd: f64,
    /// 90th percentile (nearest rank), percent.
    pub p90: f64,
}

/// Summarises `errors` (non-finite ones are left out); `None` when none is left.
pub fn summarize(errors: &[f64]) -> Option<ErrorSummary> {
    let mut xs: Vec<f64> = errors.iter().copied().filter(|e| e.is_finite()).collect();
    if xs.is_empty() {
        return None;
    }
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    let mean = xs.iter().sum::<f64>() / n as f64;
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
    let median = if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    };
    // Nearest rank: the smallest value with at least 90 % of the errors at or below it.
    let rank = ((0.9 * n as f64).ceil() as usize).clamp(1, n);
    Some(ErrorSummary {
        steps: n,
        mean,
        median,
        sd: var.sqrt(),
        p90: xs[rank - 1],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(v: &[f64]) -> Vec<Measurement> {
        v.iter()
            .enumerate()
            .map(|(i, &b)| Measurement::new(i as f64 * 60.0, b))
            .collect()
    }

    #[test]
    fn a_constant_pair_is_predicted_exactly_by_every_column() {
        let steps = replay(&series(&[100.0; 8]), &Selector::default(), 1);
        assert_eq!(steps.len(), 7);
        for s in &steps {
            assert!(s.errors().all(|e| e == Some(0.0)), "{s:?}");
        }
    }

    #[test]
    fn each_step_sees_only_the_measurements_before_it() {
        // A step from 100 to 200: the first 200 is predicted as 100 by everyone (50 % error).
        let steps = replay(
            &series(&[100.0, 100.0, 100.0, 200.0]),
            &Selector::default(),
            1,
        );
        let last = steps.last().unwrap();
        assert_eq!(last.actual, 200.0);
        assert!(last.errors().all(|e| e == Some(50.0)), "{last:?}");
    }

    #[test]
    fn warmup_and_invalid_samples_are_not_predicted() {
        let mut h = series(&[100.0, 110.0, 120.0, 130.0]);
        h.insert(2, Measurement::new(f64::NAN, 5.0));
        let steps = replay(&h, &Selector::default(), 2);
        assert_eq!(
            steps.iter().map(|s| s.actual).collect::<Vec<_>>(),
            [120.0, 130.0]
        );
        assert!(replay(&series(&[1.0]), &Selector::default(), 1).is_empty());
        assert!(replay(&[], &Selector::default(), 0).is_empty());
    }

    #[test]
    fn the_selector_column_follows_the_candidate_that_has_erred_least() {
        // Spikes every third transfer: the median ignores them, the average does not.
        let v: Vec<f64> = (0..30)
            .map(|i| if i % 3 == 2 { 1000.0 } else { 100.0 })
            .collect();
        let sel = Selector::default();
        let cols = columns(&sel);
        let steps = replay(&series(&v), &sel, 1);
        let median_of = |c: usize| {
            let e: Vec<f64> = steps
                .iter()
                .filter_map(|s| s.predicted[c].map(|p| step_error(p, s.actual)))
                .collect();
            summarize(&e).unwrap().median
        };
        let m = cols
            .iter()
            .position(|c| *c == Column::Candidate(Predictor::Median { n: 5 }))
            .unwrap();
        let s = cols.iter().position(|c| *c == Column::Selector).unwrap();
        assert_eq!(cols[s].to_string(), "selector");
        assert!(median_of(s) <= median_of(m) + 1e-9);
        assert!(median_of(m) < 1e-9, "the median predicts the common value");
    }

    #[test]
    fn hindsight_sees_the_later_measurements_too() {
        // The first 200 after a step: every predictor says 100 (50 % off); hindsight's median of
        // the other five (100, 100, 200, 200, 200) is 200.
        let sel = Selector::default();
        let cols = columns(&sel);
        assert_eq!(cols.last(), Some(&Column::Hindsight));
        assert_eq!(Column::Hindsight.to_string(), "hindsight");
        let steps = replay(
            &series(&[100.0, 100.0, 200.0, 200.0, 200.0, 200.0]),
            &sel,
            1,
        );
        let first = steps.iter().find(|s| s.actual == 200.0).unwrap();
        let errors: Vec<Option<f64>> = first.errors().collect();
        let (hindsight, rest) = errors.split_last().unwrap();
        assert_eq!(*hindsight, Some(0.0));
        assert!(rest.iter().all(|e| *e == Some(50.0)), "{errors:?}");
    }

    #[test]
    fn summary_of_known_errors() {
        let s = summarize(&[10.0, 20.0, 30.0, 40.0, f64::NAN]).unwrap();
        assert_eq!(s.steps, 4);
        assert_eq!(s.mean, 25.0);
        assert_eq!(s.median, 25.0);
        assert!((s.sd - 125f64.sqrt()).abs() < 1e-12);
        assert_eq!(s.p90, 40.0);
        assert_eq!(summarize(&[7.0]).unwrap().p90, 7.0);
        assert!(summarize(&[]).is_none());
        assert!(summarize(&[f64::INFINITY]).is_none());
    }
}
