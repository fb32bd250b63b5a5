//! After an XXHC mismatch on a download: asks the server for its chunk digests
//! (`CKSM XXHC-LIST`), fetches only the chunks whose digests differ from ours (`ERET`), hashes
//! them again, and checks the file's digest once more.

use std::path::Path;

use haul_transport::mode_e::Progress;

use super::download::Shifted;
use super::params;
use crate::checksum::chunked::{ChunkList, CHUNK};
use crate::checksum::feed_chunks;
use crate::engine::Ctx;
use crate::error::XferError;
use crate::plan::Job;
use crate::session::{GetItem, Session};

/// The byte ranges whose chunks differ between `local` and the server's copy of `src`, or
/// None when the server's chunks do not describe a file of our length with digest `remote`
/// (the file changed there: only a whole new copy will do).
fn differing(
    sess: &mut Session,
    src: &str,
    local: &ChunkList,
    remote: &str,
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
    Ok((list.root_hex() == remote).then(|| local.differing(0, &list.digests)))
}

/// Re-fetches the chunks of the downloaded `part` of `job` that differ from the server's copy;
/// returns the bytes fetched once the file's digest matches `remote`, or None when a whole new
/// copy is needed.
pub(super) fn repair(
    ctx: &Ctx<'_>,
    sess: &mut Session,
    job: &Job,
    part: &Path,
    local: &ChunkList,
    remote: &str,
) -> Result<Option<u64>, XferError> {
    let Some(bad) = differing(sess, &job.src, local, remote)? else {
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
    sess.get_many(&items, &params(ctx), ctx.pipeline(), &|| false)?;
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
