//! A file written around the page cache (`O_DIRECT`) where a write allows it.

use std::fs::File;
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use super::Sink;

/// The alignment asked of an `O_DIRECT` write's buffer, offset and length: the page size,
/// which covers every logical block size a local disk reports.
pub const DIRECT_ALIGN: usize = 4096;

/// Files at least this large are worth writing around the page cache on a local disk; below
/// it, the cache's copy costs less than a second descriptor and a writer thread per stream.
pub const DIRECT_FROM: u64 = 64 << 20;

/// A file that takes aligned blocks with `O_DIRECT` and everything else (a file's unaligned
/// tail, a block from a sender with odd offsets) through the page cache.
///
/// Writing a large download around the page cache saves the receiver the copy into new page
/// cache pages and their allocation (on a virtual machine that returns freed memory to its
/// host, allocating a gigabyte of fresh pages is slow and erratic), and leaves the cache to the
/// files the host reads. Aligned blocks are written in parallel; the rest take turns, as
/// [`super::OneWriter`] does.
pub struct DirectFile {
    buffered: File,
    direct: File,
    turn: Mutex<()>,
    /// Bytes written with `O_DIRECT` so far.
    around: AtomicU64,
    /// The end of the furthest write so far.
    end: AtomicU64,
}

impl DirectFile {
    /// Opens `path` (already open as `buffered`) a second time with `O_DIRECT`; gives
    /// `buffered` back when its file system refuses that.
    pub fn open(buffered: File, path: &Path) -> Result<DirectFile, File> {
        let opened = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_DIRECT)
            .open(path);
        match opened {
            Ok(direct) => Ok(DirectFile {
                buffered,
                direct,
                turn: Mutex::new(()),
                around: AtomicU64::new(0),
                end: AtomicU64::new(0),
            }),
            Err(_) => Err(buffered),
        }
    }

    /// Opens the very file `buffered` is open on a second time with `O_DIRECT`, through
    /// `/proc/self/fd` rather than a path (which a server confined to a tree must not walk
    /// again: a link swapped in since would lead elsewhere); gives `buffered` back when that
    /// fails.
    pub fn reopen(buffered: File) -> Result<DirectFile, File> {
        use std::os::fd::AsRawFd;
        let me = format!("/proc/self/fd/{}", buffered.as_raw_fd());
        DirectFile::open(buffered, Path::new(&me))
    }

    /// The end of the furthest byte written so far: after [`DirectFile::reserve`] made the
    /// file longer, what to cut it back to if fewer bytes came than were announced.
    pub fn written_end(&self) -> u64 {
        self.end.load(Ordering::Relaxed)
    }

    /// Bytes written around the page cache so far (the rest went through it).
    pub fn bytes_direct(&self) -> u64 {
        self.around.load(Ordering::Relaxed)
    }

    /// Reserves the file's `len` bytes on disk up front, so the parallel writes that fill it
    /// need not extend it one by one. Best effort, and bounded: a file system without
    /// `fallocate` just grows the file as it is written, and a reservation that would leave
    /// less than [`reserve_fits`]'s spare free is not made (the bytes announced are a peer's
    /// word; they are written as they come instead). True when the space was reserved.
    pub fn reserve(&self, len: u64) -> bool {
        use std::os::fd::AsRawFd;
        let fd = self.buffered.as_raw_fd();
        let Ok(at) = libc::off_t::try_from(len) else {
            return false;
        };
        // SAFETY: a zeroed statvfs is a valid value for fstatvfs to overwrite.
        let mut vfs: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: a valid open descriptor and a pointer to a statvfs we own.
        if unsafe { libc::fstatvfs(fd, &mut vfs) } != 0 {
            return false;
        }
        let frag = vfs.f_frsize;
        let free = vfs.f_bavail.saturating_mul(frag);
        let total = vfs.f_blocks.saturating_mul(frag);
        if !reserve_fits(len, free, total) {
            return false;
        }
        // SAFETY: a valid open descriptor; mode 0 only allocates blocks and sets the size.
        unsafe { libc::fallocate(fd, 0, 0, at) == 0 }
    }
}

/// The least a reservation leaves free on its file system: [`RESERVE_SPARE_SHARE`] of it, at
/// least this many bytes.
pub const RESERVE_SPARE_MIN: u64 = 1 << 30;

/// The share of a file system a reservation leaves free (see [`RESERVE_SPARE_MIN`]).
pub const RESERVE_SPARE_SHARE: f64 = 0.05;

/// Whether reserving `len` bytes on a file system of `total` bytes with `free` available
/// leaves its spare free: a peer's announced size may hold disk only while everyone else
/// keeps room (a reservation is held for the whole transfer, even one that then sends less).
pub fn reserve_fits(len: u64, free: u64, total: u64) -> bool {
    let spare = RESERVE_SPARE_MIN.max((total as f64 * RESERVE_SPARE_SHARE) as u64);
    free.checked_sub(spare).is_some_and(|room| len <= room)
}

/// How many bytes of `file` are in the page cache now (`mincore` over a mapping of it): what
/// writing around the cache leaves out of it, for tests and diagnostics.
pub fn cached_bytes(file: &File) -> io::Result<u64> {
    use std::os::fd::AsRawFd;
    let len = usize::try_from(file.metadata()?.len()).map_err(io::Error::other)?;
    if len == 0 {
        return Ok(0);
    }
    // SAFETY: sysconf has no preconditions.
    let page =
        usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).map_err(io::Error::other)?;
    let mut resident = vec![0u8; len.div_ceil(page)];
    // SAFETY: a shared read-only mapping of `len` bytes of an open file, unmapped before the
    // block ends; mincore writes one byte per page of it into `resident`, which has room.
    unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        );
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let rc = libc::mincore(p, len, resident.as_mut_ptr());
        let e = io::Error::last_os_error();
        libc::munmap(p, len);
        if rc != 0 {
            return Err(e);
        }
    }
    let pages = resident.iter().filter(|b| **b & 1 == 1).count();
    Ok((pages * page) as u64)
}

/// True when `buf` at `offset` meets `O_DIRECT`'s alignment.
pub fn aligned(buf: &[u8], offset: u64) -> bool {
    let a = DIRECT_ALIGN;
    (buf.as_ptr() as usize).is_multiple_of(a)
        && buf.len().is_multiple_of(a)
        && offset.is_multiple_of(a as u64)
}

impl Sink for DirectFile {
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let r = self.write_somewhere(buf, offset);
        if r.is_ok() {
            self.end
                .fetch_max(offset + buf.len() as u64, Ordering::Relaxed);
        }
        r
    }

    fn writes_wait(&self) -> bool {
        true
    }
}

impl DirectFile {
    /// Writes `buf` at `offset`: around the cache when aligned, else through it.
    fn write_somewhere(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        if !buf.is_empty() && aligned(buf, offset) {
            match self.direct.write_all_at(buf, offset) {
                Ok(()) => {
                    self.around.fetch_add(buf.len() as u64, Ordering::Relaxed);
                    return Ok(());
                }
                // A file system that opened with O_DIRECT but refuses this write's alignment.
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {}
                Err(e) => return Err(e),
            }
        }
        let _turn = self.turn.lock().unwrap_or_else(|p| p.into_inner());
        self.buffered.write_all_at(buf, offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const G: u64 = 1 << 30;

    #[test]
    fn a_reservation_leaves_the_spare_free() {
        // 100 GiB file system: the spare is 5 GiB.
        assert!(reserve_fits(10 * G, 20 * G, 100 * G));
        assert!(reserve_fits(15 * G, 20 * G, 100 * G));
        assert!(!reserve_fits(15 * G + 1, 20 * G, 100 * G));
        // 4 GiB file system: the spare is its 1 GiB floor.
        assert!(reserve_fits(G, 2 * G, 4 * G));
        assert!(!reserve_fits(G + 1, 2 * G, 4 * G));
        // Less free than the spare: nothing fits, not even an empty file's worth past it.
        assert!(!reserve_fits(1, G / 2, 4 * G));
        assert!(reserve_fits(0, G, 4 * G));
    }

    proptest! {
        #[test]
        fn what_fits_leaves_at_least_the_spare(len: u64, free: u64, total: u64) {
            if reserve_fits(len, free, total) {
                prop_assert!(free - len >= RESERVE_SPARE_MIN);
                prop_assert!((free - len) as f64 >= total as f64 * RESERVE_SPARE_SHARE - 1.0);
            }
        }
    }
}
