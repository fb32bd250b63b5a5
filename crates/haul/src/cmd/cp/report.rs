//! Reporting a `haul cp`: the summary on stdout (human or `--json`) and the record in the
//! history store.

use haul_store::{Outcome, Params, Store, TransferRecord};
use haul_xfer::autotune;
use haul_xfer::{Endpoint, Options, Summary};

use super::args::{transport_name, Args};
use crate::cmd::{human_bytes, human_rate};

/// Prints the summary of a finished transfer: JSON with `--json`, one line unless `--quiet`
/// or `--progress json`.
pub(super) fn print(
    args: &Args,
    opts: &Options,
    summary: &Summary,
    tuning: &[autotune::TuneStep],
) -> anyhow::Result<()> {
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json_summary(args, opts, summary, tuning))?
        );
    } else if !args.quiet && args.progress != super::progress::Mode::Json {
        // With --progress json, stdout holds the events alone: the end event is the summary.
        println!("{}", human_summary(args, summary));
    }
    Ok(())
}

/// The one-line summary: files, bytes, time, rate, how the files were checked and re-sends.
fn human_summary(args: &Args, s: &Summary) -> String {
    let verify = match (&s.checksum, args.no_verify) {
        (Some(a), _) => format!("{} of {} verified ({a})", s.verified, s.files),
        (None, true) => "NOT verified: --no-verify was given, nothing was checked".into(),
        (None, false) => "nothing to verify (memory-to-memory)".into(),
    };
    format!(
        "{} files, {} in {:.2} s, {}; {}{}{}",
        s.files,
        human_bytes(s.bytes),
        s.duration_s,
        human_rate(s.mean_bps()),
        verify,
        if s.retransferred > 0 {
            format!("; {} re-sent after checksum mismatch", s.retransferred)
        } else {
            String::new()
        },
        if s.chunks_resent_bytes > 0 {
            format!(
                "; {} of mismatched chunks re-sent",
                human_bytes(s.chunks_resent_bytes)
            )
        } else {
            String::new()
        }
    )
}

pub(super) use crate::cmd::now_unix;

/// How the files were checked, for `--json`: `checksum`, or why not.
fn verification(args: &Args, s: &Summary) -> &'static str {
    match (&s.checksum, args.no_verify) {
        (Some(_), _) => "checksum",
        (None, true) => "skipped: --no-verify, nothing was checked",
        (None, false) => "not applicable: memory-to-memory",
    }
}

/// The `--json` summary of a finished transfer.
fn json_summary(
    args: &Args,
    opts: &Options,
    s: &Summary,
    tuning: &[autotune::TuneStep],
) -> serde_json::Value {
    serde_json::json!({
        "source": args.src,
        "destination": args.dst,
        "route": {
            "source": crate::cmd::route(&args.src),
            "destination": crate::cmd::route(&args.dst),
        },
        "outcome": "ok",
        "files": s.files,
        "bytes": s.bytes,
        "duration_s": s.duration_s,
        "throughput_bps": s.mean_bps(),
        "verification": verification(args, s),
        "verified_files": s.verified,
        "unverified_files": s.files.saturating_sub(s.verified),
        "retransferred_files": s.retransferred,
        "chunks_resent_bytes": s.chunks_resent_bytes,
        "checksum": s.checksum,
        "parallelism": opts.parallelism,
        "block": opts.block,
        "tcp_buffer": opts.tcp_buffer,
        "concurrency": args.concurrency,
        "pipeline": args.pipeline,
        "transport": transport_name(args.transport),
        "clusters": s.clusters,
        "pieces": s.pieces,
        "samples": s.samples,
        "tuning": tuning,
        "rerouted": args.rerouted,
    })
}

/// What the history keeps beyond the common parameters: the tuner's steps and the clusters.
fn extra(tuning: &[autotune::TuneStep], clusters: &[haul_xfer::ClusterInfo]) -> serde_json::Value {
    let mut m = serde_json::Map::new();
    if !tuning.is_empty() {
        m.insert("tuning".into(), serde_json::json!(tuning));
    }
    if !clusters.is_empty() {
        m.insert("clusters".into(), serde_json::json!(clusters));
    }
    if m.is_empty() {
        serde_json::Value::Null
    } else {
        serde_json::Value::Object(m)
    }
}

/// `extra` with the route `--route auto` chose (its relays and prediction), when it chose one,
/// and what `haul send` planned.
fn with_route(extra: serde_json::Value, args: &Args) -> serde_json::Value {
    if args.chosen.is_none() && args.send.is_none() {
        return extra;
    }
    let mut m = match extra {
        serde_json::Value::Object(m) => m,
        _ => serde_json::Map::new(),
    };
    if let Some((relays, predicted)) = &args.chosen {
        m.insert(
            "route".into(),
            serde_json::json!({"relays": relays, "predicted_bps": predicted}),
        );
    }
    if let Some(send) = &args.send {
        m.insert("send".into(), send.clone());
    }
    serde_json::Value::Object(m)
}

/// Records the transfer, finished or failed, in the history store; a store that cannot be
/// opened or written is a warning, not an error.
pub(super) fn record(
    args: &Args,
    src: &Endpoint,
    dst: &Endpoint,
    opts: &Options,
    started_at: f64,
    (result, stopped): (
        &Result<Summary, haul_xfer::XferError>,
        &Option<super::watch::Stopped>,
    ),
    tuning: &[autotune::TuneStep],
) {
    let path = args.history.clone().unwrap_or_else(Store::default_path);
    let mut store = match Store::open(&path) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!("history not recorded: {e}");
            return;
        }
    };
    let (outcome, error, files, bytes, samples, duration) = match result {
        Ok(s) => (
            if stopped.is_some() {
                Outcome::Interrupted
            } else {
                Outcome::Ok
            },
            stopped.as_ref().map(|s| format!("stopped: {}", s.why)),
            s.files,
            s.bytes,
            s.samples
                .iter()
                .map(|x| haul_store::Sample {
                    t_s: x.t_s,
                    bytes: x.bytes,
                    bps: x.bps,
                })
                .collect(),
            s.duration_s,
        ),
        Err(e) => (
            Outcome::Failed,
            Some(e.to_string()),
            0,
            0,
            Vec::new(),
            now_unix() - started_at,
        ),
    };
    let rec = TransferRecord {
        id: None,
        kind: args.kind.unwrap_or("cp").into(),
        started_at,
        duration_s: duration,
        source: src.to_string(),
        destination: dst.to_string(),
        source_host: crate::cmd::host_id(src),
        destination_host: crate::cmd::host_id(dst),
        params: Params {
            parallelism: Some(opts.parallelism),
            concurrency: Some(tuning.last().map_or(opts.concurrency, |s| s.next)),
            pipelining: Some(opts.pipeline as u32),
            tcp_buffer: opts.tcp_buffer.map(|b| b as u64),
            block_size: Some(opts.block as u64),
            checksum: result.as_ref().ok().and_then(|s| s.checksum.clone()),
            transport: Some(transport_name(opts.transport).into()),
            extra: with_route(
                extra(
                    tuning,
                    result.as_ref().map(|s| &s.clusters[..]).unwrap_or_default(),
                ),
                args,
            ),
        },
        files,
        bytes,
        outcome,
        error,
        samples,
    };
    if let Err(e) = store.insert(&rec) {
        tracing::warn!("history not recorded: {e}");
    }
}
