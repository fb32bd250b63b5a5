//! Uploads: files from local disk to a server, hashed locally while they are sent.

use std::collections::HashMap;
use std::fs::File;
use std::path::PathBuf;
use std::sync::Arc;

use haul_proto::RangeSet;
use haul_transport::io::{RateLimited, Source, Zero};
use haul_transport::mode_e::Progress;

use super::{compare, failed_at, is_dev_null, is_dev_zero, open, params, session_alg, with_have};
use crate::checksum::chunked::ChunkList;
use crate::checksum::{self, Algorithm, HashingSource};
use crate::engine::{Clock, Ctx, Run, Transport};
use crate::error::XferError;
use crate::plan::Job;
use crate::resume;
use crate::session::{ItemResult, PutItem, Session};
use crate::url::RemoteUrl;

/// One file of an upload batch: its source, progress and restart journal.
struct Outgoing {
    job: Job,
    tries: u32,
    id: u64,
    progress: Arc<Progress>,
    src: Box<dyn Source>,
    journal: PathBuf,
    have: Option<RangeSet>,
}

/// True if an upload of `job` is verified: it neither reads `/dev/zero` nor writes `/dev/null`.
fn verifiable(job: &Job) -> bool {
    !is_dev_zero(&job.src) && !is_dev_null(&job.dst)
}

/// Opens the source of one upload to `url` and, with `--resume`, loads its journal.
fn open_outgoing(
    ctx: &Ctx<'_>,
    url: &RemoteUrl,
    job: Job,
    tries: u32,
) -> Result<Outgoing, XferError> {
    let mut src: Box<dyn Source> = if is_dev_zero(&job.src) {
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
    Ok(Outgoing {
        job,
        tries,
        id,
        progress,
        src,
        journal,
        have,
    })
}

/// Hashes `files` (index in the batch, local path) with `alg`: each digest by its index.
fn hash_files(
    files: &[(usize, PathBuf)],
    alg: Option<Algorithm>,
) -> Result<HashMap<usize, String>, XferError> {
    let Some(a) = alg else {
        return Ok(HashMap::new());
    };
    files
        .iter()
        .map(|(k, p)| checksum::checksum_path(p, a).map(|d| (*k, d)))
        .collect()
}

/// Moves files from local disk to a server.
pub(crate) fn upload(ctx: &Ctx<'_>, url: &RemoteUrl, idx: usize) -> Result<(), XferError> {
    let Some(mut batch) = ctx.next_batch(idx) else {
        return Ok(());
    };
    let mut sess = open(ctx, url)?;
    let alg = session_alg(ctx, &sess, &batch)?;
    ctx.set_alg(alg);
    loop {
        let out = batch
            .into_iter()
            .map(|(job, tries)| {
                let opened = open_outgoing(ctx, url, job.clone(), tries);
                ctx.or_failed(&job, Run::default(), opened)
            })
            .collect::<Result<Vec<_>, _>>()?;
        // XXHC: each whole file is hashed as its blocks are read to be sent, in any order, so
        // it is read once. Other digests: hashed on another core while the files are sent.
        let inline: Vec<Option<HashingSource<'_>>> = out
            .iter()
            .map(|o| {
                (alg == Some(Algorithm::Xxhc) && verifiable(&o.job) && o.have.is_none())
                    .then(|| HashingSource::new(o.src.as_ref(), Algorithm::Xxhc))
            })
            .collect();
        // Tests corrupt one byte of what is sent, after it was hashed.
        #[cfg(feature = "failpoints")]
        let flips: Vec<Option<crate::failpoint::FlipSource<'_>>> = inline
            .iter()
            .map(|h| {
                let at = crate::failpoint::number("xfer::flip_sent_byte")?;
                Some(crate::failpoint::FlipSource::new(h.as_ref()?, at))
            })
            .collect();
        #[allow(unused_mut)]
        let mut items: Vec<PutItem<'_>> = out
            .iter()
            .zip(&inline)
            .map(|(o, h)| PutItem {
                path: o.job.dst.clone(),
                src: h.as_ref().map_or(o.src.as_ref(), |h| h as &dyn Source),
                len: o.job.size,
                have: o.have.clone(),
                cksm: alg.filter(|_| verifiable(&o.job)),
                progress: &o.progress,
            })
            .collect();
        #[cfg(feature = "failpoints")]
        for (it, f) in items.iter_mut().zip(&flips) {
            if let Some(f) = f {
                it.src = f;
            }
        }
        let to_hash: Vec<(usize, PathBuf)> = out
            .iter()
            .enumerate()
            .filter(|(k, o)| alg.is_some() && verifiable(&o.job) && inline[*k].is_none())
            .map(|(k, o)| (k, PathBuf::from(&o.job.src)))
            .collect();
        let mut clock = Clock::start();
        let (put, local) = std::thread::scope(|s| {
            let h = s.spawn(|| hash_files(&to_hash, alg));
            let done = &mut || clock.note();
            let put = match ctx.opts().transport {
                Transport::Tcp | Transport::Udt => {
                    sess.put_many(&items, &params(ctx), ctx.pipeline(), done)
                }
                Transport::Plut => sess.put_plut(&items, ctx.opts().plut_rate, done),
            };
            (put, h.join())
        });
        drop(items);
        #[cfg(feature = "failpoints")]
        drop(flips);
        let mut local = local
            .unwrap_or_else(|_| Err(XferError::Internal("checksum thread panicked".into())))?;
        for o in &out {
            ctx.untrack(o.id, o.job.size);
        }
        let put = put
            .map_err(|e| failed_at(ctx, &out, &clock, e, |o, k| (&o.job, run_of(o, &clock, k))))?;
        let chunks = inline_digests(inline, &out, &mut local)?;
        let sent = Sent {
            results: put,
            local,
            chunks,
            clock,
        };
        uploads_done(ctx, &mut sess, alg, out, sent)?;
        match ctx.next_batch(idx) {
            Some(b) => batch = b,
            None => break,
        }
    }
    sess.quit();
    Ok(())
}

/// The digests of the files hashed as they were sent (`inline`, by index in the batch) into
/// `local`, and their chunk lists; a file not read exactly once, block by block (a failed
/// send, a source that changed length), is hashed again from the disk.
fn inline_digests(
    inline: Vec<Option<HashingSource<'_>>>,
    out: &[Outgoing],
    local: &mut HashMap<usize, String>,
) -> Result<HashMap<usize, ChunkList>, XferError> {
    let mut chunks = HashMap::new();
    for (k, h) in inline.into_iter().enumerate() {
        let Some(h) = h else { continue };
        let digest = match h.finish_full(out[k].job.size) {
            Some((d, list)) => {
                chunks.extend(list.map(|l| (k, l)));
                d
            }
            None => {
                checksum::checksum_path(std::path::Path::new(&out[k].job.src), Algorithm::Xxhc)?
            }
        };
        local.insert(k, digest);
    }
    Ok(chunks)
}

/// What a batch's uploads left to check: the server's replies, our digests and, for XXHC
/// hashed as the files were sent, our chunk digests, each by index in the batch.
struct Sent {
    results: Vec<ItemResult>,
    local: HashMap<usize, String>,
    chunks: HashMap<usize, ChunkList>,
    clock: Clock,
}

/// The run of item `k` of a batch, `o`, as `clock` timed it.
fn run_of(o: &Outgoing, clock: &Clock, k: usize) -> Run {
    Run {
        bytes: o.progress.bytes(),
        elapsed_s: clock.elapsed(k),
        resumed: o.have.is_some(),
    }
}

/// Compares each sent file's server checksum with ours, clears its journal and reports it
/// done, or, after an XXHC mismatch, sends again the chunks that differ, or reports the
/// mismatch (see [`compare`]).
fn uploads_done(
    ctx: &Ctx<'_>,
    sess: &mut Session,
    alg: Option<Algorithm>,
    out: Vec<Outgoing>,
    sent: Sent,
) -> Result<(), XferError> {
    for (k, (o, r)) in out.into_iter().zip(sent.results).enumerate() {
        let run = run_of(&o, &sent.clock, k);
        let checksum = match (alg, &r.server_cksm, sent.local.get(&k)) {
            (Some(a), Some(remote), Some(mine)) => {
                let repaired = mine != remote
                    && sent.chunks.get(&k).is_some_and(|list| {
                        let src = o.src.as_ref();
                        super::repair::repaired_upload(ctx, sess, &o.job, src, list, mine)
                    });
                let same = repaired
                    || ctx.or_failed(
                        &o.job,
                        run,
                        compare(ctx, &o.job, o.tries, a, mine, remote),
                    )?;
                if !same {
                    resume::clear(&o.journal);
                    continue;
                }
                Some((a, mine.as_str()))
            }
            _ => None,
        };
        resume::clear(&o.journal);
        ctx.file_done(&o.job, run, checksum);
    }
    Ok(())
}
