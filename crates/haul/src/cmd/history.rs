//! `haul history`: list, filter and show the recorded transfers (table or `--json`), and
//! `haul history replay`: replay the early-stopping estimators on the recorded traces.

use anyhow::Context;
use haul_store::{Filter, Outcome, Store, TransferRecord};
use haul_tune::estimate::{EarlyStop, Model};
use haul_tune::estimate_replay::{
    replay_trace, summarize, trace_from_samples, Bar, EstimateReport, ReplayTrace, TraceOutcome,
};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

/// Arguments of `haul history`.
#[derive(clap::Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Args {
    #[command(subcommand)]
    action: Option<Action>,
    /// History database [default: $XDG_DATA_HOME/haul/history.sqlite].
    #[arg(long, value_name = "PATH", env = "HAUL_HISTORY")]
    history: Option<PathBuf>,
    /// Only transfers where either endpoint's host contains this text.
    #[arg(long, value_name = "H")]
    host: Option<String>,
    /// Only records of this kind (cp, profile, ...).
    #[arg(long, value_name = "K")]
    kind: Option<String>,
    /// Only transfers with this outcome: ok, failed or interrupted.
    #[arg(long, value_name = "OUTCOME")]
    outcome: Option<Outcome>,
    /// Only transfers started within this long (24h, 30m, 7d) or since this Unix time.
    #[arg(long, value_name = "WHEN", value_parser = parse_since)]
    since: Option<f64>,
    /// Show at most this many transfers, newest first.
    #[arg(long, value_name = "N", default_value_t = 20)]
    limit: usize,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Show one transfer, with its throughput samples.
    #[arg(long, value_name = "ID", conflicts_with_all = ["host", "kind", "outcome", "since"])]
    show: Option<i64>,
}

#[derive(clap::Subcommand, Debug)]
enum Action {
    /// Replay the early-stopping estimators on the recorded per-interval throughput traces.
    Replay(ReplayArgs),
}

/// Arguments of `haul history replay`.
#[derive(clap::Args, Debug)]
struct ReplayArgs {
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

/// Runs `haul history`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if let Some(Action::Replay(r)) = args.action {
        return replay(r);
    }
    let path = args.history.clone().unwrap_or_else(Store::default_path);
    // A missing database is an empty history; listing never creates one.
    let store = if path.exists() {
        Some(Store::open(&path)?)
    } else {
        None
    };
    let mut out = std::io::stdout().lock();
    if let Some(id) = args.show {
        let record = match &store {
            Some(s) => s.get(id)?,
            None => None,
        }
        .with_context(|| format!("no transfer with id {id} in {}", path.display()))?;
        if args.json {
            writeln!(out, "{}", serde_json::to_string_pretty(&record)?)?;
        } else {
            write_detail(&mut out, &record)?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    let filter = Filter {
        host: args.host,
        kind: args.kind,
        outcome: args.outcome,
        since: args.since,
        limit: Some(args.limit),
        with_samples: false,
    };
    let records = match &store {
        Some(s) => s.list(&filter)?,
        None => Vec::new(),
    };
    if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&records)?)?;
    } else if records.is_empty() {
        writeln!(out, "no transfers recorded in {}", path.display())?;
    } else {
        write_table(&mut out, &records)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// A set of record ids given as `1-11,26-30,40`.
#[derive(Debug, Clone, PartialEq)]
struct IdSet(Vec<(i64, i64)>);

impl IdSet {
    fn contains(&self, id: i64) -> bool {
        self.0.iter().any(|&(a, b)| (a..=b).contains(&id))
    }
}

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
fn replay(args: ReplayArgs) -> anyhow::Result<ExitCode> {
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
        write_aligned(out, &rows)?;
    }
    Ok(())
}

/// Parses `--since`: a duration back from now (`90s`, `30m`, `24h`, `7d`, `2w`) or a Unix time.
fn parse_since(s: &str) -> Result<f64, String> {
    if let Ok(unix) = s.parse::<f64>() {
        if unix.is_finite() {
            return Ok(unix);
        }
    }
    let ago = parse_duration(s)?;
    Ok(now_unix() - ago)
}

/// Parses a human duration (`90s`, `30m`, `24h`, `7d`, `2w`) into seconds.
fn parse_duration(s: &str) -> Result<f64, String> {
    haul_units::parse_duration(s).map_err(|e| {
        format!(
            "{s:?} is neither a duration like 24h nor a Unix time: {}",
            e.why
        )
    })
}

fn now_unix() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// Formats Unix seconds as `YYYY-MM-DD HH:MM:SS` UTC.
fn format_utc(unix: f64) -> String {
    let secs = unix.floor() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil-from-days, H. Hinnant's algorithm (proleptic Gregorian calendar).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Formats a byte count with binary units (`1.50 GiB`).
fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = bytes as f64;
    let mut i = 0;
    while v >= 1024.0 && i < UNITS.len() - 1 {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.2} {}", UNITS[i])
    }
}

/// Formats a rate in bits per second as Gb/s, Mb/s or kb/s.
fn human_rate(bps: f64) -> String {
    if bps >= 1e9 {
        format!("{:.2} Gb/s", bps / 1e9)
    } else if bps >= 1e6 {
        format!("{:.1} Mb/s", bps / 1e6)
    } else {
        format!("{:.1} kb/s", bps / 1e3)
    }
}

/// Formats a duration in seconds (`950ms`, `12.3s`, `4m05s`, `2h03m`).
fn human_duration(s: f64) -> String {
    if s < 1.0 {
        format!("{:.0}ms", s * 1e3)
    } else if s < 60.0 {
        format!("{s:.1}s")
    } else if s < 3600.0 {
        format!("{}m{:02}s", (s / 60.0) as u64, (s % 60.0) as u64)
    } else {
        format!("{}h{:02}m", (s / 3600.0) as u64, (s % 3600.0 / 60.0) as u64)
    }
}

fn write_table(out: &mut impl Write, records: &[TransferRecord]) -> std::io::Result<()> {
    let header = [
        "ID",
        "WHEN (UTC)",
        "KIND",
        "SOURCE → DESTINATION",
        "BYTES",
        "TIME",
        "RATE",
        "OUTCOME",
    ];
    let rows: Vec<[String; 8]> = records
        .iter()
        .map(|r| {
            [
                r.id.map(|i| i.to_string()).unwrap_or_default(),
                format_utc(r.started_at),
                r.kind.clone(),
                format!("{} → {}", r.source, r.destination),
                human_bytes(r.bytes),
                human_duration(r.duration_s),
                human_rate(r.mean_bps()),
                r.outcome.to_string(),
            ]
        })
        .collect();
    let mut widths = header.map(|h| h.chars().count());
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let right_aligned = [true, false, false, false, true, true, true, false];
    let line = |cells: &[String]| {
        let parts: Vec<String> = cells
            .iter()
            .zip(widths)
            .zip(right_aligned)
            .map(|((c, w), right)| {
                if right {
                    format!("{c:>w$}")
                } else {
                    format!("{c:<w$}")
                }
            })
            .collect();
        parts.join("  ").trim_end().to_owned()
    };
    writeln!(out, "{}", line(&header.map(String::from)))?;
    for row in &rows {
        writeln!(out, "{}", line(row))?;
    }
    Ok(())
}

fn write_detail(out: &mut impl Write, r: &TransferRecord) -> std::io::Result<()> {
    let p = &r.params;
    let opt = |v: Option<String>| v.unwrap_or_else(|| "-".into());
    writeln!(out, "transfer {}  ({})", r.id.unwrap_or_default(), r.kind)?;
    writeln!(out, "  started      {} UTC", format_utc(r.started_at))?;
    writeln!(out, "  source       {}  [{}]", r.source, r.source_host)?;
    writeln!(
        out,
        "  destination  {}  [{}]",
        r.destination, r.destination_host
    )?;
    writeln!(
        out,
        "  moved        {} files, {} ({} bytes)",
        r.files,
        human_bytes(r.bytes),
        r.bytes
    )?;
    writeln!(
        out,
        "  duration     {}  mean {}",
        human_duration(r.duration_s),
        human_rate(r.mean_bps())
    )?;
    writeln!(out, "  outcome      {}", r.outcome)?;
    if let Some(e) = &r.error {
        writeln!(out, "  error        {e}")?;
    }
    writeln!(
        out,
        "  params       parallelism={} concurrency={} pipelining={} tcp_buffer={} block_size={} checksum={} transport={}",
        opt(p.parallelism.map(|v| v.to_string())),
        opt(p.concurrency.map(|v| v.to_string())),
        opt(p.pipelining.map(|v| v.to_string())),
        opt(p.tcp_buffer.map(human_bytes)),
        opt(p.block_size.map(human_bytes)),
        opt(p.checksum.clone()),
        opt(p.transport.clone()),
    )?;
    if !p.extra.is_null() {
        writeln!(out, "  extra        {}", p.extra)?;
    }
    if r.samples.is_empty() {
        return writeln!(out, "  no throughput samples");
    }
    writeln!(out, "  {:>8}  {:>12}  {:>12}", "T (s)", "BYTES", "RATE")?;
    for s in &r.samples {
        writeln!(
            out,
            "  {:>8.2}  {:>12}  {:>12}",
            s.t_s,
            human_bytes(s.bytes),
            human_rate(s.bps)
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_formatting_matches_known_dates() {
        assert_eq!(format_utc(0.0), "1970-01-01 00:00:00");
        assert_eq!(format_utc(951_782_400.0), "2000-02-29 00:00:00");
        assert_eq!(format_utc(1_700_000_000.5), "2023-11-14 22:13:20");
    }

    #[test]
    fn since_accepts_durations_and_unix_times() {
        assert_eq!(parse_since("1700000000"), Ok(1_700_000_000.0));
        let day_ago = parse_since("24h").expect("24h");
        assert!((now_unix() - 86_400.0 - day_ago).abs() < 5.0);
        assert_eq!(parse_duration("2w"), Ok(1_209_600.0));
        assert!(parse_since("yesterday").is_err());
        assert!(parse_since("5y").is_err());
    }

    #[test]
    fn human_units() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(3 << 29), "1.50 GiB");
        assert_eq!(human_rate(9.4e9), "9.40 Gb/s");
        assert_eq!(human_rate(250e6), "250.0 Mb/s");
        assert_eq!(human_duration(0.25), "250ms");
        assert_eq!(human_duration(245.0), "4m05s");
    }

    #[derive(clap::Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    fn replay_args(extra: &[&str]) -> ReplayArgs {
        use clap::Parser;
        let argv = ["haul-history", "replay"].iter().chain(extra).copied();
        match Cli::try_parse_from(argv).expect("parses").args.action {
            Some(Action::Replay(r)) => r,
            None => panic!("no replay"),
        }
    }

    /// A 100 ms `cp` record: `setup` empty intervals, a 0.5 s ramp, then `plateau` bits/s.
    fn record(id: i64, setup: usize, plateau: f64, n: usize) -> TransferRecord {
        let samples: Vec<haul_store::Sample> = (0..n)
            .map(|i| {
                let k = i.saturating_sub(setup) as f64;
                let bps = if i < setup {
                    0.0
                } else {
                    plateau * (k + 1.0).min(5.0) / 5.0
                };
                haul_store::Sample {
                    t_s: (i + 1) as f64 * 0.1,
                    bytes: (bps * 0.1 / 8.0) as u64,
                    bps,
                }
            })
            .collect();
        let bytes = samples.iter().map(|s| s.bytes).sum();
        TransferRecord {
            id: Some(id),
            kind: "cp".into(),
            started_at: 1_700_000_000.0 + id as f64,
            duration_s: n as f64 * 0.1,
            source: "ftp://b:2811/dev/zero".into(),
            destination: "/dev/null".into(),
            source_host: "b:2811".into(),
            destination_host: "local".into(),
            params: haul_store::Params {
                parallelism: Some(4),
                ..haul_store::Params::default()
            },
            files: 1,
            bytes,
            outcome: Outcome::Ok,
            error: None,
            samples,
        }
    }

    #[test]
    fn replay_defaults_and_id_ranges() {
        let a = replay_args(&[]);
        assert_eq!((a.kind.as_str(), a.min_readings, a.theta), ("cp", 20, 0.10));
        assert_eq!(a.min_window, EarlyStop::RECOMMENDED_MIN_WINDOW_S);
        let a = replay_args(&[
            "--ids",
            "1-11,26-30, 40",
            "--min-window",
            "0",
            "--resample-ms",
            "200",
        ]);
        let ids = a.ids.expect("ids");
        assert!(ids.contains(1) && ids.contains(11) && ids.contains(28) && ids.contains(40));
        assert!(!ids.contains(12) && !ids.contains(0));
        assert!(parse_ids("3-1").is_err() && parse_ids("x").is_err() && parse_ids("").is_err());
        use clap::Parser;
        assert!(
            Cli::try_parse_from(["h", "--limit", "3", "replay"]).is_err(),
            "listing flags do not mix with replay"
        );
        assert!(check_replay_args(&replay_args(&["--theta", "0"])).is_err());
    }

    #[test]
    fn replay_runs_every_model_on_qualifying_traces() {
        let records = vec![
            record(3, 15, 800e6, 200),
            record(2, 0, 400e6, 150),
            record(1, 5, 100e6, 12),
        ];
        let out = replay_records(&records, &replay_args(&[]), "mem").expect("replay");
        // Record 1 has only 7 readings after its first byte.
        assert_eq!((out.traces.len(), out.skipped), (2, 1));
        assert_eq!(
            out.traces.iter().map(|t| t.id).collect::<Vec<_>>(),
            vec![Some(2), Some(3)],
            "oldest first"
        );
        assert_eq!(out.reports.len(), 5);
        let ar = &out.reports[0];
        assert_eq!(ar.model, "AR(2)");
        assert_eq!(ar.traces, 2);
        // Clean ramps to a plateau: converged after the 1.5 s window, close to the average.
        assert_eq!(ar.converged_pct, 100.0);
        assert!(ar.mean_time_s > 1.49 && ar.mean_time_s < 3.0, "{ar:?}");
        assert!(
            ar.mean_error_pct < 5.0 && ar.within_bar_pct == 100.0,
            "{ar:?}"
        );
        // Setup intervals are dropped: record 3 starts at its first byte.
        assert_eq!(out.traces[1].readings, 185);
        let kept =
            replay_records(&records, &replay_args(&["--keep-setup"]), "mem").expect("replay");
        assert_eq!(kept.traces[1].readings, 200);
        assert!(kept.traces[1].average_bps < out.traces[1].average_bps);
        // Resampled to 200 ms, and filtered by interval.
        let r = replay_records(&records, &replay_args(&["--resample-ms", "200"]), "mem")
            .expect("replay");
        assert!((r.traces[0].dt - 0.2).abs() < 1e-9 && r.traces[0].readings == 75);
        let none = replay_records(&records, &replay_args(&["--sample-ms", "1000"]), "mem")
            .expect("replay");
        assert!(none.traces.is_empty());
        let mut text = Vec::new();
        write_replay(&mut text, &out, true).expect("write");
        let text = String::from_utf8(text).expect("utf-8");
        assert!(
            text.contains("AR(2)")
                && text.contains("oracle (4-point window)")
                && text.contains("<10% BY 3s"),
            "{text}"
        );
        serde_json::to_string(&out).expect("JSON");
    }
}
