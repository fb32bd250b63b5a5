//! After an XXHC mismatch: asks the server for its chunk digests (`CKSM XXHC-LIST`) and moves
//! again only the chunks whose digests differ from ours. A download fetches them with `ERET`
//! and hashes them again; an upload sends them with `REST <ranges held>` + `STOR`, which a
//! haul server writes in place, and asks for the file's digest once more.

use std::path::Path;

use haul_proto::RangeSet;
use haul_transport::io::Source;
use haul_transport::mode_e::Progress;

use super::download::Shifted;
use super::params;
use crate::checksum::chunked::feed_chunks;
use crate::checksum::chunked::{ChunkList, CHUNK};
use crate::checksum::Algorithm;
use crate::engine::Ctx;
use crate::error::XferError;
use crate::plan::Job;
use crate::session::{GetItem, PutItem, Session};

/// The byte ranges whose chunks differ between `local` and the server's copy of `src`, or
/// None when the server's chunks do not describe a file of our length (with digest `remote`,
/// when given: else the file changed there, and only a whole new copy will do).
fn differing(
    sess: &mut Session,
    src: &str,
    local: &ChunkList,
    remote: Option<&str>,
) -> Result<Option<Vec<(u64, u64)>>, XferError> {
    let mut theirs = Vec::with_capacity(local.digests.len());
    while (theirs.len() as u64) < local.digests.len() as u64 {
        let w = sess.cksm_list(src, theirs.len() as u64 * CHUNK)?;
        if w.len != local.len || w.first != theirs.len() as u64 || w.digests.is_empty() {
            return Ok(None);
        }
        theirs.extend(w.digests);
    }
    let list = ChunkList {
        len: local.len,
        digests: theirs,
    };
    let consistent = remote.is_none_or(|r| list.root_hex() == r);
    Ok(consistent.then(|| local.differing(0, &list.digests)))
}

/// Sends again the chunks of the uploaded `job` whose digests differ from the server's; true
/// once the server's digest of the file is ours (`mine`). Any failure leaves the file to be
/// sent again whole.
pub(super) fn repaired_upload(
    ctx: &Ctx<'_>,
    sess: &mut Session,
    job: &Job,
    src: &dyn Source,
    local: &ChunkList,
    mine: &str,
) -> bool {
    let run = |sess: &mut Session| -> Result<Option<u64>, XferError> {
        let Some(bad) = differing(sess, &job.dst, local, None)? else {
            return Ok(None);
        };
        if bad.is_empty() {
            return Ok(None);
        }
        let mut differ = RangeSet::new();
        bad.iter().for_each(|&(s, e)| differ.insert(s, e));
        let mut held = RangeSet::new();
        for (s, e) in differ.missing(local.len) {
            held.insert(s, e);
        }
        let progress = Progress::default();
        let item = PutItem {
            path: job.dst.clone(),
            src,
            len: local.len,
            have: Some(held),
            cksm: Some(Algorithm::Xxhc),
            progress: &progress,
        };
        let r = sess.put_many(
            std::slice::from_ref(&item),
            &params(ctx),
            ctx.pipeline(),
            &mut || {},
        )?;
        let bytes = bad.iter().map(|(s, e)| e - s).sum();
        Ok((r.first().and_then(|r| r.server_cksm.as_deref()) == Some(mine)).then_some(bytes))
    };
    report(ctx, job, run(sess))
}

/// Re-fetches the differing chunks of a downloaded file whose digest did not match; true
/// once it matches. Any failure leaves the file to be sent again whole.
pub(super) fn repaired_download(
    ctx: &Ctx<'_>,
    sess: &mut Session,
    job: &Job,
    part: &Path,
    local: &ChunkList,
    remote: &str,
) -> bool {
    report(ctx, job, repair(ctx, sess, job, part, local, remote))
}

/// Counts and logs a repair's outcome; true when it made the digests match.
fn report(ctx: &Ctx<'_>, job: &Job, r: Result<Option<u64>, XferError>) -> bool {
    match r {
        Ok(Some(bytes)) => {
            tracing::warn!(
                "{}: checksum mismatch; re-sent the {bytes} bytes of the chunks that differed",
                job.dst
            );
            ctx.chunks_resent(bytes);
            true
        }
        Ok(None) => false,
        Err(e) => {
            tracing::warn!("{}: re-sending the chunks that differ failed: {e}", job.dst);
            false
        }
    }
}

/// Re-fetches the chunks of the downloaded `part` of `job` that differ from the server's copy;
/// returns the bytes fetched once the file's digest matches `remote`, or None when a whole new
/// copy is needed.
fn repair(
    ctx: &Ctx<'_>,
    sess: &mut Session,
    job: &Job,
    part: &Path,
    local: &ChunkList,
    remote: &str,
) -> Result<Option<u64>, XferError> {
    let Some(bad) = differing(sess, &job.src, local, Some(remote))? else {
        return Ok(None);
    };
    if bad.is_empty() {
        return Ok(None);
    }
    let what = || part.display().to_string();
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(part)
        .map_err(|e| XferError::io(&what(), e))?;
    let sinks = bad
        .iter()
        .map(|&(s, _)| {
            let inner = file.try_clone().map_err(|e| XferError::io(&what(), e))?;
            Ok(Shifted {
                inner: Box::new(inner),
                by: s,
            })
        })
        .collect::<Result<Vec<_>, XferError>>()?;
    let progress: Vec<Progress> = bad.iter().map(|_| Progress::default()).collect();
    let items: Vec<GetItem<'_>> = bad
        .iter()
        .zip(&sinks)
        .zip(&progress)
        .map(|((&(s, e), sink), progress)| GetItem {
            path: job.src.clone(),
            sink,
            len: Some(e - s),
            have: None,
            eret: Some((s, e - s)),
            cksm: None,
            progress,
        })
        .collect();
    sess.get_many(&items, &params(ctx), ctx.pipeline(), &|| false, &mut || {})?;
    let mut mine = local.clone();
    let mut bytes = 0;
    for &(s, e) in &bad {
        let fresh = feed_chunks(&file, s, e).map_err(|e| XferError::io(&what(), e))?;
        let first = (s / CHUNK) as usize;
        mine.digests[first..first + fresh.len()].copy_from_slice(&fresh);
        bytes += e - s;
    }
    Ok((mine.root_hex() == remote).then_some(bytes))
}
