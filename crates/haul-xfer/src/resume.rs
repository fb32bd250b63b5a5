//! Restart state that survives a killed client: the byte ranges a receiver holds for a file,
//! saved beside the partial download (`FILE.haul-part.ranges`) or, for uploads, in haul's state
//! directory keyed by the destination URL (from the server's 111 restart markers).

use std::path::{Path, PathBuf};

use haul_proto::RangeSet;

/// The partial file a download writes before it is verified and renamed.
pub fn part_path(dst: &Path) -> PathBuf {
    let mut s = dst.as_os_str().to_owned();
    s.push(".haul-part");
    PathBuf::from(s)
}

/// The ranges journal of a partial download.
pub fn ranges_path(part: &Path) -> PathBuf {
    let mut s = part.as_os_str().to_owned();
    s.push(".ranges");
    PathBuf::from(s)
}

/// The ranges journal of an upload to `dst_url`.
pub fn upload_journal(dst_url: &str) -> PathBuf {
    let base = std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))
        .unwrap_or_else(std::env::temp_dir);
    let h = xxhash_rust::xxh3::xxh3_64(dst_url.as_bytes());
    base.join("haul/resume").join(format!("{h:016x}.ranges"))
}

/// Saves ranges atomically (write then rename).
pub fn save(path: &Path, r: &RangeSet) -> std::io::Result<()> {
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d)?;
    }
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, r.to_string())?;
    std::fs::rename(tmp, path)
}

/// Loads ranges; None when absent or unreadable (then everything is sent again).
pub fn load(path: &Path) -> Option<RangeSet> {
    let s = std::fs::read_to_string(path).ok()?;
    RangeSet::parse(&s).ok()
}

/// Removes a journal; a missing one is fine.
pub fn clear(path: &Path) {
    // A stat first: most files never had a journal, and unlink takes the directory's lock,
    // which concurrent sessions writing into one directory then queue on.
    if path.symlink_metadata().is_ok() {
        let _ = std::fs::remove_file(path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let d = tempfile::tempdir().unwrap();
        let p = ranges_path(&part_path(&d.path().join("f")));
        assert!(p.to_string_lossy().ends_with("f.haul-part.ranges"));
        let r = RangeSet::parse("0-10,20-30").unwrap();
        save(&p, &r).unwrap();
        assert_eq!(load(&p), Some(r));
        clear(&p);
        assert_eq!(load(&p), None);
    }
}
