//! Replays the early-stopping estimators on synthetic per-interval traces (noisy slow-start ramps
//! and AR(1) processes) at 1 s and 100 ms reports, next to the 4-point oracle; at 100 ms also
//! with the recommended minimum window (`EarlyStop::min_window`).
//! Run: `cargo run -p haul-tune --release --example estimate`.

use haul_tune::estimate::{EarlyStop, Model};
use haul_tune::estimate_replay::evaluate;
use haul_tune::traces::{ar1, exp_rise, with_noise};
use haul_tune::TuneError;

fn main() -> Result<(), TuneError> {
    println!("| dt | window (s) | model | converged % | mean time (s) | mean error % | <10% by 3 s | oracle time (s) | oracle error % |");
    println!("|---|---|---|---|---|---|---|---|---|");
    let w = EarlyStop::RECOMMENDED_MIN_WINDOW_S;
    for (dt, window) in [(1.0, 0.0), (0.1, 0.0), (0.1, w)] {
        let n = (60.0 / dt) as usize;
        let traces: Vec<Vec<f64>> = (0..500u64)
            .map(|s| {
                if s % 2 == 0 {
                    with_noise(&exp_rise(8000.0, 1.0 + (s % 7) as f64, dt, n), 0.05, s)
                } else {
                    ar1(5000.0, 0.6, 300.0, n, s)
                }
            })
            .collect();
        for model in [
            Model::Ar { p: 2 },
            Model::arma(1, 1),
            Model::Arima { p: 1, d: 1, q: 1 },
            Model::NegPoly,
            Model::Adaptive,
        ] {
            let r = evaluate(&EarlyStop::new(model, dt)?.min_window(window), &traces)?;
            println!(
                "| {dt} s | {window} | {} | {:.1} | {:.2} | {:.1} | {:.0}% | {:.2} | {:.1} |",
                r.model,
                r.converged_pct,
                r.mean_time_s,
                r.mean_error_pct,
                r.within_bar_pct,
                r.oracle_time_s,
                r.oracle_error_pct
            );
        }
    }
    Ok(())
}
