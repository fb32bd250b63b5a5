//! `--progress`: how a running copy shows itself. `auto`, a bar on a terminal; `none`; `json`,
//! one JSON object a line for each event (`start`, `interval`, `file`, `end`) for orchestrators
//! (docs/cli.md has the schema). The engine reports each file as it ends
//! ([`haul_xfer::engine::Observer`]) and a throughput sample each interval; this turns them
//! into lines.

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use haul_proto::command::ModTime;
use haul_xfer::engine::{FileOutcome, FileReport, Observer, Sample};
use haul_xfer::plan::Job;
use haul_xfer::{Options, XferError};
use serde_json::{json, Value};

use super::args::{transport_name, Args};
use super::Copied;

/// `--progress`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// A progress bar on stderr when it is a terminal (not with `--quiet` or `--json`).
    #[default]
    Auto,
    /// No progress.
    None,
    /// JSON lines: on stdout, or on stderr when `--json` prints its summary on stdout.
    Json,
}

/// Where the lines go.
enum Out {
    Stdout,
    Stderr,
    #[cfg(test)]
    Buffer(Arc<Mutex<Vec<u8>>>),
}

/// What the events have counted so far.
#[derive(Default)]
struct Tally {
    planned: u64,
    ok: u64,
    /// Of `ok`, the files verified, and with which algorithm.
    verified: u64,
    alg: Option<&'static str>,
    failed: u64,
    skipped: u64,
    /// Bytes of the samples so far: what the engine had moved at the last one.
    bytes: u64,
    /// Destinations reported failed, which are not reported again as skipped.
    failed_dsts: HashSet<String>,
}

/// The JSON-lines writer of one copy: every line is written whole, under one lock, so lines
/// from the engine's session threads and from the copy's own thread never mix.
pub struct Events {
    out: Mutex<Out>,
    started: Instant,
    tally: Mutex<Tally>,
}

impl std::fmt::Debug for Events {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Events")
    }
}

impl Events {
    /// The events of a copy with these arguments, when `--progress json` asks for them.
    pub fn for_args(args: &Args) -> Option<Arc<Events>> {
        (args.progress == Mode::Json).then(|| {
            Arc::new(Events::to(if args.json {
                Out::Stderr
            } else {
                Out::Stdout
            }))
        })
    }

    fn to(out: Out) -> Events {
        Events {
            out: Mutex::new(out),
            started: Instant::now(),
            tally: Mutex::new(Tally::default()),
        }
    }

    /// Writes one event: `event`, `t` (seconds since the copy began) and `time` (RFC 3339,
    /// UTC) first, then `fields` (an object).
    fn emit(&self, event: &str, fields: Value) {
        let Ok(mut out) = self.out.lock() else { return };
        let line = event_line(
            event,
            self.started.elapsed().as_secs_f64(),
            SystemTime::now(),
            &fields,
        );
        let written = match &mut *out {
            Out::Stdout => writeln!(std::io::stdout().lock(), "{line}"),
            Out::Stderr => writeln!(std::io::stderr().lock(), "{line}"),
            #[cfg(test)]
            Out::Buffer(b) => writeln!(b.lock().unwrap(), "{line}"),
        };
        // A closed pipe (an orchestrator that stopped reading) must not stop the copy.
        if let Err(e) = written {
            tracing::debug!("progress event not written: {e}");
        }
    }

    fn tally(&self) -> std::sync::MutexGuard<'_, Tally> {
        self.tally.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `start`: what is planned and how it will move.
    pub fn start(&self, args: &Args, opts: &Options, files: usize, bytes: u64) {
        self.tally().planned = files as u64;
        self.emit(
            "start",
            json!({
                "source": args.src,
                "destination": args.dst,
                "files": files,
                "bytes": bytes,
                "transport": transport_name(opts.transport),
                "concurrency": opts.concurrency,
                "parallelism": opts.parallelism,
                "pipeline": opts.pipeline,
                "verify": opts.verify,
                "resume": opts.resume,
            }),
        );
    }

    /// `interval`: one throughput sample, with `active` files held by `sessions` sessions.
    pub fn interval(&self, s: &Sample, active: usize, sessions: u32) {
        let fields = {
            let mut t = self.tally();
            t.bytes += s.bytes;
            interval_fields(s, t.bytes, t.ok + t.failed, active, sessions)
        };
        self.emit("interval", fields);
    }

    /// The observer that reports each file the engine finishes as a `file` event.
    pub fn observer(self: &Arc<Self>) -> Observer {
        let me = self.clone();
        Observer(Arc::new(move |r: &FileReport| me.file(r)))
    }

    /// `file`: one file arrived or failed.
    fn file(&self, r: &FileReport) {
        {
            let mut t = self.tally();
            match &r.outcome {
                FileOutcome::Ok => {
                    t.ok += 1;
                    if let Some((a, _)) = &r.checksum {
                        t.verified += 1;
                        t.alg = Some(a.name());
                    }
                }
                FileOutcome::Failed { .. } => {
                    t.failed += 1;
                    t.failed_dsts.insert(r.dst.clone());
                }
            }
        }
        self.emit("file", file_fields(r));
    }

    /// `file` with `"outcome": "skipped"` for every planned job whose destination is
    /// `missing` (did not arrive) and was not reported failed: the transfer stopped before
    /// it (`why`).
    pub fn skipped(&self, jobs: &[Job], missing: &[String], why: &str) {
        let mut owed: HashMap<&str, usize> = HashMap::new();
        for m in missing {
            *owed.entry(m.as_str()).or_default() += 1;
        }
        for j in jobs {
            let Some(n) = owed.get_mut(j.dst.as_str()).filter(|n| **n > 0) else {
                continue;
            };
            *n -= 1;
            let failed = {
                let mut t = self.tally();
                let failed = t.failed_dsts.remove(&j.dst);
                if !failed {
                    t.skipped += 1;
                }
                failed
            };
            if !failed {
                self.emit("file", skipped_fields(j, why));
            }
        }
    }

    /// `end`: how the copy ended (`r`), with the files' counts.
    pub fn end(&self, r: &anyhow::Result<Copied>) {
        let fields = {
            let t = self.tally();
            end_fields(&t, r, self.started.elapsed().as_secs_f64())
        };
        self.emit("end", fields);
    }
}

/// One event's line: `event`, `t` and `time` first, then the fields of `fields` (an object).
fn event_line(event: &str, t: f64, now: SystemTime, fields: &Value) -> String {
    let head = json!({ "event": event }).to_string();
    let mut line = format!(
        "{},\"t\":{},\"time\":\"{}\"",
        &head[..head.len() - 1],
        json!(round3(t)),
        rfc3339(now)
    );
    if let Some(rest) = fields
        .as_object()
        .filter(|m| !m.is_empty())
        .map(|_| fields.to_string())
    {
        line.push(',');
        line.push_str(&rest[1..]);
    } else {
        line.push('}');
    }
    line
}

/// `x` to the millisecond (or the microsecond's thousandth), for shorter lines.
fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// `time` as RFC 3339 in UTC with milliseconds, `2026-11-28T07:40:01.123Z`.
fn rfc3339(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let c = ModTime::from_unix(d.as_secs() as i64);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        c.year,
        c.month,
        c.day,
        c.hour,
        c.minute,
        c.second,
        d.subsec_millis()
    )
}

/// The fields of an `interval` event: sample `s`, after which `bytes` had moved in all and
/// `files` had ended.
fn interval_fields(s: &Sample, bytes: u64, files: u64, active: usize, sessions: u32) -> Value {
    json!({
        "bytes": bytes,
        "files": files,
        "bytes_per_s": round3(s.bps / 8.0),
        "avg_bytes_per_s": round3(if s.t_s > 0.0 { bytes as f64 / s.t_s } else { 0.0 }),
        "active_files": active,
        "sessions": sessions,
    })
}

/// The fields of a `file` event that reports `r`.
fn file_fields(r: &FileReport) -> Value {
    let mut v = json!({
        "source": r.src,
        "destination": r.dst,
        "size": r.size,
        "bytes": r.bytes,
        "elapsed_s": round3(r.elapsed_s),
        "bytes_per_s": round3(r.bytes_per_s()),
        "checksum": r.checksum.as_ref().map(|(a, d)| json!({"algorithm": a.name(), "value": d})),
        "resumed": r.resumed,
    });
    match &r.outcome {
        FileOutcome::Ok => v["outcome"] = json!("ok"),
        FileOutcome::Failed { error, kind } => {
            v["outcome"] = json!("failed");
            v["error"] = json!(error);
            v["error_kind"] = json!(kind);
        }
    }
    v
}

/// The fields of a `file` event for `j`, which the transfer stopped before (`why`).
fn skipped_fields(j: &Job, why: &str) -> Value {
    json!({
        "source": j.src,
        "destination": j.dst,
        "size": j.size,
        "bytes": 0,
        "elapsed_s": null,
        "bytes_per_s": null,
        "checksum": null,
        "resumed": false,
        "outcome": "skipped",
        "reason": why,
    })
}

/// The fields of the `end` event of a copy that ended with `r`, `elapsed` seconds after it
/// began, with the files counted in `t`.
fn end_fields(t: &Tally, r: &anyhow::Result<Copied>, elapsed: f64) -> Value {
    let (status, code, error, kind) = match r {
        Ok(c) if c.stopped.is_some() => {
            let why = c.stopped.as_ref().map(|s| format!("stopped: {}", s.why));
            ("stopped", 0, why, None)
        }
        Ok(_) => ("ok", 0, None, None),
        Err(e) => (
            "failed",
            crate::cmd::exit_status(e),
            Some(format!("{e:#}")),
            Some(
                e.downcast_ref::<XferError>()
                    .map_or(haul_xfer::ErrorKind::Other, XferError::kind),
            ),
        ),
    };
    let (bytes, elapsed_s, verified, checksum) = match r {
        Ok(c) => (
            c.summary.bytes,
            c.summary.duration_s,
            c.summary.verified,
            c.summary.checksum.clone(),
        ),
        Err(_) => (t.bytes, elapsed, t.verified, t.alg.map(String::from)),
    };
    json!({
        "status": status,
        "exit_code": code,
        "files": t.planned,
        "files_ok": t.ok,
        "files_failed": t.failed,
        "files_skipped": t.skipped,
        "bytes": bytes,
        "elapsed_s": round3(elapsed_s),
        "avg_bytes_per_s": round3(if elapsed_s > 0.0 { bytes as f64 / elapsed_s } else { 0.0 }),
        "verified_files": verified,
        "checksum": checksum,
        "error": error,
        "error_kind": kind,
    })
}

#[cfg(test)]
#[path = "progress_tests.rs"]
mod tests;
