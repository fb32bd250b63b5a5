//! The bounded buffer between a relay's two legs (002 §2.5). The receiving leg writes what
//! arrives, from any of its streams and in any order, as a [`Sink`]; the sending leg's streams
//! take the queued pieces and write each as a MODE E block with the same offset (or, in MODE S,
//! in order on one connection). Nothing is reassembled, so neither leg waits for the other's
//! slowest stream; what waits is bounded by the pump's capacity, and a full pump holds the
//! receiving leg back (TCP flow control carries that to its sender), so a slow leg slows the
//! other and memory stays bounded. An error on either side stops both.
//!
//! In MODE E the sending leg keeps each XXHC chunk ([`CHUNK`] bytes from offset 0) on one of
//! its streams, in the order its pieces came, as `mode_e::send` does for a file: a receiver
//! that hashes the chunks as they land (a haul server asked for `CKSM XXHC` behind the `STOR`)
//! then never has to read a chunk's early bytes back from its disk. A stream takes the first
//! queued piece of a chunk no other stream is sending, so none idles while one is queued.

use std::collections::{HashMap, VecDeque};
use std::io::{self, Write};
use std::sync::atomic::Ordering;
use std::sync::{Condvar, Mutex, MutexGuard};

use haul_proto::mode_e::{Header, HEADER_LEN, MAX_BLOCK};

use crate::checksum::chunked::CHUNK;
use crate::io::Sink;
use crate::mode_e::Progress;
use crate::Conn;

/// Largest piece queued at once: a larger write is split, so one write can never need more
/// than the pump holds; pieces end at multiples of it, which are XXHC chunk boundaries.
const PIECE: usize = 1 << 20;
const _: () = assert!(CHUNK.is_multiple_of(PIECE as u64));

/// Chunks held for a sending stream at once, at most. A sender's chunks in flight number about
/// its streams plus what the pump holds; a peer sending a byte here and there of many chunks
/// would otherwise grow the map without bound. Past it, a new chunk's pieces go to whichever
/// stream is free, as before chunks were held (the next hop then reads the early ones back).
const MAX_HELD: usize = 1024;

/// One queued piece: its offset and a buffer whose first [`HEADER_LEN`] bytes are room for
/// its MODE E header.
struct Piece {
    offset: u64,
    buf: Vec<u8>,
}

impl Piece {
    fn len(&self) -> usize {
        self.buf.len() - HEADER_LEN
    }
}

#[derive(Default)]
struct State {
    queue: VecDeque<Piece>,
    /// Payload bytes queued.
    used: usize,
    /// The receiving leg has delivered everything.
    closed: bool,
    /// Why the relay stopped, once either side failed.
    failed: Option<String>,
    /// Emptied buffers, reused by the next writes.
    spare: Vec<Vec<u8>>,
    /// The chunks a sending stream has started and not finished: the stream, and the bytes
    /// of the chunk it has taken.
    owners: HashMap<u64, (usize, u64)>,
}

impl State {
    /// The first queued piece `stream` may send: one of a chunk it holds or no stream does.
    fn pop_for(&mut self, stream: usize) -> Option<Piece> {
        let owners = &self.owners;
        let at = self.queue.iter().position(|p| {
            owners
                .get(&(p.offset / CHUNK))
                .is_none_or(|&(s, _)| s == stream)
        })?;
        let p = self.queue.remove(at)?;
        let chunk = p.offset / CHUNK;
        let len = p.len() as u64;
        if let Some((_, taken)) = self.owners.get_mut(&chunk) {
            *taken += len;
            // Every byte of the chunk taken, in whatever order its pieces came: it is free
            // again (a short last chunk of a file, or one a restart sends only part of, stays
            // held, which costs an entry each).
            if *taken >= CHUNK {
                self.owners.remove(&chunk);
            }
        } else if len < CHUNK && self.owners.len() < MAX_HELD {
            self.owners.insert(chunk, (stream, len));
        }
        Some(p)
    }
}

/// The buffer between a relay's legs. Shared by reference between the two legs' threads.
pub struct Pump {
    state: Mutex<State>,
    /// Signalled when room is freed or the pump fails.
    room: Condvar,
    /// Signalled when a piece is queued, the input ends, or the pump fails.
    ready: Condvar,
    cap: usize,
}

/// How the sending leg frames what it takes from the pump.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// MODE E blocks on every connection, then an EOD on each and one EOF (GFD.020 §3).
    Extended {
        /// Set CLOSE on the EODs and shut the connections (they cannot carry another file).
        close: bool,
    },
    /// MODE S: the bytes in order on one connection, which is then shut.
    Stream,
}

impl Pump {
    /// A pump holding at most `cap` payload bytes (at least one piece).
    pub fn new(cap: usize) -> Pump {
        Pump {
            state: Mutex::new(State::default()),
            room: Condvar::new(),
            ready: Condvar::new(),
            cap: cap.max(PIECE),
        }
    }

    /// The most payload bytes it holds.
    pub fn capacity(&self) -> usize {
        self.cap
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The receiving leg has written everything: the sending leg ends once the queue is empty.
    pub fn close(&self) {
        self.lock().closed = true;
        self.ready.notify_all();
    }

    /// Stops both legs: writes and takes fail with `why` from now on (the first cause stands).
    pub fn fail(&self, why: impl Into<String>) {
        self.lock().failed.get_or_insert_with(|| why.into());
        self.room.notify_all();
        self.ready.notify_all();
    }

    /// Why the pump failed, if it did.
    pub fn failure(&self) -> Option<String> {
        self.lock().failed.clone()
    }

    fn stopped(why: &str) -> io::Error {
        io::Error::new(io::ErrorKind::BrokenPipe, format!("relay stopped: {why}"))
    }

    /// Queues one piece of at most [`PIECE`] bytes, waiting for room. The room is taken under
    /// the lock; the copy is made outside it, so other streams of both legs are not held up.
    fn push(&self, data: &[u8], offset: u64) -> io::Result<()> {
        let mut st = self.lock();
        loop {
            if let Some(why) = &st.failed {
                return Err(Self::stopped(why));
            }
            // An empty pump always takes a piece, so no write can wait forever.
            if st.used == 0 || st.used + data.len() <= self.cap {
                break;
            }
            st = self.room.wait(st).unwrap_or_else(|p| p.into_inner());
        }
        st.used += data.len();
        let mut buf = st.spare.pop().unwrap_or_default();
        drop(st);
        buf.clear();
        buf.reserve(HEADER_LEN + data.len());
        buf.resize(HEADER_LEN, 0);
        buf.extend_from_slice(data);
        let mut st = self.lock();
        if let Some(why) = &st.failed {
            return Err(Self::stopped(why));
        }
        st.queue.push_back(Piece { offset, buf });
        drop(st);
        // Every waiting stream looks: the piece may be one only a particular stream may take.
        self.ready.notify_all();
        Ok(())
    }

    /// The next piece, waiting for one; `None` once the input has ended and the queue is empty.
    fn take(&self) -> io::Result<Option<Piece>> {
        self.take_when(|st| st.queue.pop_front())
    }

    /// The next piece sending stream `stream` may send (see [`State::pop_for`]), waiting for
    /// one; `None` once the input has ended and the queue is empty.
    fn take_for(&self, stream: usize) -> io::Result<Option<Piece>> {
        self.take_when(|st| st.pop_for(stream))
    }

    fn take_when(&self, pop: impl Fn(&mut State) -> Option<Piece>) -> io::Result<Option<Piece>> {
        let mut st = self.lock();
        loop {
            if let Some(why) = &st.failed {
                return Err(Self::stopped(why));
            }
            if let Some(p) = pop(&mut st) {
                if st.closed && st.queue.is_empty() {
                    // The last piece: streams waiting for one of theirs can end now.
                    self.ready.notify_all();
                }
                return Ok(Some(p));
            }
            // Pieces held for other streams are theirs to send: this one is done only when
            // nothing is left at all.
            if st.closed && st.queue.is_empty() {
                return Ok(None);
            }
            st = self.ready.wait(st).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Frees a written piece's room and keeps its buffer for a later write.
    fn release(&self, piece: Piece) {
        let mut st = self.lock();
        st.used -= piece.len();
        if st.spare.len() < 8 {
            st.spare.push(piece.buf);
        }
        drop(st);
        self.room.notify_all();
    }

    /// Sends what the receiving leg delivers on `conns` until the input ends, framed as
    /// `framing` says, counting payload bytes in `progress`. A failure on any connection
    /// fails the pump, so the receiving leg stops too; a failed pump fails this.
    pub fn drain(
        &self,
        conns: &mut [Conn],
        framing: Framing,
        progress: &Progress,
    ) -> io::Result<()> {
        let r = match (framing, conns) {
            (_, []) => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a relay's sending leg needs a data connection",
            )),
            (Framing::Stream, [conn, ..]) => self.drain_stream(conn, progress),
            (Framing::Extended { close }, conns) => self.drain_extended(conns, close, progress),
        };
        if let Err(e) = &r {
            self.fail(format!("sending leg: {e}"));
        }
        r
    }

    /// MODE S: the pieces must arrive in order (the receiving leg has one stream).
    fn drain_stream(&self, conn: &mut Conn, progress: &Progress) -> io::Result<()> {
        let mut at = None;
        while let Some(p) = self.take()? {
            if at.is_some_and(|a| a != p.offset) {
                let e = format!(
                    "a MODE S leg needs the bytes in order: got offset {} after {}",
                    p.offset,
                    at.unwrap_or(0)
                );
                return Err(io::Error::new(io::ErrorKind::InvalidData, e));
            }
            conn.write_all(&p.buf[HEADER_LEN..])?;
            at = Some(p.offset + p.len() as u64);
            progress.bytes.fetch_add(p.len() as u64, Ordering::Relaxed);
            self.release(p);
        }
        conn.flush()?;
        conn.shutdown_write()
    }

    /// MODE E: one thread per connection; the first ends with the EOF.
    fn drain_extended(
        &self,
        conns: &mut [Conn],
        close: bool,
        progress: &Progress,
    ) -> io::Result<()> {
        let eods = conns.len() as u64;
        // Chunks are held by this drain's streams only.
        self.lock().owners.clear();
        std::thread::scope(|s| {
            let handles: Vec<_> = conns
                .iter_mut()
                .enumerate()
                .map(|(i, conn)| {
                    s.spawn(move || {
                        let r = self.drain_one(conn, i, (i == 0).then_some(eods), close, progress);
                        if let Err(e) = &r {
                            self.fail(format!("sending leg: {e}"));
                        }
                        r
                    })
                })
                .collect();
            let mut first = None;
            for h in handles {
                let r = h
                    .join()
                    .unwrap_or_else(|_| Err(io::Error::other("relay sender panicked")));
                if let Err(e) = r {
                    first.get_or_insert(e);
                }
            }
            first.map_or(Ok(()), Err)
        })
    }

    fn drain_one(
        &self,
        conn: &mut Conn,
        stream: usize,
        eof: Option<u64>,
        close: bool,
        progress: &Progress,
    ) -> io::Result<()> {
        while let Some(mut p) = self.take_for(stream)? {
            let n = p.len() as u64;
            debug_assert!(n <= MAX_BLOCK);
            p.buf[..HEADER_LEN].copy_from_slice(&Header::data(p.offset, n).encode());
            conn.write_all(&p.buf)?;
            progress.bytes.fetch_add(n, Ordering::Relaxed);
            self.release(p);
        }
        let mut last = match eof {
            Some(count) => Header::eof(count, true),
            None => Header::eod(),
        };
        if close {
            last.descriptor.0 |= haul_proto::mode_e::Descriptor::CLOSE;
        }
        conn.write_all(&last.encode())?;
        conn.flush()?;
        if close {
            conn.shutdown_write()?;
        }
        Ok(())
    }
}

/// The receiving leg writes into the pump.
impl Sink for Pump {
    fn write_at(&self, mut buf: &[u8], mut offset: u64) -> io::Result<()> {
        // Cut at multiples of PIECE in the file, so no piece spans two XXHC chunks.
        while !buf.is_empty() {
            let to_edge = PIECE as u64 - offset % PIECE as u64;
            let n = buf.len().min(to_edge as usize);
            self.push(&buf[..n], offset)?;
            buf = &buf[n..];
            offset += n as u64;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn piece(offset: u64, len: usize) -> Piece {
        Piece {
            offset,
            buf: vec![0; HEADER_LEN + len],
        }
    }

    /// A peer sending one byte of each of many chunks holds at most `MAX_HELD` of them, and a
    /// whole chunk in one piece is never held.
    #[test]
    fn held_chunks_are_bounded() {
        let mut st = State::default();
        for k in 0..(3 * MAX_HELD as u64) {
            st.queue.push_back(piece(k * CHUNK, 1));
        }
        st.queue
            .push_back(piece(5 * MAX_HELD as u64 * CHUNK, CHUNK as usize));
        while st.pop_for(0).is_some() {}
        assert_eq!(st.owners.len(), MAX_HELD);
    }

    /// A chunk's pieces stay with the stream that took the first, in any order, until every
    /// byte is taken; then another stream may take the next piece at that offset's chunk.
    #[test]
    fn a_chunk_is_held_until_all_its_bytes_are_taken() {
        let half = CHUNK as usize / 2;
        let mut st = State::default();
        st.queue.push_back(piece(CHUNK / 2, half));
        st.queue.push_back(piece(0, half));
        assert_eq!(st.pop_for(1).map(|p| p.offset), Some(CHUNK / 2));
        assert!(
            st.pop_for(0).is_none(),
            "the rest of the chunk is stream 1's"
        );
        assert_eq!(st.pop_for(1).map(|p| p.offset), Some(0));
        assert!(st.owners.is_empty(), "every byte taken: free again");
        st.queue.push_back(piece(0, half));
        assert_eq!(st.pop_for(0).map(|p| p.offset), Some(0));
    }
}
