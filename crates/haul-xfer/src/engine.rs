//! The transfer engine: a queue of files, worker sessions that take batches of them (one batch
//! = one pipeline window on one control channel), live knobs for concurrency and parallelism,
//! throughput samples, end-to-end verification with one re-transfer on mismatch, and restart
//! journals. A tuner (a later issue) drives [`Transfer::set_concurrency`] and
//! [`Transfer::set_parallelism`] while reading [`Transfer::samples`].

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use haul_transport::mode_e::Progress;

use crate::checksum::Algorithm;
use crate::error::XferError;
use crate::ledger::Ledger;
use crate::plan::Job;
use crate::schedule::{ClusterInfo, Queues};

mod ctx;
mod options;
mod report;
mod run;

pub(crate) use ctx::Ctx;
pub use options::{Options, Route, Sample, Summary, Transport};
pub(crate) use report::{Clock, Run};
pub use report::{FileOutcome, FileReport, Observer};

/// Files in flight by id: live counters and, for downloads, the ranges journal.
type Inflight = HashMap<u64, (Arc<Progress>, Option<PathBuf>)>;

/// What the engine's thread, its sessions and the [`Transfer`] handle share.
struct Shared {
    route: Route,
    opts: Options,
    /// Told what became of each file as it ends.
    observer: Option<Observer>,
    queue: Mutex<Queues>,
    concurrency: AtomicU32,
    /// Sessions running: above `concurrency` for a while after a decrease, since a session
    /// leaves only at the end of the file it is moving (a TCP download of whole files) or of its
    /// batch (a piece, a PLUT download, an upload, a server-to-server transfer).
    channels: AtomicU32,
    parallelism: AtomicU32,
    /// Set once [`Transfer::set_parallelism`] overrides the per-cluster parallelism.
    parallelism_set: AtomicBool,
    bytes: AtomicU64,
    files: AtomicU64,
    verified: AtomicU64,
    retransferred: AtomicU64,
    chunks_resent: AtomicU64,
    alg: Mutex<Option<Algorithm>>,
    stop: AtomicBool,
    /// Set by [`Transfer::abort`]: files in flight stop at their next block.
    aborted: AtomicBool,
    error: Mutex<Option<XferError>>,
    /// Every file planned and which arrived: success only when it balances.
    ledger: Mutex<Ledger>,
    /// Files in flight: live counters and, for downloads, the ranges journal to keep current.
    inflight: Mutex<Inflight>,
    next_id: AtomicU64,
    /// Split files by destination: pieces not yet landed.
    pieces: Mutex<HashMap<String, usize>>,
    pieces_landed: AtomicU64,
    /// Split files by destination: when their first piece started and the bytes their pieces
    /// moved, for their reports.
    piece_runs: Mutex<HashMap<String, (Instant, u64)>>,
    /// Destinations already reported failed: a split file whose pieces fail on two sessions is
    /// reported once.
    failed: Mutex<std::collections::HashSet<String>>,
    /// Each session's current batch by slot, kept only while `trace` logging of this module is
    /// on (see [`trace_sessions`]).
    batches: Mutex<HashMap<usize, BatchTrace>>,
}

/// What a session is moving, for the per-sample session trace.
#[derive(Debug, Clone, Copy)]
struct BatchTrace {
    taken: Instant,
    files: usize,
    bytes: u64,
    piece: bool,
}

/// True while `HAUL_LOG` asks for this module's `trace` events.
fn tracing_sessions() -> bool {
    tracing::enabled!(tracing::Level::TRACE)
}

/// With `HAUL_LOG=haul_xfer::engine=trace`, one line per sample: each running session's slot and
/// what its batch holds (`p` a piece, else whole files) with the batch's size and age. This is
/// how a lowered level's wait shows up: the sessions above the level and how long their batches
/// have run (docs/benchmarks.md, session 10).
fn trace_sessions(shared: &Shared, slots: &[Option<JoinHandle<()>>], s: &Sample, target: usize) {
    let Ok(b) = shared.batches.lock() else { return };
    let sessions: Vec<String> = slots
        .iter()
        .enumerate()
        .filter(|(_, h)| h.is_some())
        .map(|(i, _)| match b.get(&i) {
            Some(x) => format!(
                "{i}:{}{}/{:.1}MB/{:.1}s",
                if x.piece { "p" } else { "f" },
                x.files,
                x.bytes as f64 / 1e6,
                x.taken.elapsed().as_secs_f64()
            ),
            None => format!("{i}:-"),
        })
        .collect();
    tracing::trace!(
        t_s = s.t_s,
        mbps = s.bps / 1e6,
        level = target,
        "sessions {}",
        sessions.join(" ")
    );
}

/// A running transfer.
pub struct Transfer {
    shared: Arc<Shared>,
    samples: mpsc::Receiver<Sample>,
    handle: JoinHandle<Result<Summary, XferError>>,
}

impl Transfer {
    /// Starts moving `jobs` along `route`.
    pub fn start(route: Route, jobs: Vec<Job>, opts: Options) -> Transfer {
        Transfer::observed(route, jobs, opts, None)
    }

    /// Starts moving `jobs` along `route`, telling `observer` what became of each file as it
    /// ends (from the sessions' threads).
    pub fn observed(
        route: Route,
        jobs: Vec<Job>,
        opts: Options,
        observer: Option<Observer>,
    ) -> Transfer {
        let piece = piece_size(&route, &opts, &jobs);
        #[cfg(feature = "failpoints")]
        failpoints_from_env();
        let ledger = Ledger::new(jobs.iter().map(|j| j.dst.as_str()));
        let pieces = piece
            .map(|n| {
                jobs.iter()
                    .map(|j| (j.dst.clone(), crate::plan::piece_count(j.size, n) as usize))
                    .filter(|(_, k)| *k > 0)
                    .collect()
            })
            .unwrap_or_default();
        let shared = Arc::new(Shared {
            route,
            concurrency: AtomicU32::new(opts.concurrency.max(1)),
            channels: AtomicU32::new(0),
            parallelism: AtomicU32::new(opts.parallelism.clamp(1, 64)),
            queue: Mutex::new(match opts.clustering {
                Some(c) => {
                    Queues::clustered(jobs, c, opts.concurrency.max(1), opts.pipeline, piece)
                }
                None => Queues::single(jobs, opts.pipeline, piece),
            }),
            parallelism_set: AtomicBool::new(false),
            opts,
            observer,
            bytes: AtomicU64::new(0),
            files: AtomicU64::new(0),
            verified: AtomicU64::new(0),
            retransferred: AtomicU64::new(0),
            chunks_resent: AtomicU64::new(0),
            alg: Mutex::new(None),
            stop: AtomicBool::new(false),
            aborted: AtomicBool::new(false),
            error: Mutex::new(None),
            ledger: Mutex::new(ledger),
            inflight: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(0),
            pieces: Mutex::new(pieces),
            pieces_landed: AtomicU64::new(0),
            piece_runs: Mutex::new(HashMap::new()),
            failed: Mutex::new(Default::default()),
            batches: Mutex::new(HashMap::new()),
        });
        let (tx, rx) = mpsc::channel();
        let s = shared.clone();
        let handle = std::thread::spawn(move || run::run(s, tx));
        Transfer {
            shared,
            samples: rx,
            handle,
        }
    }

    /// Changes the number of files in flight. Sessions above a lowered level leave at the end
    /// of their current file when downloading whole files over TCP (the rest of their batch
    /// goes back to the queue), else at the end of their batch.
    pub fn set_concurrency(&self, n: u32) {
        self.shared.concurrency.store(n.max(1), Ordering::Relaxed);
    }

    /// Sessions running now. After [`Transfer::set_concurrency`] lowers the target, this stays
    /// above it until the extra sessions have left (a big file or piece keeps its session).
    pub fn channels(&self) -> u32 {
        self.shared.channels.load(Ordering::Relaxed)
    }

    /// Changes the streams per file; takes effect at each session's next batch.
    pub fn set_parallelism(&self, n: u32) {
        self.shared
            .parallelism
            .store(n.clamp(1, 64), Ordering::Relaxed);
        self.shared.parallelism_set.store(true, Ordering::Relaxed);
    }

    /// A live estimate of the path's bandwidth, bits per second: with clustering on and no
    /// user-given bandwidth, files still waiting are re-clustered if the BDP moved by more than
    /// 2×. Returns true if they were.
    pub fn set_bandwidth(&self, bps: f64) -> bool {
        self.shared
            .queue
            .lock()
            .map(|mut q| q.set_bandwidth(bps))
            .unwrap_or(false)
    }

    /// The file-size clusters (empty without clustering) and their current channel shares.
    pub fn clusters(&self) -> (Vec<ClusterInfo>, Vec<(haul_tune::cluster::FileClass, u32)>) {
        self.shared
            .queue
            .lock()
            .map(|q| (q.clusters().to_vec(), q.shares()))
            .unwrap_or_default()
    }

    /// Bytes moved so far.
    pub fn bytes(&self) -> u64 {
        total_bytes(&self.shared)
    }

    /// Files (or pieces of split files) that sessions hold now: moving, or queued in a
    /// session's pipeline behind the one moving.
    pub fn active(&self) -> usize {
        self.shared.inflight.lock().map(|m| m.len()).unwrap_or(0)
    }

    /// Throughput samples, one per interval, as they happen.
    pub fn samples(&self) -> &mpsc::Receiver<Sample> {
        &self.samples
    }

    /// True once every worker has stopped.
    pub fn is_finished(&self) -> bool {
        self.handle.is_finished()
    }

    /// Stops the transfer because its owner says so (`why`): no further file starts, and every
    /// file in flight stops at its next block. Downloads keep their partial files and ranges
    /// journals, uploads their journals, so a later run with `resume` continues from what
    /// arrived; [`Transfer::wait`] then returns [`XferError::Stopped`].
    pub fn abort(&self, why: &str) {
        self.shared.aborted.store(true, Ordering::Relaxed);
        fail(&self.shared, XferError::Stopped(why.to_string()));
        if let Ok(m) = self.shared.inflight.lock() {
            for (p, _) in m.values() {
                p.abort();
            }
        }
    }

    /// The destinations of the files that have not arrived (yet), each as often as owed.
    pub fn missing(&self) -> Vec<String> {
        self.shared
            .ledger
            .lock()
            .map(|l| l.missing())
            .unwrap_or_default()
    }

    /// Waits for the end.
    pub fn wait(self) -> Result<Summary, XferError> {
        self.handle.join().unwrap_or_else(|p| {
            Err(XferError::Internal(format!(
                "the transfer engine panicked: {}",
                panic_message(&*p)
            )))
        })
    }
}

/// The piece size in effect: only MODE E downloads (TCP or UDT) split files (a piece is an
/// `ERET` into the local `.part` file), not with `resume` (a piece keeps no restart journal), and
/// not for memory-to-memory runs.
fn piece_size(route: &Route, opts: &Options, jobs: &[Job]) -> Option<u64> {
    let mem = jobs
        .iter()
        .any(|j| crate::worker::is_dev_zero(&j.src) || crate::worker::is_dev_null(&j.dst));
    let ok = matches!(route, Route::Download(_))
        && opts.transport.net_stack().is_some()
        && !opts.resume
        && !mem;
    opts.piece.filter(|&n| ok && n > 0)
}

/// True while files wait in the queue. A poisoned queue (a session panicked while holding it)
/// ends the transfer: its files are then counted as not moved.
fn queued(shared: &Shared) -> bool {
    match shared.queue.lock() {
        Ok(q) => !q.is_empty(),
        Err(_) => {
            // Read every few milliseconds until the sessions have left: report it once.
            if !shared.stop.load(Ordering::Relaxed) {
                fail(
                    shared,
                    XferError::Internal("a session panicked while holding the file queue".into()),
                );
            }
            false
        }
    }
}

/// The text of a panic's payload.
fn panic_message(p: &(dyn std::any::Any + Send)) -> &str {
    p.downcast_ref::<&str>()
        .copied()
        .or_else(|| p.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("no message")
}

/// Arms the fail points named in `FAILPOINTS` (`name=actions;…`, the `fail` crate's syntax),
/// once per process. Built only with the `failpoints` feature, which the tests turn on.
#[cfg(feature = "failpoints")]
fn failpoints_from_env() {
    static ARMED: std::sync::Once = std::sync::Once::new();
    ARMED.call_once(|| {
        for (name, actions) in std::env::var("FAILPOINTS")
            .unwrap_or_default()
            .split(';')
            .filter_map(|kv| kv.split_once('='))
        {
            if let Err(e) = fail::cfg(name.trim(), actions.trim()) {
                tracing::warn!(name, error = %e, "fail point not armed");
            }
        }
    });
}

/// Finished plus in-flight bytes. Both are read under the in-flight lock, which `untrack` also
/// holds while it moves a file's bytes from one to the other: read apart, a file finishing in
/// between counted twice and the next sample's difference wrapped.
fn total_bytes(shared: &Shared) -> u64 {
    match shared.inflight.lock() {
        Ok(m) => {
            shared.bytes.load(Ordering::Relaxed) + m.values().map(|(p, _)| p.bytes()).sum::<u64>()
        }
        Err(_) => shared.bytes.load(Ordering::Relaxed),
    }
}

/// Keeps the ranges journals of files in flight current. Files that have nothing yet (queued
/// behind a pipeline, or just started) are skipped: their journal would say "nothing held",
/// which restores nothing, and writing, renaming and later deleting it cost three inode
/// operations per queued file per second on many-small-file transfers.
fn save_journals(shared: &Shared) {
    if let Ok(m) = shared.inflight.lock() {
        for (p, journal) in m.values() {
            if let Some(path) = journal {
                let ranges = p.ranges();
                if !ranges.is_empty() {
                    let _ = crate::resume::save(path, &ranges);
                }
            }
        }
    }
}

/// Fails the transfer with `e`, unless it already failed, and tells every session to stop.
fn fail(shared: &Shared, e: XferError) {
    if shared.aborted.load(Ordering::Relaxed) {
        tracing::info!("transfer stopping: {e}");
    } else {
        tracing::warn!("transfer failed: {e}");
    }
    if let Ok(mut slot) = shared.error.lock() {
        slot.get_or_insert(e);
    }
    shared.stop.store(true, Ordering::Relaxed);
}

/// Picks the verification algorithm for a peer.
pub(crate) fn choose_alg(
    opts: &Options,
    f: &crate::control::Features,
) -> Result<Option<Algorithm>, XferError> {
    if !opts.verify {
        return Ok(None);
    }
    if let Some(a) = opts.checksum {
        return Ok(Some(a));
    }
    for a in [
        Algorithm::Xxhc,
        Algorithm::Xxh128,
        Algorithm::Md5,
        Algorithm::Adler32,
        Algorithm::Crc32c,
    ] {
        if f.has_cksm(a.name()) {
            return Ok(Some(a));
        }
    }
    Err(XferError::Usage("the server offers no checksum haul can verify with; pass --no-verify to move unverified data".into()))
}
