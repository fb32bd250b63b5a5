//! Faults injected by tests (the `failpoints` feature, off in release builds).

use std::sync::atomic::{AtomicBool, Ordering};

use haul_transport::io::{Sink, Source};

/// The number a fail point's `return(N)` gives, when it fires.
pub(crate) fn number(name: &'static str) -> Option<u64> {
    fail::eval(name, |a| a.and_then(|a| a.parse::<u64>().ok())).flatten()
}

/// A sink that flips one bit of the byte at a given offset of a file, the first time a write
/// covers it, before passing the write on.
pub(crate) struct Flip<'a> {
    inner: &'a dyn Sink,
    at: u64,
    done: AtomicBool,
}

impl<'a> Flip<'a> {
    /// Corrupts the byte at `at` of what goes to `inner`.
    pub(crate) fn new(inner: &'a dyn Sink, at: u64) -> Flip<'a> {
        Flip {
            inner,
            at,
            done: AtomicBool::new(false),
        }
    }
}

impl Sink for Flip<'_> {
    fn write_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
        let end = offset + buf.len() as u64;
        if (offset..end).contains(&self.at) && !self.done.swap(true, Ordering::Relaxed) {
            let mut bad = buf.to_vec();
            bad[(self.at - offset) as usize] ^= 0x10;
            return self.inner.write_at(&bad, offset);
        }
        self.inner.write_at(buf, offset)
    }
}

/// A source that flips one bit of the byte at a given offset, the first time a read covers it,
/// after the source under it has seen (hashed) the true byte.
pub(crate) struct FlipSource<'a> {
    inner: &'a dyn Source,
    at: u64,
    done: AtomicBool,
}

impl<'a> FlipSource<'a> {
    /// Corrupts the byte at `at` of what is read from `inner`.
    pub(crate) fn new(inner: &'a dyn Source, at: u64) -> FlipSource<'a> {
        FlipSource {
            inner,
            at,
            done: AtomicBool::new(false),
        }
    }
}

impl Source for FlipSource<'_> {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        let n = self.inner.read_at(buf, offset)?;
        let end = offset + n as u64;
        if (offset..end).contains(&self.at) && !self.done.swap(true, Ordering::Relaxed) {
            buf[(self.at - offset) as usize] ^= 0x10;
        }
        Ok(n)
    }
}
