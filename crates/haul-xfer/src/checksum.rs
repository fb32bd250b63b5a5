//! The client's side of checksums: reading a CKSM reply, and hashing local files with errors
//! that name them. The algorithms and hashers themselves are `haul_transport::checksum`, shared
//! with the server, and re-exported here.

use std::os::unix::fs::FileExt;

pub use haul_transport::checksum::*;

/// The digest of a `213` reply to CKSM as the client compares it: the reply's last line,
/// trimmed and lower-cased (Globus and haul send the hex digest as the only line).
pub fn parse_cksm_reply(r: &haul_proto::Reply) -> Option<String> {
    r.lines.last().map(|l| l.trim().to_ascii_lowercase())
}

/// Hashes a file that is still being written, following the contiguous prefix that
/// `written()` reports, so the digest is ready moments after the last byte lands. `finished`
/// turns true once no more bytes will come; then the rest of the file is hashed.
pub fn follow(
    path: &std::path::Path,
    alg: Algorithm,
    written: &dyn Fn() -> u64,
    finished: &std::sync::atomic::AtomicBool,
) -> Result<String, crate::XferError> {
    use std::sync::atomic::Ordering;
    let what = || path.display().to_string();
    let f = std::fs::File::open(path).map_err(|e| crate::XferError::io(&what(), e))?;
    let mut h = Hasher::new(alg);
    let mut buf = vec![0u8; 1 << 20];
    let mut at = 0u64;
    loop {
        let done = finished.load(Ordering::Acquire);
        let limit = if done { u64::MAX } else { written() };
        if at < limit {
            let want = ((limit - at).min(buf.len() as u64)) as usize;
            let n = FileExt::read_at(&f, &mut buf[..want], at)
                .map_err(|e| crate::XferError::io(&what(), e))?;
            if n == 0 && done {
                break;
            }
            h.update(&buf[..n]);
            at += n as u64;
        } else if done {
            break;
        } else {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
    Ok(h.finish_hex())
}

/// Checksums a whole local file; errors name the path.
pub fn checksum_path(path: &std::path::Path, alg: Algorithm) -> Result<String, crate::XferError> {
    let f = std::fs::File::open(path)
        .map_err(|e| crate::XferError::io(&path.display().to_string(), e))?;
    checksum(&f, alg, 0, None).map_err(|e| crate::XferError::io(&path.display().to_string(), e))
}
