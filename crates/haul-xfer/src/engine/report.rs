//! Per-file reports: what became of each file, handed as it happens to the [`Observer`] a
//! caller gave [`Transfer::observed`](super::Transfer::observed). The engine only says what
//! happened; how to show it is the caller's (`haul cp --progress json` prints JSON lines).

use std::sync::Arc;
use std::time::Instant;

use crate::checksum::Algorithm;
use crate::error::{ErrorKind, XferError};
use crate::plan::Job;

/// How a file ended.
#[derive(Debug, Clone, PartialEq)]
pub enum FileOutcome {
    /// It arrived (moved into place, and verified when verification is on).
    Ok,
    /// Moving or verifying it failed; the transfer fails with this error (or its first one).
    Failed {
        /// The error's message.
        error: String,
        /// Its broad cause.
        kind: ErrorKind,
    },
}

/// What became of one file (a split file is reported once, when it is whole).
#[derive(Debug, Clone, PartialEq)]
pub struct FileReport {
    /// Source path, as the source side names it (local path or server path).
    pub src: String,
    /// Destination path, as the destination side names it.
    pub dst: String,
    /// The file's size in bytes.
    pub size: u64,
    /// Payload bytes moved for it in its last attempt (what `resume` found held not counted;
    /// a split file: its pieces' bytes).
    pub bytes: u64,
    /// Seconds it took: from the end of the file before it on the same session (or the
    /// session's start on its batch) to its end, checksums included; a split file, from its
    /// first piece's start.
    pub elapsed_s: f64,
    /// The algorithm and digest both ends agreed on, when it was verified.
    pub checksum: Option<(Algorithm, String)>,
    /// It continued from ranges a restart journal held (`resume`).
    pub resumed: bool,
    /// How it ended.
    pub outcome: FileOutcome,
}

impl FileReport {
    /// Throughput of the file's own run, bytes per second (0 for an instant one).
    pub fn bytes_per_s(&self) -> f64 {
        if self.elapsed_s > 0.0 {
            self.bytes as f64 / self.elapsed_s
        } else {
            0.0
        }
    }
}

/// Called with every [`FileReport`], from the engine's session threads, as each file ends.
/// It runs on the transfer's path: it should be quick (write a line, send on a channel).
#[derive(Clone)]
pub struct Observer(pub Arc<dyn Fn(&FileReport) + Send + Sync>);

impl std::fmt::Debug for Observer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Observer")
    }
}

/// What a worker measured of one file's run, for its report.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Run {
    /// Payload bytes moved.
    pub(crate) bytes: u64,
    /// Seconds it took.
    pub(crate) elapsed_s: f64,
    /// Continued from held ranges.
    pub(crate) resumed: bool,
}

/// When each item of a batch ended, as its session reported them: the items' own times, and
/// which item an error stopped the batch at.
pub(crate) struct Clock {
    start: Instant,
    ends: Vec<Instant>,
}

impl Clock {
    /// A clock for a batch whose first item starts now.
    pub(crate) fn start() -> Clock {
        Clock {
            start: Instant::now(),
            ends: Vec::new(),
        }
    }

    /// The next item ended now.
    pub(crate) fn note(&mut self) {
        self.ends.push(Instant::now());
    }

    /// The index of the item a failed batch stopped at: the first that did not end.
    pub(crate) fn failed_at(&self) -> usize {
        self.ends.len()
    }

    /// Seconds item `k` took: from the end of the one before (or the batch's start) to its
    /// own end (or now, for an item that did not end).
    pub(crate) fn elapsed(&self, k: usize) -> f64 {
        let from = match k {
            0 => self.start,
            _ => self.ends.get(k - 1).copied().unwrap_or(self.start),
        };
        let to = self.ends.get(k).copied().unwrap_or_else(Instant::now);
        to.saturating_duration_since(from).as_secs_f64()
    }
}

/// The report of `job` after `run`: arrived with `checksum`, or failed with `error`.
pub(crate) fn report(
    job: &Job,
    run: Run,
    checksum: Option<(Algorithm, &str)>,
    error: Option<&XferError>,
) -> FileReport {
    FileReport {
        src: job.src.clone(),
        dst: job.dst.clone(),
        size: job.piece.map_or(job.size, |p| p.whole),
        bytes: run.bytes,
        elapsed_s: run.elapsed_s,
        checksum: checksum.map(|(a, d)| (a, d.to_string())),
        resumed: run.resumed,
        outcome: match error {
            None => FileOutcome::Ok,
            Some(e) => FileOutcome::Failed {
                error: e.to_string(),
                kind: e.kind(),
            },
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_batch_clock_times_each_item_from_the_end_of_the_one_before() {
        let mut c = Clock::start();
        std::thread::sleep(Duration::from_millis(20));
        c.note();
        std::thread::sleep(Duration::from_millis(40));
        c.note();
        assert_eq!(c.failed_at(), 2);
        let (a, b) = (c.elapsed(0), c.elapsed(1));
        assert!((0.015..0.2).contains(&a), "{a}");
        assert!((0.035..0.2).contains(&b), "{b}");
        // An item that did not end runs to now.
        assert!(c.elapsed(2) >= 0.0);
    }

    #[test]
    fn reports_name_the_whole_file_and_the_failure() {
        let job = Job::new("/s/a", "/d/a", 10);
        let run = Run {
            bytes: 10,
            elapsed_s: 2.0,
            resumed: true,
        };
        let ok = report(&job, run, Some((Algorithm::Md5, "ab")), None);
        assert_eq!(ok.outcome, FileOutcome::Ok);
        assert_eq!(ok.checksum, Some((Algorithm::Md5, "ab".into())));
        assert_eq!(ok.bytes_per_s(), 5.0);
        let e = XferError::ChecksumMismatch {
            path: "/d/a".into(),
            alg: "MD5".into(),
            expected: "1".into(),
            actual: "2".into(),
        };
        let failed = report(&job, Run::default(), None, Some(&e));
        assert!(matches!(
            failed.outcome,
            FileOutcome::Failed {
                kind: ErrorKind::ChecksumMismatch,
                ..
            }
        ));
        assert_eq!(failed.bytes_per_s(), 0.0);
    }
}
