//! The three kinds of worker the engine runs, one per control session (two for third-party):
//! each takes batches of files, moves them pipelined, verifies them, and journals restart state.

use std::collections::HashMap;
use std::fs::File;
use std::path::PathBuf;
use std::sync::Arc;

use haul_proto::{Command, RangeSet};
use haul_transport::io::{Null, RateLimited, Sink, Source, Zero};
use haul_transport::mode_e::Progress;

use crate::checksum::{self, Algorithm};
use crate::engine::{choose_alg, Ctx, Transport};
use crate::error::XferError;
use crate::plan::Job;
use crate::resume;
use crate::session::{DataParams, GetItem, PutItem, Session};
use crate::url::RemoteUrl;

/// The zero source and null sink paths (as Globus names them).
pub const DEV_ZERO: &str = "/dev/zero";
/// See [`DEV_ZERO`].
pub const DEV_NULL: &str = "/dev/null";

/// Opens a session to `url` with the transfer's TLS, PASV and data-timeout settings.
fn open(ctx: &Ctx<'_>, url: &RemoteUrl) -> Result<Session, XferError> {
    let mut s = Session::open(url, ctx.opts().tls.as_ref(), ctx.opts().pasv)?;
    s.set_data_timeout(ctx.opts().data_timeout);
    Ok(s)
}

fn params(ctx: &Ctx<'_>) -> DataParams {
    DataParams {
        parallelism: ctx.parallelism(),
        tcp_buffer: ctx.opts().tcp_buffer,
        block: ctx.opts().block,
    }
}

fn compare(
    ctx: &Ctx<'_>,
    job: &Job,
    tries: u32,
    alg: Algorithm,
    src: &str,
    dst: &str,
) -> Result<bool, XferError> {
    if src == dst {
        return Ok(true);
    }
    let e = XferError::ChecksumMismatch {
        path: job.dst.clone(),
        alg: alg.name().into(),
        expected: src.into(),
        actual: dst.into(),
    };
    ctx.mismatch(job.clone(), tries, e)?;
    Ok(false)
}

fn with_have(p: &Arc<Progress>, have: &Option<RangeSet>) {
    if let (Some(h), Ok(mut r)) = (have, p.ranges.lock()) {
        *r = h.clone();
    }
}

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
struct Shifted {
    inner: Box<dyn Sink>,
    by: u64,
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
}

fn rate_limited(ctx: &Ctx<'_>, file: File) -> Box<dyn Sink> {
    match ctx.opts().max_rate {
        Some(r) => Box::new(RateLimited::new(file, r)),
        None => Box::new(file),
    }
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
    let part = resume::part_path(std::path::Path::new(&job.dst));
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

fn open_incoming(ctx: &Ctx<'_>, job: Job, tries: u32) -> Result<Incoming, XferError> {
    if job.dst == DEV_NULL {
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
    let sink = rate_limited(ctx, file);
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
    let zero_only = batch.iter().all(|(j, _)| j.src == DEV_ZERO);
    let alg = if zero_only {
        None
    } else {
        choose_alg(ctx.opts(), &sess.ctl.features)?
    };
    ctx.set_alg(alg);
    loop {
        let mut inc = Vec::with_capacity(batch.len());
        for (job, tries) in batch {
            inc.push(open_incoming(ctx, job, tries)?);
        }
        let items: Vec<GetItem<'_>> = inc
            .iter()
            .map(|i| {
                let zero = i.job.src == DEV_ZERO;
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
                        (Some(part), Some(a)) if !zero && i.job.piece.is_none() => {
                            Some((a, part.as_path()))
                        }
                        _ => None,
                    },
                    progress: &i.progress,
                }
            })
            .collect();
        // Above a lowered concurrency, leave after the current file: the rest of a batch of
        // small files can take seconds on a new session's first batch, still in slow start, and
        // the tuner waits for the level to take effect before it measures it.
        let leave = || ctx.leaving(idx);
        let got = match ctx.opts().transport {
            Transport::Tcp => sess.get_many(&items, &params(ctx), ctx.pipeline(), &leave),
            Transport::Plut => sess.get_plut(&items, ctx.opts().plut_rate),
        };
        drop(items);
        for i in &inc {
            ctx.untrack(i.id, i.job.size);
        }
        let results = got?;
        let untaken = inc.split_off(results.len().min(inc.len()));
        for (i, r) in inc.into_iter().zip(results) {
            let Some(part) = i.part else {
                ctx.file_done(&i.job.dst, false);
                continue;
            };
            drop(i.sink);
            if i.job.piece.is_some() {
                if ctx.piece_done(&i.job.dst) {
                    whole_piece_done(ctx, &mut sess, alg, &i.job.whole(), i.tries, &part)?;
                }
                continue;
            }
            let verified = match (alg, &r.server_cksm, &r.local_cksm) {
                (Some(a), Some(remote), Some(local)) => {
                    if !compare(ctx, &i.job, i.tries, a, remote, local)? {
                        continue;
                    }
                    true
                }
                _ => false,
            };
            std::fs::rename(&part, &i.job.dst).map_err(|e| XferError::io(&i.job.dst, e))?;
            resume::clear(&resume::ranges_path(&part));
            ctx.file_done(&i.job.dst, verified);
        }
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

/// The last piece of a split file landed: verify the whole file (the server hashes its copy
/// while we hash ours) and move it into place, or put it back whole after a mismatch.
fn whole_piece_done(
    ctx: &Ctx<'_>,
    sess: &mut Session,
    alg: Option<Algorithm>,
    job: &Job,
    tries: u32,
    part: &std::path::Path,
) -> Result<(), XferError> {
    let verified = match alg {
        Some(a) => {
            let (remote, local) = std::thread::scope(|s| {
                let h = s.spawn(|| checksum::checksum_path(part, a));
                (sess.cksm(a, &job.src), h.join())
            });
            let local = local
                .unwrap_or_else(|_| Err(XferError::Internal("checksum thread panicked".into())))?;
            if !compare(ctx, job, tries, a, &remote?, &local)? {
                return Ok(());
            }
            true
        }
        None => false,
    };
    std::fs::rename(part, &job.dst).map_err(|e| XferError::io(&job.dst, e))?;
    ctx.file_done(&job.dst, verified);
    Ok(())
}

struct Outgoing {
    job: Job,
    tries: u32,
    id: u64,
    progress: Arc<Progress>,
    src: Box<dyn Source>,
    journal: PathBuf,
    have: Option<RangeSet>,
}

/// Moves files from local disk to a server.
pub(crate) fn upload(ctx: &Ctx<'_>, url: &RemoteUrl, idx: usize) -> Result<(), XferError> {
    let Some(mut batch) = ctx.next_batch(idx) else {
        return Ok(());
    };
    let mut sess = open(ctx, url)?;
    let zero_only = batch.iter().all(|(j, _)| j.src == DEV_ZERO);
    let alg = if zero_only {
        None
    } else {
        choose_alg(ctx.opts(), &sess.ctl.features)?
    };
    ctx.set_alg(alg);
    loop {
        let mut out = Vec::with_capacity(batch.len());
        for (job, tries) in batch {
            let mut src: Box<dyn Source> = if job.src == DEV_ZERO {
                Box::new(Zero)
            } else {
                Box::new(File::open(&job.src).map_err(|e| XferError::io(&job.src, e))?)
            };
            if let Some(r) = ctx.opts().max_rate {
                src = Box::new(RateLimited::new(src, r));
            }
            let journal = resume::upload_journal(&url.with_path(job.dst.clone()).to_string());
            let have = if ctx.opts().resume {
                resume::load(&journal).filter(|h| !h.is_empty())
            } else {
                None
            };
            let (id, progress) = ctx.track(Some(journal.clone()));
            with_have(&progress, &have);
            out.push(Outgoing {
                job,
                tries,
                id,
                progress,
                src,
                journal,
                have,
            });
        }
        let items: Vec<PutItem<'_>> = out
            .iter()
            .map(|o| PutItem {
                path: o.job.dst.clone(),
                src: o.src.as_ref(),
                len: o.job.size,
                have: o.have.clone(),
                cksm: if o.job.src == DEV_ZERO || o.job.dst == DEV_NULL {
                    None
                } else {
                    alg
                },
                progress: &o.progress,
            })
            .collect();
        // Hash the sources on another core while they are sent.
        let to_hash: Vec<(usize, PathBuf)> = out
            .iter()
            .enumerate()
            .filter(|(_, o)| alg.is_some() && o.job.src != DEV_ZERO && o.job.dst != DEV_NULL)
            .map(|(k, o)| (k, PathBuf::from(&o.job.src)))
            .collect();
        let (put, local) = std::thread::scope(|s| {
            let h = s.spawn(|| {
                to_hash
                    .iter()
                    .map(|(k, p)| {
                        alg.map(|a| checksum::checksum_path(p, a).map(|d| (*k, d)))
                            .transpose()
                    })
                    .collect::<Result<Vec<_>, _>>()
            });
            let put = match ctx.opts().transport {
                Transport::Tcp => sess.put_many(&items, &params(ctx), ctx.pipeline()),
                Transport::Plut => sess.put_plut(&items, ctx.opts().plut_rate),
            };
            (put, h.join())
        });
        drop(items);
        let local: HashMap<usize, String> = local
            .unwrap_or_else(|_| Err(XferError::Internal("checksum thread panicked".into())))?
            .into_iter()
            .flatten()
            .collect();
        for o in &out {
            ctx.untrack(o.id, o.job.size);
        }
        let results = put?;
        for (k, (o, r)) in out.into_iter().zip(results).enumerate() {
            let verified = match (alg, &r.server_cksm, local.get(&k)) {
                (Some(a), Some(remote), Some(mine)) => {
                    if !compare(ctx, &o.job, o.tries, a, mine, remote)? {
                        resume::clear(&o.journal);
                        continue;
                    }
                    true
                }
                _ => false,
            };
            resume::clear(&o.journal);
            ctx.file_done(&o.job.dst, verified);
        }
        match ctx.next_batch(idx) {
            Some(b) => batch = b,
            None => break,
        }
    }
    sess.quit();
    Ok(())
}

/// Drives a server-to-server transfer: STORs to the destination (passive), RETRs to the source
/// (active, it connects to the destination), pipelined like Globus does.
pub(crate) fn third_party(
    ctx: &Ctx<'_>,
    a: &RemoteUrl,
    b: &RemoteUrl,
    idx: usize,
) -> Result<(), XferError> {
    if ctx.opts().transport == Transport::Plut {
        return Err(XferError::Usage(
            "PLUT is not available for server-to-server transfers; use --transport tcp".into(),
        ));
    }
    let Some(mut batch) = ctx.next_batch(idx) else {
        return Ok(());
    };
    let mut src = open(ctx, a)?;
    let mut dst = open(ctx, b)?;
    let mem = batch
        .iter()
        .all(|(j, _)| j.src == DEV_ZERO || j.dst == DEV_NULL);
    let alg = if mem || !ctx.opts().verify {
        None
    } else if let Some(x) = ctx.opts().checksum {
        Some(x)
    } else {
        [
            Algorithm::Xxh128,
            Algorithm::Md5,
            Algorithm::Adler32,
            Algorithm::Crc32c,
        ]
        .into_iter()
        .find(|x| src.ctl.features.has_cksm(x.name()) && dst.ctl.features.has_cksm(x.name()))
        .map(Some)
        .ok_or_else(|| {
            XferError::Usage("the two servers share no checksum algorithm; pass --no-verify".into())
        })?
    };
    ctx.set_alg(alg);
    let mut configured = 0;
    loop {
        let p = ctx.parallelism();
        if configured != p {
            dst.set_mode_e()?;
            // The destination's control peer with its PASV port (unless PASV addresses are
            // trusted): a destination cannot have the source connect to a third host.
            let addr = dst.pasv()?;
            src.set_mode_e()?;
            src.ctl.ok(&Command::Opts {
                command: "RETR".into(),
                options: format!("Parallelism={p},{p},{p};"),
            })?;
            src.ctl.ok(&Command::Port(addr))?;
            configured = p;
        }
        for (job, _) in &batch {
            if job.src == DEV_ZERO {
                dst.ctl.send(&Command::Esto {
                    offset: 0,
                    path: job.dst.clone(),
                })?;
            } else {
                dst.ctl.send(&Command::Stor(job.dst.clone()))?;
            }
        }
        for (job, _) in &batch {
            if job.src == DEV_ZERO {
                src.ctl.send(&Command::Eret {
                    offset: 0,
                    length: job.size,
                    path: job.src.clone(),
                })?;
            } else {
                src.ctl.send(&Command::Retr(job.src.clone()))?;
            }
        }
        for (job, tries) in batch {
            let (id, progress) = ctx.track(None);
            let r = third_party_one(&mut src, &mut dst, &job, &progress);
            ctx.untrack(id, job.size);
            r?;
            let verified = match alg {
                Some(x) => {
                    let s = src.cksm(x, &job.src)?;
                    let d = dst.cksm(x, &job.dst)?;
                    if !compare(ctx, &job, tries, x, &s, &d)? {
                        continue;
                    }
                    true
                }
                None => false,
            };
            ctx.file_done(&job.dst, verified);
        }
        match ctx.next_batch(idx) {
            Some(b) => batch = b,
            None => break,
        }
    }
    src.quit();
    dst.quit();
    Ok(())
}

fn third_party_one(
    src: &mut Session,
    dst: &mut Session,
    job: &Job,
    progress: &Progress,
) -> Result<(), XferError> {
    let stor = Command::Stor(job.dst.clone());
    let retr = Command::Retr(job.src.clone());
    let r = dst.ctl.final_reply(&mut |_| {})?;
    if !r.is_preliminary() {
        return Err(XferError::from_reply(&dst.ctl.name, &stor, &r));
    }
    let r = src.ctl.final_reply(&mut |_| {})?;
    if !r.is_preliminary() {
        return Err(XferError::from_reply(&src.ctl.name, &retr, &r));
    }
    let r = src.ctl.final_reply(&mut |_| {})?;
    if !r.is_success() {
        return Err(XferError::from_reply(&src.ctl.name, &retr, &r));
    }
    let r = dst.ctl.final_reply(&mut |m| {
        if let Some(pm) = haul_proto::PerfMarker::from_lines(&m.lines) {
            progress
                .bytes
                .store(pm.stripe_bytes, std::sync::atomic::Ordering::Relaxed);
        }
    })?;
    if !r.is_success() {
        return Err(XferError::from_reply(&dst.ctl.name, &stor, &r));
    }
    progress
        .bytes
        .store(job.size, std::sync::atomic::Ordering::Relaxed);
    Ok(())
}
