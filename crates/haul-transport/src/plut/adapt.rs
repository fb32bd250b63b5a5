//! Adapters between haul-transport's shared, offset-addressed [`Source`] / [`Sink`] and the
//! PLUT core's: a read-ahead window so the sender reads its file in large sequential chunks
//! rather than one `pread` per datagram, and a write-behind buffer so the receiver's in-order
//! writer issues large writes. Both also keep the transfer's [`Progress`] current.

use std::cell::RefCell;
use std::io;
use std::sync::atomic::Ordering;

use crate::io::Sink;
use crate::io::Source;
use crate::mode_e::Progress;

/// Bytes read or written per system call.
const CHUNK: usize = 4 << 20;

/// A read-ahead window over a [`Source`], offsets relative to `base`.
pub(super) struct ReadAhead<'a> {
    src: &'a dyn Source,
    base: u64,
    len: u64,
    win: RefCell<Window>,
}

struct Window {
    start: u64,
    filled: usize,
    buf: Vec<u8>,
}

impl<'a> ReadAhead<'a> {
    /// Reads `src` at `base..base + len`.
    pub(super) fn new(src: &'a dyn Source, base: u64, len: u64) -> ReadAhead<'a> {
        let cap = CHUNK.min(usize::try_from(len).unwrap_or(CHUNK)).max(1);
        ReadAhead {
            src,
            base,
            len,
            win: RefCell::new(Window {
                start: 0,
                filled: 0,
                buf: vec![0; cap],
            }),
        }
    }
}

impl haul_plut::Source for ReadAhead<'_> {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        if offset >= self.len {
            return Ok(0);
        }
        let want = buf
            .len()
            .min(usize::try_from(self.len - offset).unwrap_or(usize::MAX));
        let mut w = self.win.borrow_mut();
        let inside = offset >= w.start && offset + want as u64 <= w.start + w.filled as u64;
        if !inside {
            let n = w
                .buf
                .len()
                .min(usize::try_from(self.len - offset).unwrap_or(usize::MAX));
            crate::io::read_exact_at(self.src, &mut w.buf[..n], self.base + offset)?;
            w.start = offset;
            w.filled = n;
            if want > n {
                // A datagram larger than the window: read it directly.
                return crate::io::read_exact_at(self.src, &mut buf[..want], self.base + offset)
                    .map(|()| want);
            }
        }
        let at = (offset - w.start) as usize;
        buf[..want].copy_from_slice(&w.buf[at..at + want]);
        Ok(want)
    }
}

/// A write-behind buffer in front of a [`Sink`]; writes arrive strictly in order.
pub(super) struct WriteBehind<'a> {
    sink: &'a dyn Sink,
    base: u64,
    progress: &'a Progress,
    /// Offset (relative) of the first buffered byte.
    start: u64,
    buf: Vec<u8>,
}

impl<'a> WriteBehind<'a> {
    /// Writes to `sink` at `base + offset`, reporting delivered bytes to `progress`.
    pub(super) fn new(
        sink: &'a dyn Sink,
        base: u64,
        len: u64,
        progress: &'a Progress,
    ) -> WriteBehind<'a> {
        let cap = CHUNK.min(usize::try_from(len).unwrap_or(CHUNK));
        WriteBehind {
            sink,
            base,
            progress,
            start: 0,
            buf: Vec::with_capacity(cap),
        }
    }

    /// Writes out what is buffered and publishes it as received.
    pub(super) fn flush(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        self.sink.write_at(&self.buf, self.base + self.start)?;
        self.start += self.buf.len() as u64;
        self.buf.clear();
        if let Ok(mut r) = self.progress.ranges.lock() {
            r.insert(self.base, self.base + self.start);
        }
        Ok(())
    }
}

impl haul_plut::Sink for WriteBehind<'_> {
    fn write_at(&mut self, buf: &[u8], offset: u64) -> io::Result<()> {
        let end = self.start + self.buf.len() as u64;
        if offset != end {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("PLUT writer at {end} got a write at {offset}"),
            ));
        }
        if self.buf.len() + buf.len() > self.buf.capacity() {
            self.flush()?;
        }
        if buf.len() > self.buf.capacity() {
            self.sink.write_at(buf, self.base + offset)?;
            self.start += buf.len() as u64;
        } else {
            self.buf.extend_from_slice(buf);
        }
        self.progress
            .bytes
            .fetch_add(buf.len() as u64, Ordering::Relaxed);
        Ok(())
    }
}
