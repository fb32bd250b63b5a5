//! Hashing what passes through a sink or a source, at whatever offsets it comes: the
//! [`HashingSink`] a receiver writes through and the [`HashingSource`] a sender reads through.

use super::{chunked, Algorithm, Running};
use crate::io::{Sink, Source};

/// A digest of bytes handed over at any offsets: [`Running`] for the digests of a byte stream
/// (one lock, early bytes read back once the gap before them fills), [`chunked::Chunked`] for
/// XXHC (a lock per chunk, so streams carrying different chunks hash at once).
enum Digesting {
    Whole(std::sync::Mutex<Running>),
    Chunks(chunked::Chunked),
}

/// A finished digest: the hex CKSM reply, and for XXHC the chunk list behind it.
pub type Finished = (String, Option<chunked::ChunkList>);

impl Digesting {
    fn new(alg: Algorithm) -> Digesting {
        match alg {
            Algorithm::Xxhc => Digesting::Chunks(chunked::Chunked::new()),
            a => Digesting::Whole(std::sync::Mutex::new(Running::new(a))),
        }
    }

    /// Notes `buf` at `offset`; bytes that came early are read from `copy` when their turn
    /// comes. A failed read-back only costs the digest (`finish` then gives None).
    fn update(&self, offset: u64, buf: &[u8], copy: &dyn Source) {
        match self {
            Digesting::Chunks(c) => c.update(offset, buf, copy),
            Digesting::Whole(m) => {
                if let Ok(mut run) = m.lock() {
                    run.update(offset, buf);
                    if run.behind() {
                        let _ = run.catch_up(copy);
                    }
                }
            }
        }
    }

    fn finish(self, len: u64) -> Option<Finished> {
        match self {
            Digesting::Chunks(c) => c.finish(len).map(|l| (l.root_hex(), Some(l))),
            Digesting::Whole(m) => m
                .into_inner()
                .unwrap_or_else(|p| p.into_inner())
                .finish(len)
                .map(|h| (h, None)),
        }
    }
}

/// The file at a path, opened on its first read: the copy a digest reads early bytes back
/// from, which most transfers never need.
struct LazyFile<'a> {
    path: &'a std::path::Path,
    file: std::sync::OnceLock<std::io::Result<std::fs::File>>,
}

impl Source for LazyFile<'_> {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        match self.file.get_or_init(|| std::fs::File::open(self.path)) {
            Ok(f) => f.read_at(buf, offset),
            Err(e) => Err(std::io::Error::new(e.kind(), e.to_string())),
        }
    }
}

/// Where a [`HashingSink`] reads back bytes that came early: the file it writes, opened by
/// path on first need, or a source the caller already holds.
enum Copy<'a> {
    Lazy(LazyFile<'a>),
    Held(&'a dyn Source),
}

impl Source for Copy<'_> {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        match self {
            Copy::Lazy(f) => f.read_at(buf, offset),
            Copy::Held(s) => s.read_at(buf, offset),
        }
    }
}

/// A sink that hashes what is written to it, for a file written from offset 0 (a download's
/// part file, an upload's): blocks that arrive ahead of the hashed prefix (of their chunk, for
/// XXHC) are read back from the copy once the gap before them is filled.
pub struct HashingSink<'a> {
    inner: &'a dyn Sink,
    copy: Copy<'a>,
    digest: Digesting,
}

impl<'a> HashingSink<'a> {
    /// Hashes with `alg` what is written through to `inner`, the file at `local`.
    pub fn new(inner: &'a dyn Sink, alg: Algorithm, local: &'a std::path::Path) -> HashingSink<'a> {
        HashingSink {
            inner,
            copy: Copy::Lazy(LazyFile {
                path: local,
                file: Default::default(),
            }),
            digest: Digesting::new(alg),
        }
    }

    /// Hashes with `alg` what is written through to `inner`, reading bytes that came early
    /// back from `copy` (the same file, open for reading).
    pub fn over(inner: &'a dyn Sink, alg: Algorithm, copy: &'a dyn Source) -> HashingSink<'a> {
        HashingSink {
            inner,
            copy: Copy::Held(copy),
            digest: Digesting::new(alg),
        }
    }

    /// The digest of the `len` bytes written, or None if it has to be computed from the file.
    pub fn finish(self, len: u64) -> std::io::Result<Option<String>> {
        Ok(self.finish_full(len).map(|d| d.0))
    }

    /// [`HashingSink::finish`], with XXHC's chunk list.
    pub fn finish_full(self, len: u64) -> Option<Finished> {
        self.digest.finish(len)
    }
}

impl Sink for HashingSink<'_> {
    fn write_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
        self.inner.write_at(buf, offset)?;
        // The data is written; a failed read-back (no file descriptor left, the file renamed
        // by someone else) only costs the digest, which `finish` then leaves to a re-read.
        self.digest.update(offset, buf, &self.copy);
        Ok(())
    }

    fn writes_wait(&self) -> bool {
        self.inner.writes_wait()
    }
}

/// A source that hashes what is read from it: bytes read ahead of the hashed prefix (of their
/// chunk, for XXHC) are read again once the gap before them is filled. Bytes read a second
/// time (a PLUT sender re-reads what it retransmits) are not hashed again.
pub struct HashingSource<'a> {
    inner: &'a dyn Source,
    digest: Digesting,
    /// What the digest has been given so far.
    fed: std::sync::Mutex<haul_proto::markers::RangeSet>,
}

impl<'a> HashingSource<'a> {
    /// Hashes with `alg` what is read from `inner`.
    pub fn new(inner: &'a dyn Source, alg: Algorithm) -> HashingSource<'a> {
        HashingSource {
            inner,
            digest: Digesting::new(alg),
            fed: Default::default(),
        }
    }

    /// The digest of bytes `[0, len)`, or None unless exactly those were read.
    pub fn finish(self, len: u64) -> Option<String> {
        self.finish_full(len).map(|d| d.0)
    }

    /// [`HashingSource::finish`], with XXHC's chunk list.
    pub fn finish_full(self, len: u64) -> Option<Finished> {
        self.digest.finish(len)
    }
}

impl Source for HashingSource<'_> {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        let n = self.inner.read_at(buf, offset)?;
        let end = offset + n as u64;
        let new: Vec<(u64, u64)> = match self.fed.lock() {
            Ok(mut fed) => {
                let gaps = fed.missing(end);
                fed.insert(offset, end);
                gaps.into_iter()
                    .filter(|&(_, b)| b > offset)
                    .map(|(a, b)| (a.max(offset), b))
                    .collect()
            }
            Err(_) => vec![(offset, end)],
        };
        for (a, b) in new {
            let piece = &buf[(a - offset) as usize..(b - offset) as usize];
            self.digest.update(a, piece, self.inner);
        }
        Ok(n)
    }

    fn backing_file(&self) -> Option<&std::fs::File> {
        self.inner.backing_file()
    }

    fn observes_reads(&self) -> bool {
        true
    }
}
