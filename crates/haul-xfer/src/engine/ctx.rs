//! What a worker session sees of the engine: batches to take, the knobs in effect for them, and
//! the bookkeeping of files as they start, land, fail to match or go back to the queue.

use std::cell::Cell;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use haul_transport::mode_e::Progress;

use super::report::report;
use super::{fail, tracing_sessions, BatchTrace, Options, Route, Run, Shared};
use crate::checksum::Algorithm;
use crate::error::XferError;
use crate::plan::Job;
use crate::schedule::Batch;

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

/// The session in slot `idx`: moves batches along the route until none is left for it, and fails
/// the transfer with its error.
pub(super) fn worker(shared: Arc<Shared>, idx: usize) {
    let r = match shared.route.clone() {
        Route::Download(url) => crate::worker::download(&shared_view(&shared), &url, idx),
        Route::Upload(url) => crate::worker::upload(&shared_view(&shared), &url, idx),
        Route::ThirdParty(a, b) => crate::worker::third_party(&shared_view(&shared), &a, &b, idx),
    };
    if let Err(e) = r {
        fail(&shared, e);
    }
}

/// A worker's view of the engine, before its first batch.
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

    /// Whether the data comes or goes through a relay (a nested URL on either end).
    #[cfg(feature = "failpoints")]
    pub(crate) fn relayed(&self) -> bool {
        let hops = |u: &crate::url::RemoteUrl| u.route().len() > 1;
        match &self.s.route {
            Route::Download(u) | Route::Upload(u) => hops(u),
            Route::ThirdParty(a, b) => hops(a) || hops(b),
        }
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
    /// `job` arrived after `run`, matching its source's `checksum` when verified: counted,
    /// checked off the ledger and reported.
    pub(crate) fn file_done(&self, job: &Job, run: Run, checksum: Option<(Algorithm, &str)>) {
        let dst = &job.dst;
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
        if checksum.is_some() {
            self.s.verified.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(o) = &self.s.observer {
            (o.0)(&report(job, run, checksum, None));
        }
    }
    /// Moving or verifying `job` failed with `e` (which the worker then returns): reported
    /// once per file, and not when the owner stopped the transfer (nothing failed then).
    pub(crate) fn file_failed(&self, job: &Job, run: Run, e: &XferError) {
        let Some(o) = &self.s.observer else {
            return;
        };
        if self.s.aborted.load(Ordering::Relaxed) || matches!(e, XferError::Stopped(_)) {
            return;
        }
        let first = self
            .s
            .failed
            .lock()
            .map(|mut f| f.insert(job.dst.clone()))
            .unwrap_or(true);
        if first {
            (o.0)(&report(job, run, None, Some(e)));
        }
    }
    /// Reports `job` failed (see [`Ctx::file_failed`]) if `r` is an error, and passes `r` on.
    pub(crate) fn or_failed<T>(
        &self,
        job: &Job,
        run: Run,
        r: Result<T, XferError>,
    ) -> Result<T, XferError> {
        if let Err(e) = &r {
            self.file_failed(job, run, e);
        }
        r
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
    /// Counts bytes of chunks re-sent after a checksum mismatch.
    pub(crate) fn chunks_resent(&self, bytes: u64) {
        self.s.chunks_resent.fetch_add(bytes, Ordering::Relaxed);
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
    /// Marks the piece `job` landed after `run`; when it was its file's last, the whole
    /// file's run: from its first piece's start, with every piece's bytes.
    pub(crate) fn piece_done(&self, job: &Job, run: Run) -> Option<Run> {
        self.s.pieces_landed.fetch_add(1, Ordering::Relaxed);
        let dst = &job.dst;
        let now = Instant::now();
        let began = now
            .checked_sub(std::time::Duration::from_secs_f64(run.elapsed_s))
            .unwrap_or(now);
        let (first, bytes) = {
            let mut runs = self.s.piece_runs.lock().ok()?;
            let e = runs.entry(dst.clone()).or_insert((began, 0));
            e.0 = e.0.min(began);
            e.1 += run.bytes;
            *e
        };
        let mut m = self.s.pieces.lock().ok()?;
        match m.get_mut(dst) {
            Some(left) if *left > 1 => {
                *left -= 1;
                None
            }
            Some(_) => {
                m.remove(dst);
                if let Ok(mut runs) = self.s.piece_runs.lock() {
                    runs.remove(dst);
                }
                Some(Run {
                    bytes,
                    elapsed_s: first.elapsed().as_secs_f64(),
                    resumed: false,
                })
            }
            None => None,
        }
    }
    /// Registers a file in flight; its bytes count live in samples.
    pub(crate) fn track(&self, journal: Option<PathBuf>) -> (u64, Arc<Progress>) {
        let id = self.s.next_id.fetch_add(1, Ordering::Relaxed);
        let p = Arc::new(Progress::default());
        if let Ok(mut m) = self.s.inflight.lock() {
            m.insert(id, (p.clone(), journal));
            // Transfer::abort reads the map under this lock after setting `aborted`: a file
            // registered after that reading stops here.
            if self.s.aborted.load(Ordering::Relaxed) {
                p.abort();
            }
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
