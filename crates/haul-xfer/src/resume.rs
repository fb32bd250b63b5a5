//! Restart state that survives a killed client: the byte ranges a receiver holds for a file,
//! saved beside the partial download (`FILE.haul-part.ranges`) or, for uploads, in haul's state
//! directory keyed by the destination URL (from the server's 111 restart markers). Also how the
//! files next to a destination are opened: never through a symbolic link planted at their name
//! (`O_NOFOLLOW`), and new ones with `O_EXCL`.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
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
    let h = twox_hash::XxHash3_64::oneshot(dst_url.as_bytes());
    base.join("haul/resume").join(format!("{h:016x}.ranges"))
}

fn no_follow() -> OpenOptions {
    let mut o = OpenOptions::new();
    o.custom_flags(libc::O_NOFOLLOW);
    o
}

/// Says why an open failed where a link or a planted file is the likely cause.
fn explain(e: io::Error) -> io::Error {
    let why = match e.raw_os_error() {
        Some(libc::ELOOP) => "symbolic link here: refusing to follow it (part files and journals are never written through links)",
        Some(libc::EEXIST) => "created by someone else while haul replaced it: refusing to use it",
        _ => return e,
    };
    io::Error::new(e.kind(), why)
}

/// Creates `path` as a new file for reading and writing. A regular file already there (a stale
/// part file, a journal's leftover) is removed first; a symbolic link there is an error, and
/// `O_EXCL` means nothing planted in between is followed (nor a hard link written through).
pub fn create_new(path: &Path) -> io::Result<File> {
    match path.symlink_metadata() {
        Ok(m) if m.file_type().is_symlink() => {
            return Err(explain(io::Error::from_raw_os_error(libc::ELOOP)))
        }
        Ok(_) => std::fs::remove_file(path)?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    no_follow()
        .read(true)
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(explain)
}

/// Opens the file at `path` for reading and writing, creating it when `create` and it is
/// missing: never through a symbolic link, and only a regular file with no other hard link.
pub fn open_existing(path: &Path, create: bool) -> io::Result<File> {
    let f = no_follow()
        .read(true)
        .write(true)
        .create(create)
        .open(path)
        .map_err(explain)?;
    let m = f.metadata()?;
    if !m.is_file() || m.nlink() > 1 {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a regular file of its own (a device, or hard-linked elsewhere): refusing to write to it"));
    }
    Ok(f)
}

/// Saves ranges atomically: written to a new `.tmp` file (see [`create_new`]), then renamed over
/// `path` (which replaces a link there rather than following it).
pub fn save(path: &Path, r: &RangeSet) -> io::Result<()> {
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d)?;
    }
    let tmp = path.with_extension("tmp");
    let mut f = create_new(&tmp)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", tmp.display())))?;
    f.write_all(r.to_string().as_bytes())?;
    drop(f);
    std::fs::rename(tmp, path)
}

/// Loads ranges; None when absent, unreadable or a symbolic link (then everything is sent again).
pub fn load(path: &Path) -> Option<RangeSet> {
    let mut s = String::new();
    match io::Read::read_to_string(&mut no_follow().read(true).open(path).ok()?, &mut s) {
        Ok(_) => RangeSet::parse(&s).ok(),
        Err(_) => None,
    }
}

/// True when a regular file (not a link) stands at `path`.
pub fn is_file(path: &Path) -> bool {
    path.symlink_metadata()
        .is_ok_and(|m| m.file_type().is_file())
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

    #[test]
    fn part_files_are_made_new_or_are_our_own() {
        let d = tempfile::tempdir().unwrap();
        let p = part_path(&d.path().join("f"));
        std::fs::write(&p, b"stale").unwrap();
        assert_eq!(
            create_new(&p).unwrap().metadata().unwrap().len(),
            0,
            "a stale part file is replaced"
        );
        std::fs::hard_link(&p, d.path().join("elsewhere")).unwrap();
        let e = open_existing(&p, false).unwrap_err();
        assert!(e.to_string().contains("hard-linked"), "{e}");
        let victim = d.path().join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        let q = part_path(&d.path().join("g"));
        std::os::unix::fs::symlink(&victim, &q).unwrap();
        for e in [
            create_new(&q).unwrap_err(),
            open_existing(&q, true).unwrap_err(),
        ] {
            assert!(e.to_string().contains("symbolic link"), "{e}");
        }
        assert_eq!(load(&q), None, "a linked journal is not read");
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
    }

    #[test]
    fn saving_a_journal_never_writes_through_a_planted_link() {
        let d = tempfile::tempdir().unwrap();
        let victim = d.path().join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        let p = ranges_path(&part_path(&d.path().join("f")));
        std::os::unix::fs::symlink(&victim, p.with_extension("tmp")).unwrap();
        let e = save(&p, &RangeSet::parse("0-10").unwrap()).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        // A link at the journal's own name is replaced by the rename, not followed.
        std::fs::remove_file(p.with_extension("tmp")).unwrap();
        std::os::unix::fs::symlink(&victim, &p).unwrap();
        save(&p, &RangeSet::parse("0-10").unwrap()).unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        assert!(!std::fs::symlink_metadata(&p)
            .unwrap()
            .file_type()
            .is_symlink());
    }
}
