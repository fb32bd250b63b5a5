//! Property tests of the BTC predictors and the selector: bounds, no NaN, ages and sample
//! counts, and the selector answering with its winner's own prediction.

use haul_tune::predict::{
    percent_error, Measurement, Prediction, Predictor, Selector, Window, DEFAULT_CANDIDATES,
};
use proptest::prelude::*;

/// A rate: often an outage, mostly realistic, sometimes any positive normal float.
fn rate() -> impl Strategy<Value = f64> {
    prop_oneof![
        1 => Just(0.0),
        4 => 0.0..1e12f64,
        1 => prop::num::f64::NORMAL.prop_map(f64::abs),
    ]
}

/// A history, oldest first (equal times allowed), and a `now` at or after its last sample.
fn history() -> impl Strategy<Value = (Vec<Measurement>, f64)> {
    (
        0.0..1e9f64,
        prop::collection::vec((0.0..1000.0f64, rate()), 0..40),
        0.0..1000.0f64,
    )
        .prop_map(|(start, steps, wait)| {
            let mut at = start;
            let h: Vec<Measurement> = steps
                .into_iter()
                .map(|(gap, bps)| {
                    at += gap;
                    Measurement::new(at, bps)
                })
                .collect();
            (h, at + wait)
        })
}

/// The samples a windowed predictor should use, oldest first, computed the obvious way.
fn expected_window(h: &[Measurement], now: f64, window: Window) -> Vec<Measurement> {
    match window {
        Window::Last(n) => h[h.len().saturating_sub(n)..].to_vec(),
        Window::Seconds(s) => h.iter().filter(|m| m.at >= now - s).copied().collect(),
    }
}

fn check_window(
    p: Predictor,
    window: Window,
    h: &[Measurement],
    now: f64,
) -> Result<Option<Prediction>, TestCaseError> {
    let used = expected_window(h, now, window);
    let got = p.predict(h, now);
    let Some(newest) = used.last() else {
        prop_assert_eq!(got, None);
        return Ok(None);
    };
    let q = got.ok_or_else(|| TestCaseError::fail(format!("{p:?}: no prediction")))?;
    let lo = used.iter().map(|m| m.bps).fold(f64::INFINITY, f64::min);
    let hi = used.iter().map(|m| m.bps).fold(0.0, f64::max);
    prop_assert!(
        q.bps >= lo && q.bps <= hi,
        "{:?} outside [{}, {}]",
        q,
        lo,
        hi
    );
    prop_assert_eq!(q.samples, used.len());
    prop_assert_eq!(q.age_s, now - newest.at);
    prop_assert_eq!(q.predictor, p);
    Ok(Some(q))
}

proptest! {
    #[test]
    fn median_lies_within_its_samples((h, now) in history(), n in 1usize..8) {
        let q = check_window(Predictor::Median { n }, Window::Last(n), &h, now)?;
        if let Some(q) = q {
            let mut xs: Vec<f64> = expected_window(&h, now, Window::Last(n))
                .iter()
                .map(|m| m.bps)
                .collect();
            xs.sort_by(f64::total_cmp);
            let k = xs.len();
            let want = if k % 2 == 1 { xs[k / 2] } else { xs[k / 2 - 1] / 2.0 + xs[k / 2] / 2.0 };
            prop_assert!((q.bps - want).abs() <= want * 1e-12, "{} vs {}", q.bps, want);
        }
    }

    #[test]
    fn moving_average_lies_within_its_samples(
        (h, now) in history(),
        n in 1usize..8,
        s in 1.0..3000.0f64,
    ) {
        for window in [Window::Last(n), Window::Seconds(s)] {
            check_window(Predictor::MovingAverage { window }, window, &h, now)?;
        }
    }

    #[test]
    fn ewma_is_bounded_and_counts_since_its_last_reset(
        (h, now) in history(),
        alpha in 0.01..=1.0f64,
    ) {
        let p = Predictor::Ewma { alpha };
        let got = p.predict(&h, now);
        let Some(last) = h.last() else {
            prop_assert_eq!(got, None);
            return Ok(());
        };
        let q = got.ok_or_else(|| TestCaseError::fail("no prediction"))?;
        let lo = h.iter().map(|m| m.bps).fold(f64::INFINITY, f64::min);
        let hi = h.iter().map(|m| m.bps).fold(0.0, f64::max);
        prop_assert!(q.bps >= lo && q.bps <= hi, "{:?} outside [{}, {}]", q, lo, hi);
        // A pass-through restarts the count: the first sample, an outage, or the one after it.
        let reset = (0..h.len())
            .rev()
            .find(|&j| j == 0 || h[j].bps == 0.0 || h[j - 1].bps == 0.0)
            .unwrap_or(0);
        prop_assert_eq!(q.samples, h.len() - reset);
        prop_assert_eq!(q.age_s, now - last.at);
        if last.bps == 0.0 || h.len() >= 2 && h[h.len() - 2].bps == 0.0 {
            prop_assert_eq!(q.bps, last.bps);
        }
    }

    #[test]
    fn predictions_are_never_nan_or_negative((h, now) in history()) {
        let s = Selector::default();
        let answers = DEFAULT_CANDIDATES
            .iter()
            .map(|p| p.predict(&h, now))
            .chain([s.predict(&h, now)]);
        for q in answers {
            prop_assert_eq!(q.is_some(), !h.is_empty());
            if let Some(q) = q {
                prop_assert!(q.bps.is_finite() && q.bps >= 0.0, "{:?}", q);
                prop_assert!(q.age_s >= 0.0 && q.samples >= 1, "{:?}", q);
                prop_assert!(!q.error_pct.is_some_and(|e| e.is_nan() || e < 0.0), "{:?}", q);
            }
        }
    }

    #[test]
    fn selector_answers_with_its_winner((h, now) in history(), k in 1usize..15) {
        let s = Selector::new(DEFAULT_CANDIDATES.to_vec(), k).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let Some(q) = s.predict(&h, now) else {
            prop_assert!(h.is_empty());
            return Ok(());
        };
        let own = q.predictor.predict(&h, now).ok_or_else(|| TestCaseError::fail("winner has no prediction"))?;
        prop_assert_eq!(Prediction { error_pct: q.error_pct, ..own }, q);
        let scores = s.scores(&h);
        let best = scores.iter().filter_map(|c| c.error_pct).fold(None, |b: Option<f64>, e| {
            Some(b.map_or(e, |b| b.min(e)))
        });
        prop_assert_eq!(q.error_pct, best);
        prop_assert!(scores.iter().all(|c| c.scored == k.min(h.len().saturating_sub(1))));
    }

    #[test]
    fn percent_error_is_non_negative(p in 0.0..1e12f64, a in 0.0..1e12f64) {
        match percent_error(p, a) {
            Some(e) => prop_assert!(e >= 0.0 && a > 0.0),
            None => prop_assert_eq!(a, 0.0),
        }
    }
}
