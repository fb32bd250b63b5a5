//! Downloads: files from a server to local disk, whole or a piece at a time.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use haul_proto::RangeSet;
use haul_transport::io::{
    on_local_fs, on_tmpfs, DirectFile, Null, OneWriter, RateLimited, Sink, DIRECT_FROM,
};
use haul_transport::mode_e::Progress;

use super::{compare, failed_at, is_dev_null, is_dev_zero, open, params, session_alg, with_have};
use crate::checksum::{self, Algorithm};
use crate::engine::{Clock, Ctx, Run, Transport};
use crate::error::XferError;
use crate::plan::Job;
use crate::resume;
use crate::session::{GetItem, Session};
use crate::url::RemoteUrl;

/// One file of a download batch: its sink, progress and `.part` file.
struct Incoming {
    job: Job,
    tries: u32,
    id: u64,
    progress: Arc<Progress>,
    sink: Box<dyn Sink>,
    part: Option<PathBuf>,
    have: Option<RangeSet>,
}

/// Writes a piece's blocks, whose offsets count from the piece's start (as with any ERET), at
/// their place in the file.
pub(super) struct Shifted {
    pub(super) inner: Box<dyn Sink>,
    pub(super) by: u64,
}

impl Sink for Shifted {
    fn write_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
        let at = offset.checked_add(self.by).ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "block offset overflows the file",
            )
        })?;
        self.inner.write_at(buf, at)
    }

    fn writes_wait(&self) -> bool {
        self.inner.writes_wait()
    }
}

/// The cap on each file's rate: `--max-rate`, or in test builds a fail point's.
fn sink_rate(ctx: &Ctx<'_>) -> Option<u64> {
    #[allow(unused_mut)]
    let mut rate = ctx.opts().max_rate;
    // Tests slow TCP downloads alone (bytes per second) to make `haul send` re-plan, or only
    // those that come straight from their server (or only those through a relay) to make it
    // re-route.
    #[cfg(feature = "failpoints")]
    if ctx.opts().transport == Transport::Tcp {
        let route = if ctx.relayed() {
            "xfer::relayed_tcp_sink_rate"
        } else {
            "xfer::direct_tcp_sink_rate"
        };
        for name in ["xfer::tcp_sink_rate", route] {
            if let Some(r) = crate::failpoint::number(name) {
                rate = Some(r);
            }
        }
    }
    rate
}

fn rate_limited(ctx: &Ctx<'_>, file: File) -> Box<dyn Sink> {
    let rate = sink_rate(ctx);
    match rate {
        Some(r) => Box::new(RateLimited::new(file, r)),
        None if on_local_fs(&file) => Box::new(OneWriter::new(file)),
        None => Box::new(file),
    }
}

/// A large new file on a local disk, written around the page cache ([`DirectFile`]), when
/// nothing reads it back while it arrives: it is not verified, or verified with XXHC, whose
/// chunks are hashed as they land. The file back when that does not apply (small, resumed,
/// rate-limited, over PLUT, in memory, verified by reading it back, or refused by the file
/// system).
fn direct(
    ctx: &Ctx<'_>,
    file: File,
    path: &Path,
    size: u64,
    hashed_inline: bool,
) -> Result<Box<dyn Sink>, File> {
    let o = ctx.opts();
    let wanted = o.direct_io
        && size >= DIRECT_FROM
        && hashed_inline
        && sink_rate(ctx).is_none()
        && o.transport != Transport::Plut;
    if !wanted || !on_local_fs(&file) || on_tmpfs(&file) {
        return Err(file);
    }
    let d = DirectFile::open(file, path)?;
    let reserved = d.reserve(size);
    tracing::debug!(
        reserved,
        "{}: written around the page cache (O_DIRECT)",
        path.display()
    );
    Ok(Box::new(d))
}

/// Opens the shared `.part` file for one piece: never truncated (other pieces may have landed),
/// but sized to the whole file, so a stale longer `.part` cannot survive; every byte of it is
/// written by some piece and the whole file is verified after the last.
fn open_piece(
    ctx: &Ctx<'_>,
    job: Job,
    tries: u32,
    whole: u64,
    offset: u64,
) -> Result<Incoming, XferError> {
    let part = resume::part_path(Path::new(&job.dst));
    resume::clear(&resume::ranges_path(&part));
    let io = |e| XferError::io(&part.display().to_string(), e);
    let file = resume::open_existing(&part, true).map_err(io)?;
    file.set_len(whole).map_err(io)?;
    let (id, progress) = ctx.track(None);
    let sink = Box::new(Shifted {
        inner: rate_limited(ctx, file),
        by: offset,
    });
    Ok(Incoming {
        job,
        tries,
        id,
        progress,
        sink,
        part: Some(part),
        have: None,
    })
}

fn open_incoming(
    ctx: &Ctx<'_>,
    job: Job,
    tries: u32,
    alg: Option<Algorithm>,
) -> Result<Incoming, XferError> {
    if is_dev_null(&job.dst) {
        let (id, progress) = ctx.track(None);
        return Ok(Incoming {
            job,
            tries,
            id,
            progress,
            sink: Box::new(Null),
            part: None,
            have: None,
        });
    }
    // The planner made the directories (missing parents only with --mkdir).
    let dst = PathBuf::from(&job.dst);
    if let Some(p) = job.piece {
        return open_piece(ctx, job, tries, p.whole, p.offset);
    }
    let part = resume::part_path(&dst);
    let journal = resume::ranges_path(&part);
    let have = if ctx.opts().resume && resume::is_file(&part) {
        resume::load(&journal)
            .filter(|h| !h.is_empty() && h.ranges().last().is_some_and(|r| r.1 <= job.size))
    } else {
        resume::clear(&journal);
        None
    };
    let file = match have {
        Some(_) => resume::open_existing(&part, false),
        None => resume::create_new(&part),
    }
    .map_err(|e| XferError::io(&part.display().to_string(), e))?;
    let (id, progress) = ctx.track(Some(journal));
    with_have(&progress, &have);
    let inline = have.is_none() && matches!(alg, None | Some(Algorithm::Xxhc));
    let sink = match direct(ctx, file, &part, job.size, inline) {
        Ok(d) => d,
        Err(file) => rate_limited(ctx, file),
    };
    Ok(Incoming {
        job,
        tries,
        id,
        progress,
        sink,
        part: Some(part),
        have,
    })
}

/// Moves files from a server to local disk.
pub(crate) fn download(ctx: &Ctx<'_>, url: &RemoteUrl, idx: usize) -> Result<(), XferError> {
    let Some(mut batch) = ctx.next_batch(idx) else {
        return Ok(());
    };
    let mut sess = open(ctx, url)?;
    let alg = session_alg(ctx, &sess, &batch)?;
    ctx.set_alg(alg);
    loop {
        let mut inc = Vec::with_capacity(batch.len());
        for (job, tries) in batch {
            let opened = open_incoming(ctx, job.clone(), tries, alg);
            inc.push(ctx.or_failed(&job, Run::default(), opened)?);
        }
        let items: Vec<GetItem<'_>> = inc.iter().map(|i| get_item(i, alg)).collect();
        // Above a lowered concurrency, leave after the current file: the rest of a batch of
        // small files can take seconds on a new session's first batch, still in slow start, and
        // the tuner waits for the level to take effect before it measures it.
        let leave = || ctx.leaving(idx);
        let mut clock = Clock::start();
        let got = match ctx.opts().transport {
            Transport::Tcp | Transport::Udt => {
                sess.get_many(&items, &params(ctx), ctx.pipeline(), &leave, &mut || {
                    clock.note()
                })
            }
            Transport::Plut => sess.get_plut(&items, ctx.opts().plut_rate, &mut || clock.note()),
        };
        drop(items);
        for i in &inc {
            ctx.untrack(i.id, i.job.size);
        }
        let results = got
            .map_err(|e| failed_at(ctx, &inc, &clock, e, |i, k| (&i.job, run_of(i, &clock, k))))?;
        let untaken = inc.split_off(results.len().min(inc.len()));
        landed(ctx, &mut sess, alg, inc, results, &clock)?;
        if !untaken.is_empty() {
            tracing::debug!(
                "session {idx} leaves its batch with {} files unmoved",
                untaken.len()
            );
            ctx.give_back(untaken.into_iter().map(|i| (i.job, i.tries)).collect());
            break;
        }
        match ctx.next_batch(idx) {
            Some(b) => batch = b,
            None => break,
        }
    }
    sess.quit();
    Ok(())
}

/// What the session is to do for `i`, verifying with `alg`.
fn get_item(i: &Incoming, alg: Option<Algorithm>) -> GetItem<'_> {
    let zero = is_dev_zero(&i.job.src);
    GetItem {
        path: i.job.src.clone(),
        sink: i.sink.as_ref(),
        len: Some(i.job.size),
        have: i.have.clone(),
        eret: match i.job.piece {
            Some(p) => Some((p.offset, i.job.size)),
            None => zero.then_some((0, i.job.size)),
        },
        cksm: match (&i.part, alg) {
            (Some(part), Some(a)) if !zero && i.job.piece.is_none() => Some((a, part.as_path())),
            _ => None,
        },
        progress: &i.progress,
    }
}

/// The run of item `k` of a batch, `i`, as `clock` timed it.
fn run_of(i: &Incoming, clock: &Clock, k: usize) -> Run {
    Run {
        bytes: i.progress.bytes(),
        elapsed_s: clock.elapsed(k),
        resumed: i.have.is_some(),
    }
}

/// The files of a batch whose data arrived (`inc`, with their `results`): each is verified
/// and moved into place (a piece, once its file's last piece landed), or put back after a
/// first checksum mismatch.
fn landed(
    ctx: &Ctx<'_>,
    sess: &mut Session,
    alg: Option<Algorithm>,
    inc: Vec<Incoming>,
    results: Vec<crate::session::ItemResult>,
    clock: &Clock,
) -> Result<(), XferError> {
    for (k, (i, r)) in inc.into_iter().zip(results).enumerate() {
        let run = run_of(&i, clock, k);
        let Some(part) = i.part else {
            ctx.file_done(&i.job, run, None);
            continue;
        };
        drop(i.sink);
        if i.job.piece.is_some() {
            if let Some(whole) = ctx.piece_done(&i.job, run) {
                let job = i.job.whole();
                let verified = whole_piece_done(ctx, sess, alg, &job, i.tries, &part, whole);
                ctx.or_failed(&job, whole, verified)?;
            }
            continue;
        }
        let checksum = match (alg, &r.server_cksm, &r.local_cksm) {
            (Some(a), Some(remote), Some(local)) => {
                let repaired = remote != local
                    && r.local_chunks.as_ref().is_some_and(|chunks| {
                        super::repair::repaired_download(ctx, sess, &i.job, &part, chunks, remote)
                    });
                let same = repaired
                    || ctx.or_failed(
                        &i.job,
                        run,
                        compare(ctx, &i.job, i.tries, a, remote, local),
                    )?;
                if !same {
                    continue;
                }
                Some((a, remote.as_str()))
            }
            _ => None,
        };
        let renamed = std::fs::rename(&part, &i.job.dst).map_err(|e| XferError::io(&i.job.dst, e));
        ctx.or_failed(&i.job, run, renamed)?;
        resume::clear(&resume::ranges_path(&part));
        ctx.file_done(&i.job, run, checksum);
    }
    Ok(())
}

/// The last piece of a split file landed: verify the whole file (the server hashes its copy
/// while we hash ours) and move it into place, or put it back whole after a mismatch.
fn whole_piece_done(
    ctx: &Ctx<'_>,
    sess: &mut Session,
    alg: Option<Algorithm>,
    job: &Job,
    tries: u32,
    part: &Path,
    run: Run,
) -> Result<(), XferError> {
    let mut digest = None;
    if let Some(a) = alg {
        let (remote, local) = std::thread::scope(|s| {
            let h = s.spawn(|| checksum::checksum_path(part, a));
            (sess.cksm(a, &job.src), h.join())
        });
        let local = local
            .unwrap_or_else(|_| Err(XferError::Internal("checksum thread panicked".into())))?;
        let remote = remote?;
        if !compare(ctx, job, tries, a, &remote, &local)? {
            return Ok(());
        }
        digest = Some((a, remote));
    }
    std::fs::rename(part, &job.dst).map_err(|e| XferError::io(&job.dst, e))?;
    ctx.file_done(job, run, digest.as_ref().map(|(a, d)| (*a, d.as_str())));
    Ok(())
}
