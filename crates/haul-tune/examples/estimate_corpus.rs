//! Picks the early-stopping settings by replay: every model under a grid of minimum windows and
//! smoothing blocks, on recorded traces read from stdin as `transfer_id|t_s|bytes` lines (the
//! history store's `samples` table, in `seq` order). Leading setup intervals (nothing moved yet)
//! are dropped unless `KEEP_SETUP` is set; traces then shorter than `MIN_READINGS` (default 20)
//! are skipped; `RESAMPLE=k` replays them as if sampled every k intervals.
//!
//! ```sh
//! sqlite3 bench/results/replay-corpus-20261122.sqlite \
//!   'select transfer_id, t_s, bytes from samples order by transfer_id, seq' |
//!   cargo run -p haul-tune --release --example estimate_corpus
//! ```
//!
//! `haul history replay` prints the same numbers for one setting straight from the database.

use std::collections::BTreeMap;
use std::io::BufRead;

use haul_tune::estimate::{EarlyStop, Model};
use haul_tune::estimate_replay::{evaluate_traces, trace_from_samples, Bar, ReplayTrace};
use haul_tune::TuneError;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let min_readings: usize = std::env::var("MIN_READINGS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let mut by_id: BTreeMap<i64, Vec<(f64, u64)>> = BTreeMap::new();
    for line in std::io::stdin().lock().lines() {
        let line = line?;
        let f: Vec<&str> = line.trim().split('|').collect();
        if f.len() != 3 {
            continue;
        }
        let (Ok(id), Ok(t), Ok(b)) = (f[0].parse(), f[1].parse(), f[2].parse()) else {
            continue;
        };
        by_id.entry(id).or_default().push((t, b));
    }
    let resample: usize = std::env::var("RESAMPLE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let keep_setup = std::env::var_os("KEEP_SETUP").is_some();
    let traces: Vec<ReplayTrace> = by_id
        .values()
        .filter_map(|s| trace_from_samples(s, !keep_setup))
        .filter(|t| t.readings.len() >= min_readings)
        .map(|t| t.resample(resample))
        .collect();
    eprintln!("{} traces", traces.len());
    table(&traces)?;
    Ok(())
}

fn table(traces: &[ReplayTrace]) -> Result<(), TuneError> {
    println!("| model | window (s) | smooth (s) | converged % | mean time (s) | median time (s) | mean error % | median error % | <10% by 3 s | oracle by 3 s |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let models = [
        Model::Ar { p: 2 },
        Model::arma(1, 1),
        Model::Arima { p: 1, d: 1, q: 1 },
        Model::NegPoly,
        Model::Adaptive,
    ];
    for window in [0.0, 0.5, 1.0, 1.2, 1.5, 1.8, 2.0, 2.5] {
        for smooth in [0.0, 0.2, 0.3, 0.5] {
            for model in models {
                let rule = EarlyStop::new(model, 0.1)?
                    .min_window(window)
                    .smoothing(smooth);
                let r = evaluate_traces(&rule, traces, Bar::default())?;
                println!(
                    "| {} | {window} | {smooth} | {:.0} | {:.2} | {:.2} | {:.1} | {:.1} | {:.0}% | {:.0}% |",
                    r.model,
                    r.converged_pct,
                    r.mean_time_s,
                    r.median_time_s,
                    r.mean_error_pct,
                    r.median_error_pct,
                    r.within_bar_pct,
                    r.oracle_within_bar_pct
                );
            }
        }
    }
    Ok(())
}
