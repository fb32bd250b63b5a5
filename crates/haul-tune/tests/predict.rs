//! BTC predictors (§5.3.3 of 002, digest §2.3) on hand-computed sequences, and the NWS-style
//! selector on sequences built to favour each candidate.

use haul_tune::predict::{
    improvement, percent_error, step_error, validate_history, EwmaState, Measurement, Prediction,
    Predictor, Selector, Window, DEFAULT_CANDIDATES,
};
use haul_tune::TuneError;

const MEDIAN5: Predictor = Predictor::Median { n: 5 };
const MAVG3: Predictor = Predictor::MovingAverage {
    window: Window::Last(3),
};
const EWMA: Predictor = Predictor::Ewma { alpha: 0.3 };

/// Samples one minute apart from t = 0.
fn hist(xs: &[f64]) -> Vec<Measurement> {
    xs.iter()
        .enumerate()
        .map(|(i, &x)| Measurement::new(i as f64 * 60.0, x))
        .collect()
}

/// The prediction for one minute after the last sample.
fn next(p: Predictor, xs: &[f64]) -> Option<Prediction> {
    p.predict(&hist(xs), xs.len() as f64 * 60.0)
}

fn bps(p: Predictor, xs: &[f64]) -> f64 {
    next(p, xs).expect("a prediction").bps
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[test]
fn median_odd_count_is_the_middle_value() {
    let p = next(MEDIAN5, &[30.0, 10.0, 50.0, 20.0, 40.0]).expect("five samples");
    assert_eq!(p.bps, 30.0);
    assert_eq!((p.samples, p.age_s, p.predictor), (5, 60.0, MEDIAN5));
    assert_eq!(p.error_pct, None);
}

#[test]
fn median_even_count_averages_the_middle_two() {
    let p = next(MEDIAN5, &[40.0, 10.0, 30.0, 20.0]).expect("four samples");
    assert_eq!((p.bps, p.samples), (25.0, 4));
    assert_eq!(bps(Predictor::Median { n: 2 }, &[1.0, 7.0, 3.0]), 5.0);
}

#[test]
fn median_uses_only_the_last_n_and_ignores_an_outlier() {
    // The first two samples fall outside the window; the 1000 is outvoted.
    let xs = [1.0, 2.0, 100.0, 1000.0, 90.0, 110.0, 105.0];
    let p = next(MEDIAN5, &xs).expect("samples");
    assert_eq!((p.bps, p.samples), (105.0, 5));
}

#[test]
fn moving_average_over_the_last_n() {
    let p = next(MAVG3, &[1000.0, 10.0, 20.0, 60.0]).expect("samples");
    assert!(close(p.bps, 30.0), "{p:?}");
    assert_eq!(p.samples, 3);
    // Shorter history: all of it.
    assert!(close(bps(MAVG3, &[10.0, 20.0]), 15.0));
}

#[test]
fn moving_average_over_a_time_window() {
    // Samples at 0, 60, 120, 180 s; at now = 200 a 100 s window starts at 100.
    let h = hist(&[1000.0, 10.0, 20.0, 60.0]);
    let w = |s| Predictor::MovingAverage {
        window: Window::Seconds(s),
    };
    let p = w(100.0)
        .predict(&h, 200.0)
        .expect("two samples in the window");
    assert_eq!((p.bps, p.samples, p.age_s), (40.0, 2, 20.0));
    // The window's start is inclusive: 140 s back from 200 reaches the sample at 60.
    let p = w(140.0).predict(&h, 200.0).expect("three samples");
    assert!(close(p.bps, 30.0) && p.samples == 3, "{p:?}");
    // Nothing recent enough.
    assert_eq!(w(10.0).predict(&h, 200.0), None);
}

#[test]
fn ewma_starts_at_the_first_sample_and_smooths() {
    let p = next(EWMA, &[10.0]).expect("one sample");
    assert_eq!((p.bps, p.samples), (10.0, 1));
    // X̂₂ = 0.3·20 + 0.7·10 = 13, X̂₃ = 0.3·30 + 0.7·13 = 18.1.
    assert!(close(bps(EWMA, &[10.0, 20.0]), 13.0));
    let p = next(EWMA, &[10.0, 20.0, 30.0]).expect("samples");
    assert!(close(p.bps, 18.1) && p.samples == 3, "{p:?}");
}

#[test]
fn ewma_passes_an_outage_and_the_recovery_through_at_once() {
    let p = next(EWMA, &[100.0, 120.0, 0.0]).expect("samples");
    assert_eq!((p.bps, p.samples), (0.0, 1));
    // Two outages in a row stay at 0.
    assert_eq!(bps(EWMA, &[100.0, 0.0, 0.0]), 0.0);
    // The first value after a 0 passes through; smoothing resumes from it.
    let p = next(EWMA, &[100.0, 120.0, 0.0, 50.0]).expect("samples");
    assert_eq!((p.bps, p.samples), (50.0, 1));
    let p = next(EWMA, &[100.0, 120.0, 0.0, 50.0, 60.0]).expect("samples");
    assert!(close(p.bps, 53.0) && p.samples == 2, "{p:?}");
}

#[test]
fn ewma_state_matches_the_batch_predictor() {
    let xs = [5.0, 8.0, 0.0, 3.0, 9.0, 4.0];
    let mut s = EwmaState::new(0.3).expect("alpha");
    assert_eq!(s.estimate(), None);
    for (i, m) in hist(&xs).into_iter().enumerate() {
        s.push(m);
        let p = next(EWMA, &xs[..=i]).expect("samples");
        assert_eq!((s.estimate(), s.samples()), (Some(p.bps), p.samples));
    }
    assert!(EwmaState::new(0.0).is_err() && EwmaState::new(1.5).is_err());
    assert!(EwmaState::new(f64::NAN).is_err() && EwmaState::new(1.0).is_ok());
}

#[test]
fn empty_history_has_no_prediction() {
    for p in DEFAULT_CANDIDATES {
        assert_eq!(p.predict(&[], 0.0), None, "{p}");
    }
    assert_eq!(Selector::default().predict(&[], 0.0), None);
}

#[test]
fn one_sample_is_predicted_as_itself() {
    let h = [Measurement::new(100.0, 5e8)];
    for p in DEFAULT_CANDIDATES {
        let q = p.predict(&h, 130.0).expect("one sample");
        assert_eq!((q.bps, q.samples, q.age_s), (5e8, 1, 30.0), "{p}");
    }
    let q = Selector::default().predict(&h, 130.0).expect("one sample");
    // Nothing to score yet: the first candidate answers, without an error.
    assert_eq!((q.bps, q.predictor, q.error_pct), (5e8, MEDIAN5, None));
}

#[test]
fn age_is_clamped_for_a_sample_later_than_now() {
    let h = [Measurement::new(100.0, 1.0)];
    assert_eq!(MEDIAN5.predict(&h, 90.0).map(|p| p.age_s), Some(0.0));
}

#[test]
fn invalid_samples_are_skipped() {
    let mut h = hist(&[10.0, 20.0, 30.0]);
    h.insert(1, Measurement::new(30.0, f64::NAN));
    h.push(Measurement::new(400.0, -5.0));
    h.push(Measurement::new(f64::INFINITY, 7.0));
    let p = MAVG3.predict(&h, 500.0).expect("three valid samples");
    assert!(close(p.bps, 20.0) && p.samples == 3, "{p:?}");
    assert_eq!(p.age_s, 380.0);
    assert!(close(EWMA.predict(&h, 500.0).expect("samples").bps, 18.1));
}

#[test]
fn invalid_parameters_or_time_give_no_prediction() {
    let h = hist(&[1.0, 2.0]);
    let bad = [
        Predictor::Median { n: 0 },
        Predictor::MovingAverage {
            window: Window::Last(0),
        },
        Predictor::MovingAverage {
            window: Window::Seconds(0.0),
        },
        Predictor::MovingAverage {
            window: Window::Seconds(f64::NAN),
        },
        Predictor::Ewma { alpha: 0.0 },
        Predictor::Ewma { alpha: 1.01 },
    ];
    for p in bad {
        assert!(!p.is_valid() && p.check().is_err(), "{p:?}");
        assert_eq!(p.predict(&h, 200.0), None, "{p:?}");
    }
    assert_eq!(MEDIAN5.predict(&h, f64::NAN), None);
    assert!(MEDIAN5.check().is_ok());
}

#[test]
fn history_validation_names_the_bad_sample() {
    assert_eq!(validate_history(&hist(&[1.0, 0.0, 3.0])), Ok(()));
    assert!(matches!(
        validate_history(&[Measurement::new(0.0, 1.0), Measurement::new(1.0, f64::NAN)]),
        Err(TuneError::NonFinite { what, .. }) if what == "sample 1 rate"
    ));
    assert!(matches!(
        validate_history(&[Measurement::new(0.0, -1.0)]),
        Err(TuneError::BadParameter { reason, .. }) if reason.contains("sample 0")
    ));
    assert!(matches!(
        validate_history(&[Measurement::new(5.0, 1.0), Measurement::new(4.0, 1.0)]),
        Err(TuneError::BadParameter { reason, .. }) if reason.contains("sample 1")
    ));
}

#[test]
fn percent_error_and_improvement_follow_the_thesis() {
    assert_eq!(percent_error(120.0, 100.0), Some(20.0));
    assert_eq!(percent_error(80.0, 100.0), Some(20.0));
    assert_eq!(percent_error(1.0, 0.0), None);
    assert_eq!(percent_error(f64::NAN, 1.0), None);
    // The thesis's example: AB = 50, BC = 100 Mb/s, direct 40 → split 50 is a 25% improvement.
    assert_eq!(improvement(50.0, 40.0), Some(25.0));
    assert_eq!(improvement(30.0, 40.0), Some(-25.0));
    assert_eq!(improvement(30.0, 0.0), None);
}

#[test]
fn step_error_defines_outages() {
    assert_eq!(step_error(0.0, 0.0), 0.0);
    assert_eq!(step_error(5.0, 0.0), 100.0);
    assert_eq!(step_error(0.0, 5.0), 100.0);
    assert_eq!(step_error(15.0, 10.0), 50.0);
}

fn selected(xs: &[f64]) -> Prediction {
    let h = hist(xs);
    Selector::default()
        .predict(&h, xs.len() as f64 * 60.0)
        .expect("a prediction")
}

#[test]
fn selector_prefers_ewma_shortly_after_a_step() {
    // Over the last 10 steps (7 exact, then 100 → 200): median predicts 100, 100, 100
    // (15% mean error), the moving average 100, 120, 140 (12%), the EWMA 100, 130, 151
    // (10.95%).
    let mut xs = vec![100.0; 12];
    xs.extend([200.0; 3]);
    let errs: Vec<f64> = Selector::default()
        .scores(&hist(&xs))
        .iter()
        .map(|s| s.error_pct.expect("scored"))
        .collect();
    assert!(close(errs[0], 15.0) && close(errs[1], 12.0) && close(errs[2], 10.95));
    let p = selected(&xs);
    assert_eq!(p.predictor, EWMA);
    assert!(close(p.bps, 165.7) && close(p.error_pct.expect("scored"), 10.95));
}

#[test]
fn selector_prefers_ewma_on_outages() {
    // Four up, four down: the EWMA errs only at each switch (20%), the others for longer.
    let xs: Vec<f64> = (0..20)
        .map(|i| if (i / 4) % 2 == 0 { 100.0 } else { 0.0 })
        .collect();
    let p = selected(&xs);
    assert_eq!(p.predictor, EWMA);
    assert!(close(p.error_pct.expect("scored"), 20.0));
}

#[test]
fn selector_prefers_the_median_with_outliers() {
    let noise = [3.0, -4.0, 1.0, 5.0, -2.0, -5.0, 4.0, -1.0, 2.0, -3.0];
    let xs: Vec<f64> = (0..20)
        .map(|i| {
            if i % 4 == 3 {
                300.0
            } else {
                100.0 + noise[i % 10]
            }
        })
        .collect();
    assert_eq!(selected(&xs).predictor, MEDIAN5);
}

#[test]
fn selector_prefers_the_moving_average_on_a_cycle_of_its_length() {
    // The moving average of a full cycle always predicts the cycle mean 160: 20% and 60%
    // errors, 36% on average; the median always predicts 200 (40%).
    let xs: Vec<f64> = (0..30)
        .map(|i| [200.0, 200.0, 200.0, 100.0, 100.0][i % 5])
        .collect();
    let p = selected(&xs);
    assert_eq!(p.predictor, DEFAULT_CANDIDATES[1]);
    assert!(close(p.bps, 160.0) && close(p.error_pct.expect("scored"), 36.0));
}

#[test]
fn selector_scores_only_the_last_k_steps() {
    // A disturbance more than k steps back (and out of the windows) is forgotten.
    let mut xs = vec![100.0, 1000.0];
    xs.extend([100.0; 12]);
    let h = hist(&xs);
    let short = Selector::new(vec![MEDIAN5, MAVG3], 3).expect("selector");
    assert_eq!(short.error_window(), 3);
    let scores = short.scores(&h);
    assert!(scores
        .iter()
        .all(|c| c.scored == 3 && c.error_pct == Some(0.0)));
    // With k = 20 every one of the 13 steps is scored, the 1000 among them.
    let long = Selector::new(vec![MEDIAN5, MAVG3], 20).expect("selector");
    let scores = long.scores(&h);
    assert!(scores
        .iter()
        .all(|c| c.scored == 13 && c.error_pct > Some(0.0)));
}

#[test]
fn selector_ties_go_to_the_first_candidate() {
    let s = Selector::new(vec![EWMA, MEDIAN5], 10).expect("selector");
    let p = s.predict(&hist(&[7.0; 8]), 600.0).expect("samples");
    assert_eq!((p.predictor, p.error_pct), (EWMA, Some(0.0)));
}

#[test]
fn selector_skips_a_candidate_with_nothing_in_its_window() {
    let recent = Predictor::MovingAverage {
        window: Window::Seconds(30.0),
    };
    let s = Selector::new(vec![recent, MEDIAN5], 10).expect("selector");
    // Samples a minute apart: the 30 s window never holds one, so it is never scored.
    let h = hist(&[1.0, 2.0, 3.0]);
    let scores = s.scores(&h);
    assert_eq!((scores[0].scored, scores[0].error_pct), (0, None));
    assert_eq!(s.predict(&h, 180.0).map(|p| p.predictor), Some(MEDIAN5));
}

#[test]
fn selector_rejects_bad_configuration() {
    assert!(Selector::new(vec![], 10).is_err());
    assert!(Selector::new(DEFAULT_CANDIDATES.to_vec(), 0).is_err());
    assert!(Selector::new(vec![Predictor::Median { n: 0 }], 10).is_err());
    assert_eq!(Selector::default().candidates(), &DEFAULT_CANDIDATES);
}

#[test]
fn predictors_display_their_parameters() {
    let names: Vec<String> = DEFAULT_CANDIDATES.iter().map(|p| p.to_string()).collect();
    assert_eq!(names, ["median(5)", "mavg(5)", "ewma(0.3)"]);
    let w = Predictor::MovingAverage {
        window: Window::Seconds(3600.0),
    };
    assert_eq!(w.to_string(), "mavg(3600s)");
}
