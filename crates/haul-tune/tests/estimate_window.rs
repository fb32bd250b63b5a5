//! Sub-second reports (issue 6): the minimum observation window, setup zeros, smoothing blocks,
//! and the replay of recorded traces. The synthetic traces are noisy and non-monotone (slow-start
//! overshoot, block-quantised readings) like the 100 ms traces `haul cp` records; with the thesis
//! rule (3 readings, no window) the estimators stop during the ramp.

use haul_tune::estimate::{EarlyStop, Model};
use haul_tune::estimate_replay::{
    evaluate, evaluate_traces, replay_trace, trace_from_samples, Bar, ReplayTrace,
};
use haul_tune::traces::{exp_rise, overshoot, quantized, with_noise, with_setup};

const WINDOW: f64 = EarlyStop::RECOMMENDED_MIN_WINDOW_S;

fn rel(a: f64, b: f64) -> f64 {
    ((a - b) / b).abs()
}

/// 20 s of 100 ms readings: a slow-start ramp (τ = 0.2–0.6 s) to 800 Mb/s with 15% noise,
/// counted in whole 1 MiB blocks (84 Mb/s steps).
fn noisy_ramps(count: u64) -> Vec<Vec<f64>> {
    (0..count)
        .map(|s| {
            let tau = 0.2 + 0.1 * (s % 5) as f64;
            let xs = with_noise(&exp_rise(800e6, tau, 0.1, 200), 0.15, s);
            quantized(&xs, 83.886e6)
        })
        .collect()
}

/// 20 s of 100 ms readings that overshoot by 30–70% after slow start (τ = 0.1 s) and settle
/// within about a second, with 10% noise.
fn overshooting(count: u64) -> Vec<Vec<f64>> {
    (0..count)
        .map(|s| {
            let amount = 0.3 + 0.1 * (s % 5) as f64;
            with_noise(&overshoot(600e6, 0.1, amount, 0.1, 200), 0.10, 1000 + s)
        })
        .collect()
}

#[test]
fn overshoot_is_non_monotone_and_settles() {
    let xs = overshoot(100.0, 0.2, 0.5, 0.1, 100);
    let peak = xs.iter().copied().fold(0.0, f64::max);
    assert!(peak > 130.0, "overshoots: {peak}");
    assert!(rel(xs[99], 100.0) < 0.01, "settles: {}", xs[99]);
    let q = quantized(&[10.0, 10.0, 10.0], 4.0);
    assert_eq!(q, vec![8.0, 12.0, 8.0], "remainders carry over");
}

#[test]
fn window_makes_ar2_accurate_on_noisy_100ms_ramps() {
    let traces = noisy_ramps(100);
    let rule = |model| EarlyStop::new(model, 0.1).expect("dt");
    let thesis = evaluate(&rule(Model::Ar { p: 2 }), &traces).expect("replay");
    let fixed = evaluate(&rule(Model::Ar { p: 2 }).min_window(WINDOW), &traces).expect("replay");
    // Without the window the rule stops inside the ramp (about 0.7 s, 24% error).
    assert!(thesis.within_bar_pct < 50.0, "{thesis:?}");
    assert!(thesis.mean_error_pct > 15.0, "{thesis:?}");
    // With it: error < 10% within 3 s on most traces.
    assert!(fixed.mean_error_pct < 10.0, "{fixed:?}");
    assert!(fixed.within_bar_pct >= 75.0, "{fixed:?}");
    assert!(fixed.mean_time_s <= 3.0, "{fixed:?}");
    // a − b/t² gains too (29% → 12%), though not to the bar.
    let thesis = evaluate(&rule(Model::NegPoly), &traces).expect("replay");
    let fixed = evaluate(&rule(Model::NegPoly).min_window(WINDOW), &traces).expect("replay");
    assert!(
        fixed.mean_error_pct < thesis.mean_error_pct - 10.0,
        "{thesis:?}\n{fixed:?}"
    );
}

#[test]
fn window_makes_ar2_accurate_after_an_overshoot() {
    let traces = overshooting(100);
    let thesis = evaluate(
        &EarlyStop::new(Model::Ar { p: 2 }, 0.1).expect("dt"),
        &traces,
    )
    .expect("replay");
    let fixed = evaluate(
        &EarlyStop::new(Model::Ar { p: 2 }, 0.1)
            .expect("dt")
            .min_window(WINDOW),
        &traces,
    )
    .expect("replay");
    assert!(thesis.within_bar_pct < 50.0, "{thesis:?}");
    assert!(fixed.mean_error_pct < 10.0, "{fixed:?}");
    assert!(fixed.within_bar_pct >= 70.0, "{fixed:?}");
}

#[test]
fn setup_zeros_do_not_end_a_sample() {
    // 1.5 s of connection setup, then a noisy plateau.
    let body = with_noise(&[500e6; 100], 0.05, 7);
    let xs = with_setup(&body, 15);
    for model in [
        Model::Ar { p: 2 },
        Model::arma(1, 1),
        Model::NegPoly,
        Model::Adaptive,
    ] {
        let c = EarlyStop::new(model, 0.1)
            .expect("dt")
            .run(&xs)
            .expect("finite")
            .expect("converges");
        assert!(c.readings > 15 + 1, "{model:?} stopped during setup: {c:?}");
        assert!(rel(c.estimate, 500e6) < 0.15, "{model:?}: {c:?}");
        assert!((c.time_s - c.readings as f64 * 0.1).abs() < 1e-9);
    }
    // The window counts from the first byte, not from the first (zero) reading.
    let c = EarlyStop::new(Model::Ar { p: 2 }, 0.1)
        .expect("dt")
        .min_window(1.0)
        .run(&xs)
        .expect("finite")
        .expect("converges");
    assert!(c.readings >= 15 + 10, "{c:?}");
}

#[test]
fn zero_readings_never_end_a_sample() {
    let xs = [0.0, 0.0, 100.0, 0.0, 0.0, 500.0, 520.0];
    let c = EarlyStop::new(Model::Adaptive, 1.0)
        .expect("dt")
        .run(&xs)
        .expect("finite")
        .expect("converges");
    assert_eq!((c.readings, c.estimate), (7, 510.0));
    let stalled = [0.0; 30];
    for m in [Model::Ar { p: 2 }, Model::Adaptive] {
        let r = EarlyStop::new(m, 0.1).expect("dt").run(&stalled);
        assert_eq!(r, Ok(None), "{m:?}");
    }
}

#[test]
fn window_changes_nothing_at_one_second_reports() {
    let traces = noisy_ramps(20);
    for model in [Model::Ar { p: 2 }, Model::NegPoly, Model::arma(1, 1)] {
        for xs in &traces {
            let a = EarlyStop::new(model, 1.0).expect("dt").run(xs);
            let b = EarlyStop::new(model, 1.0)
                .expect("dt")
                .min_window(WINDOW)
                .run(xs);
            assert_eq!(a, b, "{model:?}");
        }
    }
}

#[test]
fn window_is_in_seconds() {
    let xs = [100.0; 40];
    for (dt, first) in [(0.1, 15), (0.2, 8), (0.5, 4), (1.0, 4)] {
        let c = EarlyStop::new(Model::Ar { p: 2 }, dt)
            .expect("dt")
            .min_window(1.5)
            .run(&xs)
            .expect("finite")
            .expect("converges");
        assert_eq!(c.readings, first, "dt {dt}");
    }
    // Nonsense windows mean none.
    let r = EarlyStop::new(Model::Ar { p: 2 }, 0.1)
        .expect("dt")
        .min_window(f64::NAN);
    assert_eq!(r.min_window_s, 0.0);
}

#[test]
fn smoothing_fits_block_means() {
    let xs = [100.0; 40];
    let rule = EarlyStop::new(Model::Ar { p: 2 }, 0.1)
        .expect("dt")
        .smoothing(0.3);
    assert_eq!(rule.block_len(), 3);
    let c = rule.clone().run(&xs).expect("finite").expect("converges");
    // 3 blocks fitted + 1 checked, 3 readings each.
    assert_eq!(c.readings, 12);
    assert!(rel(c.estimate, 100.0) < 1e-6, "{c:?}");
    // Alternating readings average out in blocks of two.
    let alt: Vec<f64> = (0..40)
        .map(|i| if i % 2 == 0 { 50.0 } else { 150.0 })
        .collect();
    let c = EarlyStop::new(Model::Adaptive, 0.1)
        .expect("dt")
        .smoothing(0.2)
        .run(&alt)
        .expect("finite")
        .expect("converges");
    assert_eq!((c.readings, c.estimate), (4, 100.0));
}

#[test]
fn recorded_samples_become_traces_from_the_first_byte() {
    // (t_s, bytes): 0.3 s of setup, then 1,250,000 bytes per 100 ms (100 Mb/s), a short last
    // interval of 0.05 s with half as much.
    let mut s: Vec<(f64, u64)> = vec![(0.1, 0), (0.2, 0), (0.3, 0)];
    s.extend((4..=23).map(|i| (i as f64 * 0.1, 1_250_000)));
    s.push((2.35, 625_000));
    let t = trace_from_samples(&s, true).expect("trace");
    assert!((t.dt - 0.1).abs() < 1e-9);
    assert_eq!(t.readings.len(), 21);
    assert!(t.readings.iter().all(|&x| rel(x, 100e6) < 1e-6), "{t:?}");
    assert!(rel(t.average, 100e6) < 1e-6, "{}", t.average);
    let with_setup = trace_from_samples(&s, false).expect("trace");
    assert_eq!(with_setup.readings.len(), 24);
    assert!(rel(with_setup.average, 100e6 * 2.05 / 2.35) < 1e-6);
    assert!(trace_from_samples(&[(0.1, 0)], true).is_none());
    assert!(trace_from_samples(&[(0.2, 5), (0.1, 5)], false).is_none());
    // Resampling keeps the average and doubles the interval.
    let r = t.resample(2);
    assert_eq!(r.readings.len(), 11);
    assert!((r.dt - 0.2).abs() < 1e-9 && r.average == t.average);
}

#[test]
fn replay_reports_the_bar_and_the_oracle() {
    let traces: Vec<ReplayTrace> = noisy_ramps(30)
        .into_iter()
        .map(|xs| ReplayTrace::new(xs, 0.1))
        .collect();
    let rule = EarlyStop::new(Model::Ar { p: 2 }, 1.0)
        .expect("dt")
        .min_window(WINDOW);
    let bar = Bar::default();
    let r = evaluate_traces(&rule, &traces, bar).expect("replay");
    let outcomes: Vec<_> = traces
        .iter()
        .map(|t| replay_trace(&rule, t).expect("replay"))
        .collect();
    let meets = outcomes.iter().filter(|o| o.meets(bar)).count();
    assert!((r.within_bar_pct - 100.0 * meets as f64 / 30.0).abs() < 1e-9);
    // The trace's dt (100 ms), not the rule's (1 s), drives the clock.
    assert!(
        outcomes.iter().all(|o| o.time_s() < 5.0),
        "{:?}",
        outcomes[0]
    );
    assert!(r.oracle_within_bar_pct >= 90.0, "{r:?}");
    assert!(r.oracle_error_pct < 10.0 && r.median_time_s <= r.mean_time_s + 1.0);
}
