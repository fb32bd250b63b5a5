//! Faults injected by tests (the `failpoints` feature, off in release builds).

use std::sync::atomic::{AtomicBool, Ordering};

use haul_transport::io::Sink;

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
