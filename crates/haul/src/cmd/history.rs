//! `haul history`: list, filter and show the recorded transfers (table or `--json`), and
//! `haul history replay`: replay the early-stopping estimators on the recorded traces, and
//! `haul history predict`: each pair's throughput prediction and the predictors' accuracy.

mod predict;
mod replay;

use anyhow::Context;
use haul_store::{Filter, Outcome, Store, TransferRecord};
use predict::PredictArgs;
use replay::ReplayArgs;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

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
    /// Each host pair's throughput prediction and its recent error; with --replay, every
    /// predictor's accuracy on the recorded history.
    Predict(PredictArgs),
}

/// Runs `haul history`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.action {
        Some(Action::Replay(r)) => return replay::run(r),
        Some(Action::Predict(p)) => return predict::run(p),
        None => {}
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

use crate::cmd::now_unix;

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

/// Prints the transfers as an aligned table, one row each.
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
    let rows: Vec<Vec<String>> = records
        .iter()
        .map(|r| {
            vec![
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
    let right_aligned = [true, false, false, false, true, true, true, false];
    write_aligned(out, &header, &rows, &right_aligned)
}

/// Prints `rows` under `header` in columns as wide as their widest cell, two spaces apart,
/// right-aligned where `right` says so.
fn write_aligned(
    out: &mut impl Write,
    header: &[&str],
    rows: &[Vec<String>],
    right: &[bool],
) -> std::io::Result<()> {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let parts: Vec<String> = cells
            .iter()
            .zip(&widths)
            .zip(right)
            .map(|((c, &w), &right)| {
                if right {
                    format!("{c:>w$}")
                } else {
                    format!("{c:<w$}")
                }
            })
            .collect();
        parts.join("  ").trim_end().to_owned()
    };
    writeln!(out, "{}", line(header.to_vec()))?;
    for row in rows {
        writeln!(out, "{}", line(row.iter().map(String::as_str).collect()))?;
    }
    Ok(())
}

/// Prints one transfer in full: endpoints, totals, parameters and throughput samples.
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
    for (end, url) in [("source", &r.source), ("destination", &r.destination)] {
        let hops = super::route(url);
        if hops.len() > 1 {
            writeln!(out, "  route        {end} via {}", hops.join(" -> "))?;
        }
    }
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
mod tests;
