//! `haul history predict`: each host pair's throughput prediction from its recorded transfers,
//! with the predictor the NWS-style selector chose and its recent error; with `--replay`, how
//! accurate every predictor would have been on the whole history (002 §5.3.5, Table 5.3).

use super::{human_duration, human_rate, parse_since, write_aligned};
use crate::cmd::{now_unix, parse_bytes};
use haul_store::{Filter, Outcome, Store};
use haul_tune::predict::accuracy::{self, Column, ErrorSummary};
use haul_tune::predict::{Measurement, Selector};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `haul history predict`.
#[derive(clap::Args, Debug)]
pub(super) struct PredictArgs {
    /// History database; repeat it to pool several hosts' histories (pairs stay per database)
    /// [default: $HAUL_HISTORY, else $XDG_DATA_HOME/haul/history.sqlite].
    #[arg(long = "history", value_name = "PATH")]
    histories: Vec<PathBuf>,
    /// Only records of this kind (`cp`: the client's copies; `serve`: what a server served).
    #[arg(long, value_name = "K", default_value = "cp")]
    kind: String,
    /// Only pairs where either end's host contains this text.
    #[arg(long, value_name = "H")]
    host: Option<String>,
    /// Only transfers started within this long (24h, 30m, 7d) or since this Unix time.
    #[arg(long, value_name = "WHEN", value_parser = parse_since)]
    since: Option<f64>,
    /// Leave out transfers smaller than this: they measure set-up more than throughput.
    #[arg(long, value_name = "BYTES", default_value = "1MiB", value_parser = parse_bytes)]
    min_bytes: u64,
    /// Evaluate every predictor on the history: each transfer predicted from the ones before it.
    #[arg(long)]
    replay: bool,
    /// With --replay: measurements of a pair that are only history, not predicted.
    #[arg(long, value_name = "N", default_value_t = 1)]
    warmup: usize,
    /// With --replay: also print each pair's median error per predictor.
    #[arg(long, requires = "replay")]
    per_pair: bool,
    /// Print JSON instead of tables.
    #[arg(long)]
    json: bool,
}

/// A pair's measurements, keyed for display: database label, source, destination, transport.
type Pairs = BTreeMap<(String, String, String, String), Vec<Measurement>>;

/// What was read, and what was left out and why.
#[derive(Debug, Default, serde::Serialize)]
struct Corpus {
    databases: Vec<String>,
    used: usize,
    not_ok: usize,
    small: usize,
    relayed: usize,
}

/// Runs `haul history predict`.
pub(super) fn run(args: PredictArgs) -> anyhow::Result<ExitCode> {
    let mut paths = args.histories.clone();
    if paths.is_empty() {
        paths.push(
            std::env::var_os("HAUL_HISTORY")
                .map(PathBuf::from)
                .unwrap_or_else(Store::default_path),
        );
    }
    let (pairs, corpus) = read(&paths, &args)?;
    let selector = Selector::default();
    let mut out = std::io::stdout().lock();
    if args.replay {
        replay(&mut out, &args, &pairs, &corpus, &selector)?;
    } else {
        current(&mut out, &args, &pairs, &corpus, &selector)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Reads every database's transfers of the kind into per-pair histories, oldest first.
fn read(paths: &[PathBuf], args: &PredictArgs) -> anyhow::Result<(Pairs, Corpus)> {
    let mut pairs = Pairs::new();
    let mut corpus = Corpus::default();
    let label = |p: &PathBuf| {
        if paths.len() > 1 {
            p.file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default()
        } else {
            String::new()
        }
    };
    for path in paths {
        corpus.databases.push(path.display().to_string());
        // A missing database is an empty history; reading never creates one.
        if !path.exists() {
            continue;
        }
        let rows = Store::open(path)?.list(&Filter {
            kind: Some(args.kind.clone()),
            host: args.host.clone(),
            since: args.since,
            ..Filter::default()
        })?;
        for r in rows {
            if r.outcome != Outcome::Ok || r.duration_s <= 0.0 {
                corpus.not_ok += 1;
            } else if r.bytes < args.min_bytes {
                corpus.small += 1;
            } else if crate::cmd::relayed(&r) {
                // The whole route's throughput, not one leg's.
                corpus.relayed += 1;
            } else {
                corpus.used += 1;
                let key = (
                    label(path),
                    r.source_host.clone(),
                    r.destination_host.clone(),
                    r.params.transport.clone().unwrap_or_else(|| "tcp".into()),
                );
                let m = Measurement::new(r.started_at + r.duration_s, r.mean_bps());
                pairs.entry(key).or_default().push(m);
            }
        }
    }
    for ms in pairs.values_mut() {
        ms.sort_by(|a, b| a.at.total_cmp(&b.at));
    }
    Ok((pairs, corpus))
}

fn pair_name((db, src, dst, transport): &(String, String, String, String)) -> String {
    let mut s = if db.is_empty() {
        format!("{src} → {dst}")
    } else {
        format!("{db}: {src} → {dst}")
    };
    if transport != "tcp" {
        s.push_str(&format!(" ({transport})"));
    }
    s
}

fn skipped(c: &Corpus) -> String {
    format!(
        "{} transfers used; left out: {} not ok, {} small, {} relayed",
        c.used, c.not_ok, c.small, c.relayed
    )
}

/// One pair's current prediction.
#[derive(Debug, serde::Serialize)]
struct PairPrediction {
    pair: String,
    measurements: usize,
    bps: f64,
    predictor: String,
    age_s: f64,
    samples: usize,
    /// The chosen predictor's mean absolute % error over its recent steps.
    recent_error_pct: Option<f64>,
}

fn current(
    out: &mut impl Write,
    args: &PredictArgs,
    pairs: &Pairs,
    corpus: &Corpus,
    selector: &Selector,
) -> anyhow::Result<()> {
    let now = now_unix();
    let rows: Vec<PairPrediction> = pairs
        .iter()
        .filter_map(|(k, ms)| {
            let p = selector.predict(ms, now)?;
            Some(PairPrediction {
                pair: pair_name(k),
                measurements: ms.len(),
                bps: p.bps,
                predictor: p.predictor.to_string(),
                age_s: p.age_s,
                samples: p.samples,
                recent_error_pct: p.error_pct,
            })
        })
        .collect();
    if args.json {
        let v = serde_json::json!({ "corpus": corpus, "pairs": rows });
        writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
        return Ok(());
    }
    writeln!(out, "{} pairs; {}", rows.len(), skipped(corpus))?;
    if rows.is_empty() {
        return Ok(());
    }
    let header = [
        "PAIR",
        "TRANSFERS",
        "PREDICTION",
        "PREDICTOR",
        "SAMPLES",
        "AGE",
        "RECENT ERR",
    ];
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.pair.clone(),
                r.measurements.to_string(),
                human_rate(r.bps),
                r.predictor.clone(),
                r.samples.to_string(),
                human_duration(r.age_s),
                pct(r.recent_error_pct),
            ]
        })
        .collect();
    let right = [false, true, true, false, true, true, true];
    write_aligned(out, &header, &cells, &right)?;
    Ok(())
}

fn pct(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |e| format!("{e:.1}%"))
}

/// One predictor's record over the whole corpus.
#[derive(Debug, serde::Serialize)]
struct ColumnReport {
    predictor: String,
    #[serde(flatten)]
    summary: Option<ErrorSummary>,
}

/// One pair's median error per predictor.
#[derive(Debug, serde::Serialize)]
struct PairReport {
    pair: String,
    steps: usize,
    median_error_pct: Vec<Option<f64>>,
}

fn replay(
    out: &mut impl Write,
    args: &PredictArgs,
    pairs: &Pairs,
    corpus: &Corpus,
    selector: &Selector,
) -> anyhow::Result<()> {
    let columns = accuracy::columns(selector);
    let mut all: Vec<Vec<f64>> = vec![Vec::new(); columns.len()];
    let mut per_pair = Vec::new();
    for (k, ms) in pairs {
        let steps = accuracy::replay(ms, selector, args.warmup);
        if steps.is_empty() {
            continue;
        }
        let mut mine: Vec<Vec<f64>> = vec![Vec::new(); columns.len()];
        for s in &steps {
            for (c, e) in s.errors().enumerate() {
                if let Some(e) = e {
                    mine[c].push(e);
                }
            }
        }
        per_pair.push(PairReport {
            pair: pair_name(k),
            steps: steps.len(),
            median_error_pct: mine
                .iter()
                .map(|e| accuracy::summarize(e).map(|s| s.median))
                .collect(),
        });
        for (a, m) in all.iter_mut().zip(mine) {
            a.extend(m);
        }
    }
    let reports: Vec<ColumnReport> = columns
        .iter()
        .zip(&all)
        .map(|(c, e)| ColumnReport {
            predictor: c.to_string(),
            summary: accuracy::summarize(e),
        })
        .collect();
    if args.json {
        let v = serde_json::json!({
            "corpus": corpus,
            "pairs_replayed": per_pair.len(),
            "warmup": args.warmup,
            "predictors": reports,
            "per_pair": args.per_pair.then_some(&per_pair),
        });
        writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
        return Ok(());
    }
    writeln!(
        out,
        "{} pairs replayed (each transfer predicted from the ones before it, after {} of history); {}",
        per_pair.len(),
        args.warmup.max(1),
        skipped(corpus)
    )?;
    let header = ["PREDICTOR", "STEPS", "MEAN ERR", "MEDIAN ERR", "SD", "P90"];
    let cells: Vec<Vec<String>> = reports
        .iter()
        .map(|r| {
            let s = r.summary;
            let f = |g: fn(&ErrorSummary) -> f64| pct(s.as_ref().map(g));
            vec![
                r.predictor.clone(),
                s.map_or(0, |s| s.steps).to_string(),
                f(|s| s.mean),
                f(|s| s.median),
                f(|s| s.sd),
                f(|s| s.p90),
            ]
        })
        .collect();
    write_aligned(out, &header, &cells, &[false, true, true, true, true, true])?;
    if args.per_pair && !per_pair.is_empty() {
        writeln!(out)?;
        write_per_pair(out, &columns, &per_pair)?;
    }
    Ok(())
}

/// Each pair's median error per predictor, one row per pair.
fn write_per_pair(
    out: &mut impl Write,
    columns: &[Column],
    per_pair: &[PairReport],
) -> std::io::Result<()> {
    let mut header = vec!["PAIR".to_string(), "STEPS".to_string()];
    header.extend(columns.iter().map(|c| format!("{c} MED")));
    let cells: Vec<Vec<String>> = per_pair
        .iter()
        .map(|p| {
            let mut row = vec![p.pair.clone(), p.steps.to_string()];
            row.extend(p.median_error_pct.iter().map(|e| pct(*e)));
            row
        })
        .collect();
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    let mut right = vec![true; header.len()];
    right[0] = false;
    write_aligned(out, &header, &cells, &right)
}
