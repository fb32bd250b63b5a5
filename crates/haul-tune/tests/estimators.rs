//! Early-stopping estimators on synthetic traces, the oracle, the log-replay harness, and
//! property tests that fitting never panics and stays finite.

use haul_tune::estimate::fit::least_squares;
use haul_tune::estimate::{oracle, true_average, EarlyStop, Model};
use haul_tune::estimate_replay::evaluate;
use haul_tune::traces::{ar1, exp_rise, neg_poly, with_noise};
use proptest::prelude::*;

fn rel(a: f64, b: f64) -> f64 {
    ((a - b) / b).abs()
}

#[test]
fn oracle_matches_the_thesis_example() {
    let xs = [
        100.0, 300.0, 120.0, 610.0, 550.0, 600.0, 450.0, 400.0, 650.0, 310.0,
    ];
    assert!((true_average(&xs) - 409.0).abs() < 1e-9);
    let c = oracle(&xs, 0.10, 1.0).expect("a window qualifies");
    assert_eq!(c.readings, 5);
    assert!((rel(c.estimate, 409.0) - 0.034).abs() < 0.001);
}

#[test]
fn ar1_forecast_is_exact_on_a_noise_free_ar1() {
    let xs: Vec<f64> = (0..8).map(|i| 100.0 + 64.0 * 0.5f64.powi(i)).collect();
    let f = Model::Ar { p: 1 }.forecast(&xs, 1);
    assert!(
        (f[0] - (100.0 + 64.0 * 0.5f64.powi(8))).abs() < 1e-4,
        "{f:?}"
    );
}

#[test]
fn neg_poly_trace_converges_at_the_first_check() {
    let xs = neg_poly(1000.0, 800.0, 60);
    let c = EarlyStop::new(Model::NegPoly, 1.0)
        .expect("dt")
        .run(&xs)
        .expect("finite")
        .expect("converges");
    assert_eq!(c.readings, 4, "3 fitted + 1 checked");
    assert!(rel(c.estimate, true_average(&xs)) < 0.03, "{c:?}");
}

#[test]
fn exp_rise_converges_fast_with_small_error() {
    let xs = exp_rise(8000.0, 2.0, 1.0, 60);
    for model in [Model::Ar { p: 2 }, Model::NegPoly, Model::arma(1, 1)] {
        let c = EarlyStop::new(model, 1.0)
            .expect("dt")
            .run(&xs)
            .expect("finite")
            .expect("converges");
        assert!(c.time_s <= 10.0, "{model:?} took {c:?}");
        assert!(
            rel(c.estimate, true_average(&xs)) < 0.12,
            "{model:?} error {c:?}"
        );
    }
}

#[test]
fn hundred_ms_reports_converge_under_two_seconds() {
    let xs = with_noise(&exp_rise(8000.0, 0.5, 0.1, 300), 0.03, 5);
    let c = EarlyStop::new(Model::Ar { p: 2 }, 0.1)
        .expect("dt")
        .run(&xs)
        .expect("finite")
        .expect("converges");
    assert!(c.time_s < 2.0, "{c:?}");
    assert!(rel(c.estimate, true_average(&xs)) < 0.2, "{c:?}");
}

#[test]
fn noisy_ar_processes() {
    let traces: Vec<Vec<f64>> = (0..200).map(|s| ar1(5000.0, 0.5, 250.0, 60, s)).collect();
    let rule = EarlyStop::new(Model::Ar { p: 2 }, 1.0).expect("dt");
    let r = evaluate(&rule, &traces).expect("replay");
    assert!(r.converged_pct >= 95.0, "{r:?}");
    assert!(r.mean_time_s <= 6.0, "{r:?}");
    assert!(r.mean_error_pct < 8.0, "{r:?}");
    assert!(r.oracle_error_pct < 10.0, "{r:?}");
    let arma = evaluate(
        &EarlyStop::new(Model::arma(1, 1), 1.0).expect("dt"),
        &traces,
    )
    .expect("replay");
    assert!(arma.mean_error_pct < 10.0, "{arma:?}");
}

#[test]
fn adaptive_stops_on_two_close_readings() {
    let xs = [100.0, 300.0, 500.0, 540.0, 900.0];
    let c = EarlyStop::new(Model::Adaptive, 1.0)
        .expect("dt")
        .run(&xs)
        .expect("finite")
        .expect("converges");
    assert_eq!(c.readings, 4);
    assert_eq!(c.estimate, 520.0);
}

#[test]
fn bad_input_is_rejected() {
    assert!(EarlyStop::new(Model::NegPoly, 0.0).is_err());
    let mut r = EarlyStop::new(Model::NegPoly, 1.0).expect("dt");
    assert!(r.push(f64::INFINITY).is_err());
}

fn models() -> Vec<Model> {
    vec![
        Model::Ar { p: 1 },
        Model::Ar { p: 3 },
        Model::arma(2, 1),
        Model::Arima { p: 1, d: 1, q: 1 },
        Model::NegPoly,
        Model::Adaptive,
    ]
}

proptest! {
    #[test]
    fn forecasts_are_finite(xs in prop::collection::vec(prop::num::f64::NORMAL | prop::num::f64::ZERO, 0..40), steps in 1usize..12) {
        for m in models() {
            let f = m.forecast(&xs, steps);
            prop_assert_eq!(f.len(), steps);
            prop_assert!(f.iter().all(|v| v.is_finite()), "{:?} on {:?} gave {:?}", m, xs, f);
        }
    }

    #[test]
    fn early_stop_never_panics(xs in prop::collection::vec(-1e12f64..1e12, 0..60), theta in 0.01f64..0.5) {
        for m in models() {
            let mut r = EarlyStop::new(m, 1.0).expect("dt").theta(theta);
            if let Some(c) = r.run(&xs).expect("finite input") {
                prop_assert!(c.estimate.is_finite() && c.readings <= xs.len());
            }
        }
    }

    #[test]
    fn least_squares_is_finite_or_none(rows in prop::collection::vec(prop::collection::vec(-1e6f64..1e6, 3), 0..20)) {
        let y: Vec<f64> = rows.iter().map(|r| r.iter().sum()).collect();
        if let Some(b) = least_squares(&rows, &y) {
            prop_assert!(b.iter().all(|v| v.is_finite()));
        }
    }
}
