//! `haul history replay`: replays the early-stopping estimators on the recorded per-interval
//! throughput traces, and prints how soon and how accurately each one would have stopped.

use super::{human_duration, human_rate, parse_since};
use haul_store::{Filter, Outcome, Store, TransferRecord};
use haul_tune::estimate::{EarlyStop, Model};
use haul_tune::estimate_replay::{
    replay_trace, summarize, trace_from_samples, Bar, EstimateReport, ReplayTrace, TraceOutcome,
};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `haul history replay`.
#[derive(clap::Args, Debug)]
pub(super) struct ReplayArgs {
    /// History database [default: $XDG_DATA_HOME/haul/history.sqlite].
    #[arg(long, value_name = "PATH", env = "HAUL_HISTORY")]
    history: Option<PathBuf>,
    /// Only records of this kind.
    #[arg(long, value_name = "K", default_value = "cp")]
    kind: String,
    /// Only transfers where either endpoint's host contains this text.
    #[arg(long, value_name = "H")]
    host: Option<String>,
    /// Only transfers with this outcome: ok, failed or interrupted [default: any].
    #[arg(long, value_name = "OUTCOME")]
    outcome: Option<Outcome>,
    /// Only transfers started within this long (24h, 30m, 7d) or since this Unix time.
    #[arg(long, value_name = "WHEN", value_parser = parse_since)]
    since: Option<f64>,
    /// Only these record ids: comma-separated ids and ranges, e.g. 1-11,26-30.
    #[arg(long, value_name = "LIST", value_parser = parse_ids)]
    ids: Option<IdSet>,
    /// Skip traces with fewer readings (after the first byte, unless --keep-setup).
    #[arg(long, value_name = "N", default_value_t = 20)]
    min_readings: usize,
    /// Only traces recorded at this sample interval, milliseconds (±10%) [default: any].
    #[arg(long, value_name = "MS")]
    sample_ms: Option<f64>,
    /// Replay as if sampled at this interval, milliseconds: a multiple of each trace's own, whose
    /// consecutive readings are averaged (e.g. 200 for the live tuner's interval on 100 ms traces).
    #[arg(long, value_name = "MS")]
    resample_ms: Option<f64>,
    /// Keep the leading intervals in which nothing moved (connection setup) in the trace, its
    /// clock and its average; by default a trace starts at its first byte.
    #[arg(long)]
    keep_setup: bool,
    /// θ of the stopping rule (and of the oracle).
    #[arg(long, value_name = "θ", default_value_t = 0.10)]
    theta: f64,
    /// Minimum observation window, seconds, before the rule may stop (0: the thesis's 3 readings only).
    #[arg(long, value_name = "S", default_value_t = EarlyStop::RECOMMENDED_MIN_WINDOW_S)]
    min_window: f64,
    /// Smoothing block, seconds: fit on block means (0: raw readings).
    #[arg(long, value_name = "S", default_value_t = EarlyStop::DEFAULT_SMOOTH_S)]
    smooth: f64,
    /// The accuracy bar's deadline, seconds into the transfer.
    #[arg(long, value_name = "S", default_value_t = 3.0)]
    deadline: f64,
    /// The accuracy bar's error, percent.
    #[arg(long, value_name = "PCT", default_value_t = 10.0)]
    bar: f64,
    /// Also print every trace with each estimator's stopping time and error.
    #[arg(long)]
    per_trace: bool,
    /// Print JSON (settings, per-estimator reports, per-trace outcomes) instead of tables.
    #[arg(long)]
    json: bool,
}

/// A set of record ids given as `1-11,26-30,40`.
#[derive(Debug, Clone, PartialEq)]
struct IdSet(Vec<(i64, i64)>);

impl IdSet {
    /// Whether `id` lies in one of the ranges.
    fn contains(&self, id: i64) -> bool {
        self.0.iter().any(|&(a, b)| (a..=b).contains(&id))
    }
}

/// Parses `--ids`: comma-separated ids and inclusive ranges (`1-11,26-30,40`).
fn parse_ids(s: &str) -> Result<IdSet, String> {
    let bad = || format!("{s:?}: expected ids and ranges like 1-11,26-30");
    let mut v = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (
                a.trim().parse().map_err(|_| bad())?,
                b.trim().parse().map_err(|_| bad())?,
            ),
            None => {
                let a: i64 = part.parse().map_err(|_| bad())?;
                (a, a)
            }
        };
        if a > b {
            return Err(bad());
        }
        v.push((a, b));
    }
    if v.is_empty() {
        return Err(bad());
    }
    Ok(IdSet(v))
}

/// The models `haul history replay` evaluates, in table order.
fn replay_models() -> [Model; 5] {
    [
        Model::Ar { p: 2 },
        Model::arma(1, 1),
        Model::Arima { p: 1, d: 1, q: 1 },
        Model::NegPoly,
        Model::Adaptive,
    ]
}

/// One replayed transfer.
#[derive(Debug, serde::Serialize)]
struct ReplayedTrace {
    id: Option<i64>,
    source_host: String,
    destination_host: String,
    parallelism: Option<u32>,
    concurrency: Option<u32>,
    readings: usize,
    dt: f64,
    duration_s: f64,
    average_bps: f64,
    /// Per model, in the order of the reports.
    outcomes: Vec<TraceOutcome>,
}

/// Everything `haul history replay --json` prints.
#[derive(Debug, serde::Serialize)]
struct ReplayOutput {
    history: String,
    kind: String,
    min_readings: usize,
    skipped: usize,
    keep_setup: bool,
    resample_ms: Option<f64>,
    theta: f64,
    min_window_s: f64,
    smooth_s: f64,
    bar: Bar,
    reports: Vec<EstimateReport>,
    traces: Vec<ReplayedTrace>,
}

/// The records that qualify as replay traces, with their traces; and how many were skipped.
fn replay_traces(
    records: &[TransferRecord],
    args: &ReplayArgs,
) -> (Vec<(usize, ReplayTrace)>, usize) {
    let mut kept = Vec::new();
    for (i, r) in records.iter().enumerate() {
        if args
            .ids
            .as_ref()
            .is_some_and(|ids| !r.id.is_some_and(|id| ids.contains(id)))
        {
            continue;
        }
        let samples: Vec<(f64, u64)> = r.samples.iter().map(|s| (s.t_s, s.bytes)).collect();
        let Some(mut trace) = trace_from_samples(&samples, !args.keep_setup) else {
            continue;
        };
        if trace.readings.len() < args.min_readings {
            continue;
        }
        if let Some(ms) = args.sample_ms {
            if ((trace.dt * 1e3 - ms) / ms).abs() > 0.10 {
                continue;
            }
        }
        if let Some(ms) = args.resample_ms {
            let k = (ms / (trace.dt * 1e3)).round();
            if k < 1.0 || ((k * trace.dt * 1e3 - ms) / ms).abs() > 0.10 {
                continue;
            }
            trace = trace.resample(k as usize);
        }
        kept.push((i, trace));
    }
    let skipped = records.len() - kept.len();
    (kept, skipped)
}

/// Refuses a negative or non-finite window, smoothing, deadline or bar, and a non-positive θ or
/// sample interval.
fn check_replay_args(a: &ReplayArgs) -> anyhow::Result<()> {
    let bad =
        |name: &str, v: f64| anyhow::anyhow!("--{name} {v}: must be a finite, non-negative number");
    for (name, v) in [
        ("min-window", a.min_window),
        ("smooth", a.smooth),
        ("deadline", a.deadline),
        ("bar", a.bar),
    ] {
        if !(v.is_finite() && v >= 0.0) {
            return Err(bad(name, v));
        }
    }
    if !(a.theta.is_finite() && a.theta > 0.0) {
        anyhow::bail!("--theta {}: must be positive", a.theta);
    }
    for (name, v) in [("sample-ms", a.sample_ms), ("resample-ms", a.resample_ms)] {
        if v.is_some_and(|ms| !(ms.is_finite() && ms > 0.0)) {
            anyhow::bail!("--{name} must be positive");
        }
    }
    Ok(())
}

/// Runs `haul history replay`.
pub(super) fn run(args: ReplayArgs) -> anyhow::Result<ExitCode> {
    check_replay_args(&args).map_err(|e| haul_xfer::XferError::Usage(format!("{e:#}")))?;
    let path = args.history.clone().unwrap_or_else(Store::default_path);
    let records = if path.exists() {
        let filter = Filter {
            host: args.host.clone(),
            kind: Some(args.kind.clone()),
            outcome: args.outcome,
            since: args.since,
            limit: None,
            with_samples: true,
        };
        Store::open(&path)?.list(&filter)?
    } else {
        Vec::new()
    };
    let output = replay_records(&records, &args, &path.display().to_string())?;
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&output)?)?;
    } else {
        write_replay(&mut out, &output, args.per_trace)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Replays every model on the qualifying records (oldest first).
fn replay_records(
    records: &[TransferRecord],
    args: &ReplayArgs,
    history: &str,
) -> anyhow::Result<ReplayOutput> {
    let (mut kept, skipped) = replay_traces(records, args);
    kept.reverse();
    let bar = Bar {
        deadline_s: args.deadline,
        error_pct: args.bar,
    };
    let rules = replay_models()
        .into_iter()
        .map(|m| {
            Ok(EarlyStop::new(m, 0.1)?
                .theta(args.theta)
                .min_window(args.min_window)
                .smoothing(args.smooth))
        })
        .collect::<Result<Vec<_>, haul_tune::TuneError>>()?;
    let mut traces = Vec::new();
    let mut per_model: Vec<Vec<TraceOutcome>> = vec![Vec::new(); rules.len()];
    for (i, trace) in &kept {
        let r = &records[*i];
        let outcomes = rules
            .iter()
            .map(|rule| replay_trace(rule, trace))
            .collect::<Result<Vec<_>, _>>()?;
        for (acc, o) in per_model.iter_mut().zip(&outcomes) {
            acc.push(o.clone());
        }
        traces.push(ReplayedTrace {
            id: r.id,
            source_host: r.source_host.clone(),
            destination_host: r.destination_host.clone(),
            parallelism: r.params.parallelism,
            concurrency: r.params.concurrency,
            readings: trace.readings.len(),
            dt: trace.dt,
            duration_s: trace.duration_s(),
            average_bps: trace.average,
            outcomes,
        });
    }
    let reports = rules
        .iter()
        .zip(&per_model)
        .map(|(rule, o)| summarize(rule, o, bar))
        .collect();
    Ok(ReplayOutput {
        history: history.to_owned(),
        kind: args.kind.clone(),
        min_readings: args.min_readings,
        skipped,
        keep_setup: args.keep_setup,
        resample_ms: args.resample_ms,
        theta: args.theta,
        min_window_s: args.min_window,
        smooth_s: args.smooth,
        bar,
        reports,
        traces,
    })
}

/// Right-aligns every column but the first.
fn write_aligned(out: &mut impl Write, rows: &[Vec<String>]) -> std::io::Result<()> {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(i, (c, &w))| {
                if i == 0 {
                    format!("{c:<w$}")
                } else {
                    format!("{c:>w$}")
                }
            })
            .collect();
        writeln!(out, "{}", cells.join("  ").trim_end())?;
    }
    Ok(())
}

/// Prints the replay's settings, the per-estimator table and, with `per_trace`, every trace.
fn write_replay(out: &mut impl Write, o: &ReplayOutput, per_trace: bool) -> std::io::Result<()> {
    writeln!(
        out,
        "{} traces from {} ({} records skipped: not selected, fewer than {} readings{}, or another interval); {}; θ = {}, window {} s, smoothing {} s",
        o.traces.len(),
        o.history,
        o.skipped,
        o.min_readings,
        if o.keep_setup { "" } else { " after the first byte" },
        if o.keep_setup { "clock from the transfer's start" } else { "clock from the first byte" },
        o.theta,
        o.min_window_s,
        o.smooth_s
    )?;
    if o.traces.is_empty() {
        return Ok(());
    }
    let bar = format!("<{}% BY {}s", o.bar.error_pct, o.bar.deadline_s);
    let mut rows = vec![[
        "ESTIMATOR",
        "TRACES",
        "CONVERGED",
        "MEAN T (s)",
        "MEDIAN T (s)",
        "MEAN ERR",
        "MEDIAN ERR",
        bar.as_str(),
    ]
    .map(String::from)
    .to_vec()];
    for r in &o.reports {
        rows.push(vec![
            r.model.clone(),
            r.traces.to_string(),
            format!("{:.0}%", r.converged_pct),
            format!("{:.2}", r.mean_time_s),
            format!("{:.2}", r.median_time_s),
            format!("{:.1}%", r.mean_error_pct),
            format!("{:.1}%", r.median_error_pct),
            format!("{:.0}%", r.within_bar_pct),
        ]);
    }
    // The oracle does not depend on the model; every report carries the same numbers.
    let r = &o.reports[0];
    rows.push(vec![
        "oracle (4-point window)".into(),
        r.traces.to_string(),
        format!("{:.0}%", r.oracle_converged_pct),
        format!("{:.2}", r.oracle_time_s),
        format!("{:.2}", r.oracle_median_time_s),
        format!("{:.1}%", r.oracle_error_pct),
        "-".into(),
        format!("{:.0}%", r.oracle_within_bar_pct),
    ]);
    write_aligned(out, &rows)?;
    if per_trace {
        writeln!(out)?;
        write_traces(out, o)?;
    }
    Ok(())
}

/// Prints one row per trace: its transfer, and each estimator's (and the oracle's) stopping
/// time and error.
fn write_traces(out: &mut impl Write, o: &ReplayOutput) -> std::io::Result<()> {
    let mut head = ["ID", "HOSTS", "P", "DT", "TIME", "AVERAGE"]
        .map(String::from)
        .to_vec();
    head.extend(o.reports.iter().map(|r| r.model.clone()));
    head.push("oracle".into());
    let mut rows = vec![head];
    let cell = |c: Option<f64>, e: Option<f64>| match (c, e) {
        (Some(t), Some(e)) => format!("{t:.1}s {e:.0}%"),
        _ => "-".into(),
    };
    for t in &o.traces {
        let mut row = vec![
            t.id.map(|i| i.to_string()).unwrap_or_default(),
            format!("{} → {}", t.source_host, t.destination_host),
            t.parallelism
                .map(|p| p.to_string())
                .unwrap_or_else(|| "-".into()),
            format!("{:.0}ms", t.dt * 1e3),
            human_duration(t.duration_s),
            human_rate(t.average_bps),
        ];
        row.extend(
            t.outcomes
                .iter()
                .map(|x| cell(x.stop.map(|c| c.time_s), x.error_pct)),
        );
        let x = &t.outcomes[0];
        row.push(cell(x.oracle.map(|c| c.time_s), x.oracle_error_pct));
        rows.push(row);
    }
    write_aligned(out, &rows)
}

#[cfg(test)]
mod tests;
