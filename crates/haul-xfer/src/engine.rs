//! The transfer engine: a queue of files, worker sessions that take batches of them (one batch
//! = one pipeline window on one control channel), live knobs for concurrency and parallelism,
//! throughput samples, end-to-end verification with one re-transfer on mismatch, and restart
//! journals. A tuner (a later issue) drives [`Transfer::set_concurrency`] and
//! [`Transfer::set_parallelism`] while reading [`Transfer::samples`].

use std::cell::Cell;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use haul_transport::mode_e::Progress;

use crate::checksum::Algorithm;
use crate::error::XferError;
use crate::ledger::Ledger;
use crate::plan::Job;
use crate::schedule::{Batch, ClusterInfo, Clustering, Queues};
use crate::session::PasvAddress;
use crate::tls::ClientTls;
use crate::url::RemoteUrl;

/// Which data channel carries file data.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Transport {
    /// MODE E over parallel TCP streams.
    #[default]
    Tcp,
    /// PLUT (reliable UDP), negotiated with `OPTS HAUL`; one file at a time per session.
    Plut,
}

/// How to move the data.
#[derive(Debug, Clone)]
pub struct Options {
    /// TCP streams per file.
    pub parallelism: u32,
    /// Files in flight (control sessions).
    pub concurrency: u32,
    /// Commands in flight per control session.
    pub pipeline: usize,
    /// Socket buffer size (None: autotuning).
    pub tcp_buffer: Option<usize>,
    /// MODE E block size.
    pub block: usize,
    /// Checksum algorithm; None picks XXH128 with haul peers, else MD5.
    pub checksum: Option<Algorithm>,
    /// Verify every file end to end.
    pub verify: bool,
    /// Continue from restart journals.
    pub resume: bool,
    /// Throughput sample interval.
    pub sample_interval: Duration,
    /// TLS roots for `haul://` URLs.
    pub tls: Option<ClientTls>,
    /// Where data connections go after `PASV`.
    pub pasv: PasvAddress,
    /// How long a data channel may stay silent before the transfer fails.
    pub data_timeout: Duration,
    /// Byte count for memory-to-memory runs from `/dev/zero`.
    pub len: Option<u64>,
    /// Bandwidth cap in bytes per second for each file's data (None: no cap).
    pub max_rate: Option<u64>,
    /// The data channel.
    pub transport: Transport,
    /// PLUT only: the sender's NIC rate in bytes/s, its pacing ceiling (None: 10 Gb/s).
    pub plut_rate: Option<u64>,
    /// File-size clusters with per-cluster pipelining and parallelism (None: one queue with
    /// `pipeline` and `parallelism` for every file).
    pub clustering: Option<Clustering>,
    /// Cut files of at least two pieces into pieces of this many bytes, each fetched with
    /// `ERET` by whichever channel is free, so a big file does not end the transfer crawling
    /// on one channel (None: files move whole). Downloads over TCP without `resume` only;
    /// other transfers ignore it.
    pub piece: Option<u64>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            parallelism: 4,
            concurrency: 2,
            pipeline: 8,
            tcp_buffer: None,
            block: haul_transport::DEFAULT_BLOCK,
            checksum: None,
            verify: true,
            resume: false,
            sample_interval: Duration::from_secs(1),
            tls: None,
            pasv: PasvAddress::ControlPeer,
            data_timeout: crate::session::DEFAULT_DATA_TIMEOUT,
            len: None,
            max_rate: None,
            transport: Transport::Tcp,
            plut_rate: None,
            clustering: None,
            piece: None,
        }
    }
}

/// Which way the bytes go.
#[derive(Debug, Clone)]
pub enum Route {
    /// Server to local disk.
    Download(RemoteUrl),
    /// Local disk to server.
    Upload(RemoteUrl),
    /// Server to server; this client only drives the two control channels.
    ThirdParty(RemoteUrl, RemoteUrl),
}

/// Throughput over one interval of a transfer, as the engine measures it (the history stores
/// the same three numbers).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Sample {
    /// End of the interval, seconds since the transfer started.
    pub t_s: f64,
    /// Bytes moved in the interval.
    pub bytes: u64,
    /// Throughput over the interval, bits per second.
    pub bps: f64,
}

/// What a finished transfer reports.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Summary {
    /// Files moved.
    pub files: u64,
    /// Payload bytes moved (including re-transfers).
    pub bytes: u64,
    /// Wall-clock seconds.
    pub duration_s: f64,
    /// Files whose checksums matched end to end.
    pub verified: u64,
    /// Files re-sent after a checksum mismatch.
    pub retransferred: u64,
    /// Checksum algorithm used, if any.
    pub checksum: Option<String>,
    /// Throughput samples.
    pub samples: Vec<Sample>,
    /// The file-size clusters, when clustering was on.
    pub clusters: Vec<ClusterInfo>,
    /// Pieces of split files that landed (0: every file moved whole).
    pub pieces: u64,
}

/// Files in flight by id: live counters and, for downloads, the ranges journal.
type Inflight = HashMap<u64, (Arc<Progress>, Option<PathBuf>)>;

struct Shared {
    route: Route,
    opts: Options,
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
    alg: Mutex<Option<Algorithm>>,
    stop: AtomicBool,
    error: Mutex<Option<XferError>>,
    /// Every file planned and which arrived: success only when it balances.
    ledger: Mutex<Ledger>,
    /// Files in flight: live counters and, for downloads, the ranges journal to keep current.
    inflight: Mutex<Inflight>,
    next_id: AtomicU64,
    /// Split files by destination: pieces not yet landed.
    pieces: Mutex<HashMap<String, usize>>,
    pieces_landed: AtomicU64,
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
            bytes: AtomicU64::new(0),
            files: AtomicU64::new(0),
            verified: AtomicU64::new(0),
            retransferred: AtomicU64::new(0),
            alg: Mutex::new(None),
            stop: AtomicBool::new(false),
            error: Mutex::new(None),
            ledger: Mutex::new(ledger),
            inflight: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(0),
            pieces: Mutex::new(pieces),
            pieces_landed: AtomicU64::new(0),
            batches: Mutex::new(HashMap::new()),
        });
        let (tx, rx) = mpsc::channel();
        let s = shared.clone();
        let handle = std::thread::spawn(move || run(s, tx));
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

    /// Throughput samples, one per interval, as they happen.
    pub fn samples(&self) -> &mpsc::Receiver<Sample> {
        &self.samples
    }

    /// True once every worker has stopped.
    pub fn is_finished(&self) -> bool {
        self.handle.is_finished()
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

/// The piece size in effect: only downloads over TCP split files (a piece is an `ERET` into
/// the local `.part` file), not with `resume` (a piece keeps no restart journal), and not for
/// memory-to-memory runs.
fn piece_size(route: &Route, opts: &Options, jobs: &[Job]) -> Option<u64> {
    let mem = jobs
        .iter()
        .any(|j| j.src == crate::worker::DEV_ZERO || j.dst == crate::worker::DEV_NULL);
    let ok = matches!(route, Route::Download(_))
        && opts.transport == Transport::Tcp
        && !opts.resume
        && !mem;
    opts.piece.filter(|&n| ok && n > 0)
}

fn run(shared: Arc<Shared>, tx: mpsc::Sender<Sample>) -> Result<Summary, XferError> {
    let start = Instant::now();
    let mut slots: Vec<Option<JoinHandle<()>>> = Vec::new();
    let mut samples = Vec::new();
    let mut last_bytes = 0;
    let mut last_t = start;
    let mut next_sample = start + shared.opts.sample_interval;
    loop {
        let target = shared.concurrency.load(Ordering::Relaxed) as usize;
        let pending = queued(&shared);
        if slots.len() < target {
            slots.resize_with(target, || None);
        }
        for (i, slot) in slots.iter_mut().enumerate() {
            if slot.as_ref().is_some_and(|h| h.is_finished()) {
                if let Some(Err(panic)) = slot.take().map(JoinHandle::join) {
                    fail(
                        &shared,
                        XferError::Internal(format!(
                            "session {i} panicked: {}",
                            panic_message(&*panic)
                        )),
                    );
                }
            }
            if slot.is_none() && i < target && pending && !shared.stop.load(Ordering::Relaxed) {
                let s = shared.clone();
                *slot = Some(std::thread::spawn(move || worker(s, i)));
            }
        }
        shared.channels.store(
            slots.iter().filter(|s| s.is_some()).count() as u32,
            Ordering::Relaxed,
        );
        let now = Instant::now();
        if now >= next_sample {
            let b = total_bytes(&shared);
            let dt = now.duration_since(last_t).as_secs_f64();
            let s = Sample {
                t_s: now.duration_since(start).as_secs_f64(),
                bytes: b.saturating_sub(last_bytes),
                bps: b.saturating_sub(last_bytes) as f64 * 8.0 / dt,
            };
            if tracing_sessions() {
                trace_sessions(&shared, &slots, &s, target);
            }
            let _ = tx.send(s.clone());
            samples.push(s);
            last_bytes = b;
            last_t = now;
            next_sample += shared.opts.sample_interval;
            save_journals(&shared);
        }
        // `pending` is read again: a session that gave files back (a checksum mismatch, or it
        // left its batch early) may have ended after the first read, and its files would be lost.
        let all_idle = slots.iter().all(Option::is_none);
        let pending = pending || (all_idle && queued(&shared));
        if all_idle && (!pending || shared.stop.load(Ordering::Relaxed)) {
            break;
        }
        std::thread::sleep(
            Duration::from_millis(5).min(next_sample.saturating_duration_since(Instant::now())),
        );
    }
    let end = Instant::now();
    let b = total_bytes(&shared);
    if b > last_bytes {
        let dt = end.duration_since(last_t).as_secs_f64().max(1e-6);
        let s = Sample {
            t_s: end.duration_since(start).as_secs_f64(),
            bytes: b.saturating_sub(last_bytes),
            bps: b.saturating_sub(last_bytes) as f64 * 8.0 / dt,
        };
        let _ = tx.send(s.clone());
        samples.push(s);
    }
    save_journals(&shared);
    let error = shared
        .error
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take();
    let ledger = shared.ledger.lock().unwrap_or_else(|p| p.into_inner());
    match error {
        // A failure of the engine itself says which files it cost; any other failure already
        // names its file, host or cause.
        Some(XferError::Internal(cause)) => return Err(ledger.not_moved(Some(cause))),
        Some(e) => return Err(e),
        None if !ledger.balances() => return Err(ledger.not_moved(None)),
        None => {}
    }
    drop(ledger);
    let clusters = shared
        .queue
        .lock()
        .map(|q| q.clusters().to_vec())
        .unwrap_or_default();
    Ok(Summary {
        clusters,
        pieces: shared.pieces_landed.load(Ordering::Relaxed),
        files: shared.files.load(Ordering::Relaxed),
        bytes: b,
        duration_s: end.duration_since(start).as_secs_f64(),
        verified: shared.verified.load(Ordering::Relaxed),
        retransferred: shared.retransferred.load(Ordering::Relaxed),
        checksum: shared
            .alg
            .lock()
            .ok()
            .and_then(|a| a.map(|a| a.name().to_string())),
        samples,
    })
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

fn fail(shared: &Shared, e: XferError) {
    tracing::warn!("transfer failed: {e}");
    if let Ok(mut slot) = shared.error.lock() {
        slot.get_or_insert(e);
    }
    shared.stop.store(true, Ordering::Relaxed);
}

/// Takes the next batch for worker `idx`, or None when it should stop.
fn take_batch(shared: &Shared, idx: usize) -> Option<Batch> {
    let channels = shared.concurrency.load(Ordering::Relaxed);
    if shared.stop.load(Ordering::Relaxed) || idx >= channels as usize {
        return None;
    }
    let b = {
        let mut q = shared.queue.lock().ok()?;
        let b = q.take(idx, channels);
        // Counted before the queue is unlocked: the cut-off rest could otherwise be taken and
        // land before its file is known to be in pieces.
        if let Some((dst, added)) = b.as_ref().and_then(|b| b.split.as_ref()) {
            if let Ok(mut m) = shared.pieces.lock() {
                *m.entry(dst.clone()).or_insert(0) += added;
            }
        }
        b
    };
    if let (Some(b), true) = (&b, tracing_sessions()) {
        let t = BatchTrace {
            taken: Instant::now(),
            files: b.jobs.len(),
            bytes: b.jobs.iter().map(|(j, _)| j.size).sum(),
            piece: b.jobs.iter().any(|(j, _)| j.piece.is_some()),
        };
        if let Ok(mut m) = shared.batches.lock() {
            m.insert(idx, t);
        }
    }
    b
}

fn worker(shared: Arc<Shared>, idx: usize) {
    let r = match shared.route.clone() {
        Route::Download(url) => crate::worker::download(&shared_view(&shared), &url, idx),
        Route::Upload(url) => crate::worker::upload(&shared_view(&shared), &url, idx),
        Route::ThirdParty(a, b) => crate::worker::third_party(&shared_view(&shared), &a, &b, idx),
    };
    if let Err(e) = r {
        fail(&shared, e);
    }
}

fn shared_view(s: &Arc<Shared>) -> Ctx<'_> {
    Ctx {
        s,
        batch: Cell::new((s.opts.pipeline.max(1), 0)),
    }
}

/// What a worker sees of the engine.
pub(crate) struct Ctx<'a> {
    s: &'a Arc<Shared>,
    /// The current batch's pipelining depth and parallelism (0: the engine-wide setting).
    batch: Cell<(usize, u32)>,
}

impl Ctx<'_> {
    pub(crate) fn opts(&self) -> &Options {
        &self.s.opts
    }
    pub(crate) fn next_batch(&self, idx: usize) -> Option<Vec<(Job, u32)>> {
        let b = take_batch(self.s, idx)?;
        // A session dying with a batch in hand: the engine must name its files as not moved.
        #[cfg(feature = "failpoints")]
        fail::fail_point!("xfer::batch_taken");
        self.batch.set((b.pipeline.max(1), b.parallelism));
        Some(b.jobs)
    }
    /// Streams per file for the current batch: the cluster's, unless set live.
    pub(crate) fn parallelism(&self) -> u32 {
        match self.batch.get().1 {
            p if p > 0 && !self.s.parallelism_set.load(Ordering::Relaxed) => p,
            _ => self.s.parallelism.load(Ordering::Relaxed),
        }
    }
    /// Commands in flight per control session for the current batch.
    pub(crate) fn pipeline(&self) -> usize {
        self.batch.get().0
    }
    /// The file at `dst` arrived (and matched its source's checksum, if `verified`).
    pub(crate) fn file_done(&self, dst: &str, verified: bool) {
        if !self
            .s
            .ledger
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .arrived(dst)
        {
            fail(
                self.s,
                XferError::Internal(format!(
                    "{dst} arrived but was not planned, or arrived twice"
                )),
            );
        }
        self.s.files.fetch_add(1, Ordering::Relaxed);
        if verified {
            self.s.verified.fetch_add(1, Ordering::Relaxed);
        }
    }
    pub(crate) fn set_alg(&self, a: Option<Algorithm>) {
        if let Ok(mut x) = self.s.alg.lock() {
            *x = a;
        }
    }
    /// True when the session in slot `idx` is above the concurrency now asked for, so it should
    /// leave after the file it is moving instead of finishing its batch.
    pub(crate) fn leaving(&self, idx: usize) -> bool {
        idx >= self.s.concurrency.load(Ordering::Relaxed) as usize
    }
    /// Returns files a leaving session took but did not move, to the front of their lanes, in
    /// order.
    pub(crate) fn give_back(&self, jobs: Vec<(Job, u32)>) {
        if let Ok(mut q) = self.s.queue.lock() {
            for (job, tries) in jobs.into_iter().rev() {
                q.push_front(job, tries);
            }
        }
    }
    /// Puts a file back after a checksum mismatch; a second mismatch is an error.
    pub(crate) fn mismatch(&self, job: Job, tries: u32, e: XferError) -> Result<(), XferError> {
        if tries >= 1 {
            return Err(e);
        }
        tracing::warn!("{e}; transferring it again");
        self.s.retransferred.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut q) = self.s.queue.lock() {
            q.push_back(job, tries + 1);
        }
        Ok(())
    }
    /// Marks one piece of the file at `dst` landed; true when it was the file's last.
    pub(crate) fn piece_done(&self, dst: &str) -> bool {
        self.s.pieces_landed.fetch_add(1, Ordering::Relaxed);
        let Ok(mut m) = self.s.pieces.lock() else {
            return false;
        };
        match m.get_mut(dst) {
            Some(left) if *left > 1 => {
                *left -= 1;
                false
            }
            Some(_) => {
                m.remove(dst);
                true
            }
            None => false,
        }
    }
    /// Registers a file in flight; its bytes count live in samples.
    pub(crate) fn track(&self, journal: Option<PathBuf>) -> (u64, Arc<Progress>) {
        let id = self.s.next_id.fetch_add(1, Ordering::Relaxed);
        let p = Arc::new(Progress::default());
        if let Ok(mut m) = self.s.inflight.lock() {
            m.insert(id, (p.clone(), journal));
        }
        (id, p)
    }
    /// Ends a file in flight of `len` bytes, saving its journal one last time unless every
    /// range arrived (the common case, where a journal would only be written to be deleted) or
    /// none did (a file a leaving session gave back, or one queued behind a failure: a journal
    /// saying "nothing held" restores nothing).
    pub(crate) fn untrack(&self, id: u64, len: u64) {
        if let Ok(mut m) = self.s.inflight.lock() {
            if let Some((p, journal)) = m.remove(&id) {
                self.s.bytes.fetch_add(p.bytes(), Ordering::Relaxed);
                let ranges = p.ranges();
                if let Some(path) = journal.filter(|_| !ranges.is_empty() && !ranges.covers(len)) {
                    let _ = crate::resume::save(&path, &ranges);
                }
            }
        }
    }
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
