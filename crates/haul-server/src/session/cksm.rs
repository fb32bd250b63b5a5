//! CKSM, and the digests of whole files computed while they were sent or received, which
//! answer a `CKSM` pipelined after the transfer without reading the file again.

use std::fs;
use std::io;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use haul_transport::checksum::chunked::{self, ChunkList, ListWindow};
use haul_transport::checksum::{checksum, Algorithm};
use haul_transport::io::{Source, Zero};

use super::{fs_error, Session};
use crate::journal::ServerEvent;
use crate::vfs::{Root, Target};

/// Most bytes of `/dev/zero` a `CKSM` hashes (1 GiB): enough to check a memory-to-memory
/// digest path, not enough to pin a core.
const MAX_ZERO_CKSM: u64 = 1 << 30;

/// A source that fails once the session's client has left, so the work it feeds (a `CKSM` of a
/// large file) stops with it. Reads are of at most a few MiB, so the check costs nothing.
struct WhileClientStays<'a> {
    src: &'a dyn Source,
    watch: crate::control::ClientWatch,
}

impl Source for WhileClientStays<'_> {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        if self.watch.gone(Duration::ZERO) {
            return Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "the client left",
            ));
        }
        self.src.read_at(buf, offset)
    }
}

/// A digest computed while a whole file was sent or received (see `Session::known_digest`).
pub struct KnownDigest {
    /// The file's virtual path.
    pub virt: String,
    /// The algorithm.
    pub alg: Algorithm,
    /// The file as it was opened; the digest stands only while the file still looks the same.
    pub id: FileId,
    /// Lowercase hex.
    pub hex: String,
    /// For XXHC, the chunk digests behind `hex`.
    pub chunks: Option<ChunkList>,
}

/// The XXHC chunk digests of a whole file, while it still looks the same.
pub struct KnownChunks {
    /// The file's virtual path.
    pub virt: String,
    /// The file as it was hashed.
    pub id: FileId,
    /// Its chunk digests.
    pub list: ChunkList,
}

/// What identifies a file's content for [`KnownDigest`]: device, inode, size, and the
/// modification and change times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileId {
    dev: u64,
    ino: u64,
    /// Bytes.
    pub size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

/// A file modified this recently may still be modified within the same timestamp tick
/// (jiffy-granular timestamps on older kernels, writes through a shared mapping that set mtime
/// only at writeback), so its timestamps cannot vouch that the content is the one hashed:
/// git's "racily clean" rule.
const RACY: Duration = Duration::from_secs(2);

impl FileId {
    /// The identity of a file from its metadata.
    pub fn of(m: &fs::Metadata) -> FileId {
        use std::os::unix::fs::MetadataExt;
        FileId {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        }
    }

    /// True if the content was last modified more than [`RACY`] ago, so an unchanged
    /// identity means unchanged content. (A write moves mtime and ctime together; ctime alone
    /// also moves on metadata changes, which do not touch the content.)
    pub fn settled(&self) -> bool {
        let Ok(now) = SystemTime::now().duration_since(UNIX_EPOCH) else {
            return false;
        };
        let (s, ns) = self.mtime;
        u64::try_from(s)
            .is_ok_and(|s| Duration::new(s, ns.clamp(0, 999_999_999) as u32) + RACY <= now)
    }
}

impl Session<'_> {
    /// `CKSM alg offset length path`: the digest of a byte range of a file (or of zeros), or the
    /// digest known from the transfer just made when the range is the whole, unchanged file.
    pub(super) fn cmd_cksm(
        &mut self,
        alg: &str,
        offset: u64,
        length: Option<u64>,
        arg: &str,
    ) -> io::Result<()> {
        if alg.eq_ignore_ascii_case(chunked::LIST) {
            return self.cmd_cksm_list(offset, length, arg);
        }
        let alg: Algorithm = match alg.parse() {
            Ok(a) => a,
            Err(e) => return self.ctl.reply(504, format!("{e}.")),
        };
        if let Some(mut d) = self.known_digest.take() {
            if let Some(list) = d.chunks.take() {
                self.known_chunks = Some(KnownChunks {
                    virt: d.virt.clone(),
                    id: d.id,
                    list,
                });
            }
            // The file just sent or received, still the same file: its digest is known.
            let whole = offset == 0 && length.unwrap_or(d.id.size) == d.id.size;
            if whole
                && d.alg == alg
                && d.virt == Root::normalize(&self.cwd, arg)
                && self
                    .shared
                    .vfs
                    .stat(&d.virt)
                    .is_ok_and(|m| FileId::of(&m) == d.id)
            {
                self.shared.event(ServerEvent::Checksum {
                    read: false,
                    bytes: 0,
                });
                self.ctl.defer_reply(213, d.hex);
                return Ok(());
            }
        }
        // Hashing may take a while: the client should have the replies it is waiting for.
        self.ctl.flush()?;
        let watch = self.ctl.watcher();
        let result = match self.resolve(arg) {
            Target::Zero => match length {
                Some(n) if n > MAX_ZERO_CKSM => {
                    return self.ctl.reply(
                        501,
                        format!("/dev/zero: CKSM is limited to {MAX_ZERO_CKSM} bytes of zeros."),
                    )
                }
                Some(_) => checksum(&Zero, alg, offset, length),
                None => {
                    return self
                        .ctl
                        .reply(550, "/dev/zero: endless; give CKSM a length.")
                }
            },
            Target::Null => checksum(&Zero, alg, 0, Some(0)),
            Target::Path(virt) => match self.shared.vfs.open_read(&virt) {
                Ok((_, m)) if m.is_dir() => {
                    return self.ctl.reply(550, format!("{virt}: Is a directory"))
                }
                Ok((_, m)) if !m.is_file() => {
                    return self.ctl.reply(550, format!("{virt}: not a regular file"))
                }
                Ok((f, m)) => {
                    let bytes = length
                        .unwrap_or(u64::MAX)
                        .min(m.len().saturating_sub(offset));
                    self.shared
                        .event(ServerEvent::Checksum { read: true, bytes });
                    tracing::debug!(path = %virt, bytes, "CKSM reads the file again");
                    checksum(&WhileClientStays { src: &f, watch }, alg, offset, length)
                }
                Err(e) => return self.ctl.reply(550, fs_error(&virt, &e)),
            },
        };
        match result {
            Ok(hex) => self.ctl.reply(213, hex),
            Err(e) => self.ctl.reply(550, format!("{arg}: checksum failed: {e}")),
        }
    }
}

impl Session<'_> {
    /// `CKSM XXHC-LIST offset length path`: the XXHC digests of the chunks from the one holding
    /// `offset`, at most [`chunked::MAX_LIST`] of them, as a multi-line `213` reply; from the
    /// transfer just made when the file is still the same, else read from the file.
    fn cmd_cksm_list(&mut self, offset: u64, length: Option<u64>, arg: &str) -> io::Result<()> {
        let virt = Root::normalize(&self.cwd, arg);
        let known = self.known_chunks.as_ref().filter(|k| {
            k.virt == virt
                && self
                    .shared
                    .vfs
                    .stat(&virt)
                    .is_ok_and(|m| FileId::of(&m) == k.id)
        });
        let window = match known {
            Some(k) => ListWindow::of(&k.list, offset, length),
            None => {
                self.ctl.flush()?;
                let watch = self.ctl.watcher();
                let Target::Path(virt) = self.resolve(arg) else {
                    return self
                        .ctl
                        .reply(550, format!("{arg}: no chunk list for a device."));
                };
                match self.shared.vfs.open_read(&virt) {
                    Ok((f, m)) if m.is_file() => {
                        let src = WhileClientStays { src: &f, watch };
                        match ListWindow::read(&src, m.len(), offset, length) {
                            Ok(w) => w,
                            Err(e) => {
                                return self.ctl.reply(550, format!("{virt}: checksum failed: {e}"))
                            }
                        }
                    }
                    Ok(_) => return self.ctl.reply(550, format!("{virt}: not a regular file")),
                    Err(e) => return self.ctl.reply(550, fs_error(&virt, &e)),
                }
            }
        };
        self.ctl
            .send(&haul_proto::Reply::multi(213, window.to_lines()))
    }
}

#[cfg(test)]
mod tests;
