//! The engine's own thread: it keeps a session running in each slot below the concurrency asked
//! for while files wait, takes a throughput sample every interval, and at the end checks the
//! ledger and sums the transfer up.

use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::ctx::worker;
use super::{
    fail, panic_message, queued, save_journals, total_bytes, trace_sessions, tracing_sessions,
    Sample, Shared, Summary,
};
use crate::error::XferError;

/// Session threads by slot; a slot's index is its session's `idx`.
type Slots = Vec<Option<JoinHandle<()>>>;

/// Runs the transfer to its end: sessions come and go with the concurrency asked for until no
/// file waits (or the transfer failed) and every session has left.
pub(super) fn run(shared: Arc<Shared>, tx: mpsc::Sender<Sample>) -> Result<Summary, XferError> {
    let mut sampler = Sampler::new(shared.opts.sample_interval, tx);
    let mut slots = Slots::new();
    loop {
        let target = shared.concurrency.load(Ordering::Relaxed) as usize;
        let pending = queued(&shared);
        tend_slots(&shared, &mut slots, target, pending);
        sampler.tick(&shared, &slots, target);
        // `pending` is read again: a session that gave files back (a checksum mismatch, or it
        // left its batch early) may have ended after the first read, and its files would be lost.
        let all_idle = slots.iter().all(Option::is_none);
        let pending = pending || (all_idle && queued(&shared));
        if all_idle && (!pending || shared.stop.load(Ordering::Relaxed)) {
            break;
        }
        std::thread::sleep(Duration::from_millis(5).min(sampler.until_next()));
    }
    let end = Instant::now();
    let bytes = sampler.finish(&shared, end);
    save_journals(&shared);
    outcome(&shared)?;
    Ok(summary(&shared, sampler, bytes, end))
}

/// Empties the slots whose sessions have left and, while files wait and nothing failed, starts
/// a session in every free slot below `target`; then publishes how many sessions run.
fn tend_slots(shared: &Arc<Shared>, slots: &mut Slots, target: usize, pending: bool) {
    if slots.len() < target {
        slots.resize_with(target, || None);
    }
    for (i, slot) in slots.iter_mut().enumerate() {
        reap(shared, i, slot);
        if slot.is_none() && i < target && pending && !shared.stop.load(Ordering::Relaxed) {
            let s = shared.clone();
            *slot = Some(std::thread::spawn(move || worker(s, i)));
        }
    }
    shared.channels.store(
        slots.iter().filter(|s| s.is_some()).count() as u32,
        Ordering::Relaxed,
    );
}

/// Empties slot `i` if its session has left; a session that panicked fails the transfer.
fn reap(shared: &Shared, i: usize, slot: &mut Option<JoinHandle<()>>) {
    if slot.as_ref().is_some_and(|h| h.is_finished()) {
        if let Some(Err(panic)) = slot.take().map(JoinHandle::join) {
            fail(
                shared,
                XferError::Internal(format!("session {i} panicked: {}", panic_message(&*panic))),
            );
        }
    }
}

/// How the transfer ended: its first failure, else an error naming the files that did not
/// arrive, if any.
fn outcome(shared: &Shared) -> Result<(), XferError> {
    let error = shared
        .error
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take();
    let ledger = shared.ledger.lock().unwrap_or_else(|p| p.into_inner());
    match error {
        // A failure of the engine itself says which files it cost; any other failure already
        // names its file, host or cause.
        Some(XferError::Internal(cause)) => Err(ledger.not_moved(Some(cause))),
        Some(e) => Err(e),
        None if !ledger.balances() => Err(ledger.not_moved(None)),
        None => Ok(()),
    }
}

/// The summary of a transfer that moved `bytes` in all and ended at `end`.
fn summary(shared: &Shared, sampler: Sampler, bytes: u64, end: Instant) -> Summary {
    let clusters = shared
        .queue
        .lock()
        .map(|q| q.clusters().to_vec())
        .unwrap_or_default();
    Summary {
        clusters,
        pieces: shared.pieces_landed.load(Ordering::Relaxed),
        files: shared.files.load(Ordering::Relaxed),
        bytes,
        duration_s: end.duration_since(sampler.start).as_secs_f64(),
        verified: shared.verified.load(Ordering::Relaxed),
        retransferred: shared.retransferred.load(Ordering::Relaxed),
        chunks_resent_bytes: shared.chunks_resent.load(Ordering::Relaxed),
        checksum: shared
            .alg
            .lock()
            .ok()
            .and_then(|a| a.map(|a| a.name().to_string())),
        samples: sampler.samples,
    }
}

/// Throughput samples: one per interval while the transfer runs, and a last, shorter one for
/// the bytes moved after the last interval.
struct Sampler {
    /// Where samples go as they are taken.
    tx: mpsc::Sender<Sample>,
    interval: Duration,
    /// When the transfer started.
    start: Instant,
    /// Every sample so far, for the summary.
    samples: Vec<Sample>,
    /// Bytes moved in all at the last sample.
    last_bytes: u64,
    /// When the last sample was taken.
    last_t: Instant,
    /// When the next sample is due.
    next: Instant,
}

impl Sampler {
    /// A sampler whose first interval starts now.
    fn new(interval: Duration, tx: mpsc::Sender<Sample>) -> Self {
        let start = Instant::now();
        Sampler {
            tx,
            interval,
            start,
            samples: Vec::new(),
            last_bytes: 0,
            last_t: start,
            next: start + interval,
        }
    }

    /// How long until the next sample is due.
    fn until_next(&self) -> Duration {
        self.next.saturating_duration_since(Instant::now())
    }

    /// Takes a sample once one is due (tracing the sessions in `slots`, when asked) and keeps
    /// the ranges journals current.
    fn tick(&mut self, shared: &Shared, slots: &Slots, target: usize) {
        let now = Instant::now();
        if now < self.next {
            return;
        }
        let b = total_bytes(shared);
        let s = self.sample(now, b, now.duration_since(self.last_t).as_secs_f64());
        if tracing_sessions() {
            trace_sessions(shared, slots, &s, target);
        }
        self.record(s);
        self.last_bytes = b;
        self.last_t = now;
        self.next += self.interval;
        save_journals(shared);
    }

    /// Takes the last sample at `end` if bytes moved since the one before; returns the bytes
    /// moved in all.
    fn finish(&mut self, shared: &Shared, end: Instant) -> u64 {
        let b = total_bytes(shared);
        if b > self.last_bytes {
            let dt = end.duration_since(self.last_t).as_secs_f64().max(1e-6);
            let s = self.sample(end, b, dt);
            self.record(s);
        }
        b
    }

    /// The sample at `now`, with `bytes` moved in all, over the `dt` seconds since the last.
    fn sample(&self, now: Instant, bytes: u64, dt: f64) -> Sample {
        let moved = bytes.saturating_sub(self.last_bytes);
        Sample {
            t_s: now.duration_since(self.start).as_secs_f64(),
            bytes: moved,
            bps: moved as f64 * 8.0 / dt,
        }
    }

    /// Hands `s` to whoever watches the transfer and keeps it for the summary.
    fn record(&mut self, s: Sample) {
        let _ = self.tx.send(s.clone());
        self.samples.push(s);
    }
}
