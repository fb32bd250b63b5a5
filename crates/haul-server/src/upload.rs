//! Uploads (STOR / APPE / ESTO), which never damage the target on failure. A plain STOR writes
//! the part file `.<name>.haul-part` beside the target, opened under a handle of the target's
//! directory with `O_NOFOLLOW`, and renames it over the target only after the whole transfer
//! arrived (every MODE E EOD; in MODE S, a close while the client is still connected). A failed
//! upload leaves the part file for a restart (`REST <ranges>` + STOR continues it), except on a
//! full disk, where it is removed. `ESTO` and `APPE` write in place, as their callers asked for.
//!
//! One writer per file: a server-wide registry keyed by (directory, name) refuses a second upload
//! to the same target, whichever of STOR / APPE / ESTO each is, and an exclusive `flock` on the
//! file written keeps another server process out.

use std::collections::HashSet;
use std::fs::File;
use std::io;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use haul_proto::command::Restart;
use haul_proto::RangeSet;
use haul_transport::checksum::{Algorithm, Finished, HashingSink};
use haul_transport::io::{on_local_fs, on_tmpfs, DirectFile, Null, OneWriter, Sink, DIRECT_FROM};

use crate::session::{fs_error, FileId, KnownDigest, Session};
use crate::vfs::{Parent, Target};
use haul_proto::server::{Outcome, WriteKind};

/// The files being written by this server: (directory device, directory inode, name).
pub type Writers = Mutex<HashSet<(u64, u64, Vec<u8>)>>;

/// Holds one file's place in [`Writers`] until dropped.
pub(crate) struct Writing<'a> {
    writers: &'a Writers,
    key: (u64, u64, Vec<u8>),
}

impl Drop for Writing<'_> {
    fn drop(&mut self) {
        self.writers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.key);
    }
}

/// How long an upload waits for another upload of the same file to let go before `450`: a
/// client killed mid-upload and resuming at once finds its old session still winding down (the
/// server notices the departure within a watch tick, longer on a loaded host).
const WRITER_WAIT: Duration = Duration::from_secs(3);

/// Takes the file's place in the registry, waiting up to [`WRITER_WAIT`] for another upload of
/// it to end; None if it still holds the place.
fn start_writing<'a>(writers: &'a Writers, parent: &Parent) -> io::Result<Option<Writing<'a>>> {
    let key = parent.key()?;
    let deadline = Instant::now() + WRITER_WAIT;
    loop {
        if writers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key.clone())
        {
            return Ok(Some(Writing { writers, key }));
        }
        if Instant::now() >= deadline {
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Takes an exclusive `flock` on `file` without waiting; false if another process holds it.
/// Where the file system does not support `flock`, the write goes ahead unlocked.
pub(crate) fn lock_exclusive(file: &File) -> bool {
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a file descriptor owned by `file`.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    rc == 0 || io::Error::last_os_error().raw_os_error() != Some(libc::EWOULDBLOCK)
}

/// Empties `file` for an upload that starts over, unless it is empty already (a part file just
/// created). On ext4, truncating a file to length 0, even an empty one, marks it for
/// `auto_da_alloc`: closing it then allocates and writes back everything written since,
/// before `close` returns. For a new upload that is the whole file just received, and the
/// `226` waited for it (0.5 s for 1 GiB here), as did the next `fsync` anyone made on that
/// file system.
pub(crate) fn start_empty(file: &File) -> io::Result<()> {
    if file.metadata()?.len() == 0 {
        return Ok(());
    }
    file.set_len(0)
}

/// True if `e` says the file system is full (or the user's quota is).
fn disk_full(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT))
}

/// A new upload of `size` announced bytes (`ALLO`) written around the page cache, when it is
/// large, on a local disk, and its digest is already asked for as XXHC (a `CKSM XXHC`
/// pipelined behind the `STOR`, as `haul cp` and a haul relay send it), so its chunks are
/// hashed as they land and nothing reads the file back: reserved on disk and opened a second
/// time with `O_DIRECT` (see [`DirectFile`]). None otherwise: a digest asked for after the
/// upload (by `globus-url-copy -verify-checksum`, gfal2) reads the file back, which the page
/// cache answers at memory speed and the disk at a fraction of it.
fn direct_upload(virt: &str, file: &File, size: u64, alg: Option<Algorithm>) -> Option<DirectFile> {
    let inline = alg == Some(Algorithm::Xxhc);
    if size < DIRECT_FROM || !inline || !on_local_fs(file) || on_tmpfs(file) {
        return None;
    }
    let d = DirectFile::reopen(file.try_clone().ok()?).ok()?;
    let reserved = d.reserve(size);
    tracing::debug!(path = %virt, size, reserved, "upload written around the page cache (O_DIRECT)");
    Some(d)
}

/// Where an upload writes, by its command and the `REST` before it.
struct Placement {
    /// Whether it writes the part file (renamed over the target at the end) or the target.
    to_part: bool,
    /// Whether the file written starts over empty.
    truncate: bool,
    /// The file offset of MODE E block offset 0.
    base: u64,
    /// The file offset of a MODE S stream's first byte.
    start: u64,
}

impl Placement {
    /// Where a `kind` upload to `parent`'s name writes, restarting at `rest` if given: a STOR
    /// restarts into the part file when there is one, an APPE writes at the end of the file.
    fn of(kind: &WriteKind, rest: Option<&Restart>, parent: &Parent) -> Placement {
        let held_end = |r: &Restart| match r {
            Restart::Offset(o) => *o,
            Restart::Ranges(r) => r.missing(u64::MAX).first().map_or(0, |m| m.0),
        };
        let has_part = matches!(parent.part_lstat(), Ok(Some(_)));
        let (to_part, truncate, base, start) = match (kind, rest) {
            (WriteKind::Stor, None) => (true, true, 0, 0),
            (WriteKind::Stor, Some(r)) => (has_part, false, 0, held_end(r)),
            (WriteKind::Appe, _) => {
                let len = parent.lstat().ok().flatten().map_or(0, |m| m.len());
                (false, false, len, len)
            }
            (WriteKind::Esto(o), _) => (false, false, *o, *o),
        };
        Placement {
            to_part,
            truncate,
            base,
            start,
        }
    }
}

impl<'a> Session<'a> {
    /// The checks every upload to `virt` makes before it opens anything: a writable user, a name
    /// that is not reserved, a parent inside the root, a target that is a regular file or new
    /// (never a directory, device or symlink), and no other upload to it. Replies and returns
    /// None when one fails; otherwise the parent handle and the file's place in the registry.
    pub(crate) fn start_upload(&mut self, virt: &str) -> io::Result<Option<(Parent, Writing<'a>)>> {
        if !self.check_write()? {
            return Ok(None);
        }
        let Some(parent) = self.parent_of(virt, true)? else {
            return Ok(None);
        };
        let refuse = match parent.lstat() {
            Ok(Some(m)) if m.is_dir() => Some(format!("{virt}: Is a directory")),
            Ok(Some(m)) if m.file_type().is_symlink() => {
                // Say why in the confinement's words when the link leads outside.
                let outside = self
                    .shared
                    .vfs
                    .stat(virt)
                    .is_err_and(|e| e.raw_os_error() == Some(libc::EXDEV));
                let e =
                    io::Error::from_raw_os_error(if outside { libc::EXDEV } else { libc::ELOOP });
                Some(fs_error(virt, &e))
            }
            Ok(Some(m)) if !m.is_file() => Some(format!("{virt}: not a regular file")),
            Ok(_) => None,
            Err(e) => Some(fs_error(virt, &e)),
        };
        if let Some(why) = refuse {
            self.answer(550, why)?;
            return Ok(None);
        }
        let shared: &'a crate::session::Shared = self.shared;
        match start_writing(&shared.writers, &parent) {
            Ok(Some(w)) => Ok(Some((parent, w))),
            Ok(None) => self
                .answer(
                    450,
                    format!("{virt}: another upload to this file is in progress"),
                )
                .map(|()| None),
            Err(e) => self.answer(550, fs_error(virt, &e)).map(|()| None),
        }
    }

    /// STOR / APPE / ESTO: receive a file, never damaging the target on failure.
    pub(crate) fn cmd_stor(
        &mut self,
        arg: &str,
        kind: WriteKind,
        rest: Option<Restart>,
        allocate: Option<u64>,
    ) -> io::Result<()> {
        let virt = match self.resolve(arg) {
            Target::Null => return self.stor_null(),
            Target::Zero => {
                return self.answer(550, "/dev/zero: Permission denied (read-only device)")
            }
            Target::Path(virt) => virt,
        };
        let Some((parent, _writing)) = self.start_upload(&virt)? else {
            return Ok(());
        };
        if !self.data_ready()? {
            return Ok(());
        }
        let at = Placement::of(&kind, rest.as_ref(), &parent);
        let Some(file) = self.open_upload(&virt, &parent, &at)? else {
            return Ok(());
        };
        // A new file whose checksum the client asks for next: hash the blocks as they are
        // written, rather than reading the file back for the CKSM.
        let fresh = matches!((&kind, &rest), (WriteKind::Stor, None));
        let alg = fresh.then(|| self.pipelined_cksm(&virt)).flatten();
        let direct = allocate
            .filter(|_| fresh && self.shared.cfg.direct_io)
            .and_then(|size| direct_upload(&virt, &file, size, alg));
        // Parallel streams take turns writing on local file systems (see `OneWriter`).
        let one = OneWriter::new(&file);
        let writer: &dyn Sink = match &direct {
            Some(d) => d,
            None if on_local_fs(&file) => &one,
            None => &file,
        };
        let hashing = alg.map(|a| HashingSink::over(writer, a, &file));
        let sink: &dyn Sink = match &hashing {
            Some(h) => h,
            None => writer,
        };
        let received = self.receive_into(sink, at.base, at.start, true)?;
        if let Some(d) = &direct {
            // The reservation made the file as long as announced: cut it back to what came.
            let end = d.written_end();
            if file.metadata().is_ok_and(|m| m.len() > end) {
                if let Err(e) = file.set_len(end) {
                    tracing::warn!(path = %virt, error = %e, "upload not cut back to its length");
                }
            }
        }
        let got: RangeSet = match received {
            Ok(got) => got,
            Err(None) => return Ok(()),
            Err(Some(e)) => return self.upload_failed(&virt, &parent, file, at.to_part, &e),
        };
        let len = got.ranges().last().map_or(0, |r| r.1);
        // None unless every byte of [0, len) was hashed.
        let digest = hashing.and_then(|h| h.finish_full(len));
        drop(file);
        self.finish_upload(virt, &parent, at.to_part, alg.zip(digest))
    }

    /// STOR to `/dev/null`: receives the data and keeps none of it.
    fn stor_null(&mut self) -> io::Result<()> {
        match self.receive_into(&Null, 0, 0, true)? {
            Ok(_) => self.finish(Outcome::Complete),
            Err(None) => Ok(()),
            Err(Some(e)) => self.finish(Outcome::Failed(e.to_string())),
        }
    }

    /// Opens the file an upload writes and locks it, and empties it when the upload starts
    /// over; replies and returns None when it cannot.
    fn open_upload(
        &mut self,
        virt: &str,
        parent: &Parent,
        at: &Placement,
    ) -> io::Result<Option<File>> {
        // Not truncating yet: another process may be writing this file, and nothing of its data
        // may be lost before the lock below says so.
        let opened = if at.to_part {
            parent.open_part(at.truncate)
        } else {
            parent.open_write(false)
        };
        let file = match opened {
            Ok(f) => f,
            Err(e) => return self.answer(550, fs_error(virt, &e)).map(|()| None),
        };
        if !lock_exclusive(&file) {
            return self
                .answer(
                    450,
                    format!("{virt}: another upload to this file is in progress"),
                )
                .map(|()| None);
        }
        if at.truncate {
            if let Err(e) = start_empty(&file) {
                return self.answer(550, fs_error(virt, &e)).map(|()| None);
            }
        }
        Ok(Some(file))
    }

    /// Answers an upload whose data connection failed with `e`: on a full disk the part file
    /// is removed (`452`), otherwise what arrived is kept for a restart (`426`).
    fn upload_failed(
        &mut self,
        virt: &str,
        parent: &Parent,
        file: File,
        to_part: bool,
        e: &io::Error,
    ) -> io::Result<()> {
        if disk_full(e) {
            drop(file);
            if to_part {
                if let Err(rm) = parent.remove_part() {
                    tracing::warn!(path = %virt, error = %rm, "part file not removed after a full disk");
                }
            }
            tracing::warn!(path = %virt, "upload failed: disk full");
            return self.answer(
                452,
                format!("{virt}: No space left on device; upload aborted, nothing kept"),
            );
        }
        tracing::warn!(path = %virt, part = to_part, error = %e, "upload failed; partial data kept");
        self.finish(Outcome::Failed(e.to_string()))
    }

    /// Ends an upload that arrived whole: renames the part file over the target, keeps the
    /// digest computed on the way for the client's `CKSM`, and defers the `226`.
    fn finish_upload(
        &mut self,
        virt: String,
        parent: &Parent,
        to_part: bool,
        digest: Option<(Algorithm, Finished)>,
    ) -> io::Result<()> {
        if to_part {
            if let Err(e) = parent.commit_part() {
                return self.answer(550, fs_error(&virt, &e));
            }
        }
        self.remember_upload_digest(virt, digest);
        self.finish(Outcome::Complete)
    }

    /// Keeps the digest computed while `virt` was received for the `CKSM` that follows, with
    /// the file's identity after the rename (which changes its ctime).
    pub(crate) fn remember_upload_digest(
        &mut self,
        virt: String,
        digest: Option<(Algorithm, Finished)>,
    ) {
        if let (Some((alg, (hex, chunks))), Ok(m)) = (digest, self.shared.vfs.stat(&virt)) {
            self.known_digest = Some(KnownDigest {
                virt,
                alg,
                id: FileId::of(&m),
                hex,
                chunks,
            });
        }
    }
}
