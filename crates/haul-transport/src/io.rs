//! Byte sources and sinks addressed by offset, shared by every stream thread of a transfer.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

mod direct;
pub use direct::{aligned, cached_bytes, DirectFile, DIRECT_ALIGN, DIRECT_FROM};

/// Where a sender reads file bytes from.
pub trait Source: Sync {
    /// Fills `buf` from `offset`; returns the bytes read (0 at end of data).
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;

    /// A file that holds this source's bytes at the same offsets, which a sender may hand to
    /// the socket without copying them (`sendfile`); None for anything but a plain file.
    fn backing_file(&self) -> Option<&File> {
        None
    }

    /// True when the bytes must still pass through [`Source::read_at`] although the sender
    /// sends them from the backing file: a source that hashes what is read.
    fn observes_reads(&self) -> bool {
        false
    }
}

/// Where a receiver places file bytes.
pub trait Sink: Sync {
    /// Writes all of `buf` at `offset`.
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;

    /// True when a write waits for the device ([`DirectFile`]): a receiver then writes behind
    /// its reads, on another thread, so the connection keeps being read meanwhile.
    fn writes_wait(&self) -> bool {
        false
    }
}

impl Source for File {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        FileExt::read_at(self, buf, offset)
    }
}

/// A file whose pages a sender hands to plain TCP sockets with `sendfile` instead of copying
/// them through its buffer (see [`Source::backing_file`]). Opt-in: when sender and receiver
/// share a host (loopback, namespaces), the receiver's copy out of page-cache-backed segments
/// costs more than the sender saves.
pub struct ZeroCopyFile(pub File);

impl Source for ZeroCopyFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        FileExt::read_at(&self.0, buf, offset)
    }

    fn backing_file(&self) -> Option<&File> {
        Some(&self.0)
    }
}

impl Sink for File {
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        FileExt::write_all_at(self, buf, offset)
    }
}

/// Bytes in memory; reads past the end return 0.
impl Source for Vec<u8> {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let at = usize::try_from(offset).map_or(self.len(), |o| o.min(self.len()));
        let n = buf.len().min(self.len() - at);
        buf[..n].copy_from_slice(&self[at..at + n]);
        Ok(n)
    }
}

/// An endless source of zero bytes (GridFTP servers expose it as `/dev/zero`).
#[derive(Debug, Default, Clone, Copy)]
pub struct Zero;

impl Source for Zero {
    fn read_at(&self, buf: &mut [u8], _offset: u64) -> io::Result<usize> {
        buf.fill(0);
        Ok(buf.len())
    }
}

/// A sink that discards everything (GridFTP servers expose it as `/dev/null`).
#[derive(Debug, Default, Clone, Copy)]
pub struct Null;

impl Sink for Null {
    fn write_at(&self, _buf: &[u8], _offset: u64) -> io::Result<()> {
        Ok(())
    }
}

/// Reads exactly `buf.len()` bytes at `offset`, failing if the source ends first (the file
/// shrank while it was being sent).
pub fn read_exact_at(src: &dyn Source, mut buf: &mut [u8], mut offset: u64) -> io::Result<()> {
    while !buf.is_empty() {
        let n = src.read_at(buf, offset)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("source ended at offset {offset}"),
            ));
        }
        buf = &mut buf[n..];
        offset += n as u64;
    }
    Ok(())
}

/// Caps the rate at which a source is read or a sink written, shared by all stream threads
/// (a bandwidth cap for `haul cp --max-rate`; TCP flow control carries it to the sender).
///
/// The clock starts at the first byte, not at construction: a pipelined batch opens every
/// file's sink at once, and a cap counted from then let every file after the first through
/// uncapped (its allowance had accrued while it waited its turn).
pub struct RateLimited<T> {
    inner: T,
    bytes_per_sec: f64,
    start: std::sync::OnceLock<std::time::Instant>,
    done: std::sync::atomic::AtomicU64,
}

impl<T> RateLimited<T> {
    /// Wraps `inner` at `bytes_per_sec`.
    pub fn new(inner: T, bytes_per_sec: u64) -> Self {
        RateLimited {
            inner,
            bytes_per_sec: bytes_per_sec.max(1) as f64,
            start: std::sync::OnceLock::new(),
            done: Default::default(),
        }
    }

    fn pace(&self, n: usize) {
        let start = *self.start.get_or_init(std::time::Instant::now);
        let total = self
            .done
            .fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed)
            + n as u64;
        let due = std::time::Duration::from_secs_f64(total as f64 / self.bytes_per_sec);
        if let Some(wait) = due.checked_sub(start.elapsed()) {
            std::thread::sleep(wait);
        }
    }
}

impl<T: Source> Source for RateLimited<T> {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let n = self.inner.read_at(buf, offset)?;
        self.pace(n);
        Ok(n)
    }
}

impl<T: Sink> Sink for RateLimited<T> {
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.inner.write_at(buf, offset)?;
        self.pace(buf.len());
        Ok(())
    }
}

/// True when `file` lies on a local disk file system (ext2/3/4, XFS, Btrfs, F2FS) or tmpfs,
/// where parallel writes to one file serialise on its inode lock anyway, so [`OneWriter`]
/// costs nothing and saves the spinning. Parallel file systems (NFS, Lustre, GPFS, CephFS)
/// take parallel writes to disjoint ranges, so they are left alone.
pub fn on_local_fs(file: &File) -> bool {
    const LOCAL: [i64; 5] = [
        0xEF53,      // ext2/3/4
        0x5846_5342, // XFS
        0x9123_683E, // Btrfs
        0xF2F5_2010, // F2FS
        TMPFS,
    ];
    fs_type(file).is_some_and(|t| LOCAL.contains(&t))
}

const TMPFS: i64 = 0x0102_1994;

/// True when `file` lies in memory (tmpfs), where there is no disk to write around the cache.
pub fn on_tmpfs(file: &File) -> bool {
    fs_type(file) == Some(TMPFS)
}

/// The magic number of the file system `file` lies on.
fn fs_type(file: &File) -> Option<i64> {
    use std::os::fd::AsRawFd;
    // SAFETY: all-zero is a valid statfs to be overwritten.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: a valid open descriptor and a statfs to fill.
    if unsafe { libc::fstatfs(file.as_raw_fd(), &mut st) } != 0 {
        return None;
    }
    Some(st.f_type as i64)
}

/// A sink written by one thread at a time. Parallel `pwrite`s to one file serialise on the
/// file's inode lock in the kernel anyway (ext4, xfs), where waiters spin on the lock's owner:
/// on a small or virtualised host that burns whole cores. Here waiters sleep instead.
pub struct OneWriter<T> {
    inner: T,
    lock: std::sync::Mutex<()>,
}

impl<T: Sink> OneWriter<T> {
    /// Serialises the writes to `inner`.
    pub fn new(inner: T) -> OneWriter<T> {
        OneWriter {
            inner,
            lock: std::sync::Mutex::new(()),
        }
    }
}

impl<T: Sink> Sink for OneWriter<T> {
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let _turn = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        self.inner.write_at(buf, offset)
    }
}

impl<T: Sink + ?Sized> Sink for &T {
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        (**self).write_at(buf, offset)
    }

    fn writes_wait(&self) -> bool {
        (**self).writes_wait()
    }
}

impl<T: Sink + ?Sized> Sink for Box<T> {
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        (**self).write_at(buf, offset)
    }

    fn writes_wait(&self) -> bool {
        (**self).writes_wait()
    }
}

impl<T: Source + ?Sized> Source for Box<T> {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        (**self).read_at(buf, offset)
    }

    fn backing_file(&self) -> Option<&File> {
        (**self).backing_file()
    }

    fn observes_reads(&self) -> bool {
        (**self).observes_reads()
    }
}

#[cfg(test)]
mod rate_tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn the_cap_counts_from_the_first_byte_not_from_construction() {
        // 1 MB/s: 200 KB must take at least ~200 ms however long the sink sat idle before.
        let s = RateLimited::new(Null, 1_000_000);
        std::thread::sleep(Duration::from_millis(300));
        let t = Instant::now();
        for k in 0..4 {
            s.write_at(&[0u8; 50_000], k * 50_000).unwrap();
        }
        assert!(
            t.elapsed() >= Duration::from_millis(140),
            "paced for only {:?}",
            t.elapsed()
        );
    }
}
