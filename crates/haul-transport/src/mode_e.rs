//! GridFTP MODE E over parallel connections (GFD.020 §3). The sender splits the requested byte
//! ranges into blocks that stream threads take in turn, so a fast stream carries more blocks;
//! the receiver places each block by its offset, and knows the transfer is complete when it has
//! seen as many EODs as the EOF block announced. Connections survive a transfer unless the
//! sender set CLOSE, so a session can reuse them for the next file.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use haul_proto::mode_e::{Descriptor, Header, HEADER_LEN};
use haul_proto::RangeSet;

use crate::io::{read_exact_at, Sink, Source};
use crate::Conn;

mod blocks;
use blocks::recv_one;

/// Live counters of one transfer, read by the engine for throughput samples and restart markers.
#[derive(Debug, Default)]
pub struct Progress {
    /// Payload bytes moved so far.
    pub bytes: AtomicU64,
    /// Ranges the receiver has written (empty on the sending side).
    pub ranges: Mutex<RangeSet>,
    /// Set by [`Progress::abort`]: every stream of the transfer stops at its next block.
    pub stop: AtomicBool,
}

/// The error of a transfer stopped through [`Progress::abort`].
pub const ABORTED: &str = "transfer stopped by its owner";

impl Progress {
    /// Stops the transfer: each stream returns an error ([`ABORTED`]) at its next block, and
    /// what was received so far stays in the sink and in [`Progress::ranges`].
    pub fn abort(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// True once [`Progress::abort`] was called.
    pub fn aborted(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// The error a stopped stream returns.
    pub fn check(&self) -> io::Result<()> {
        if self.aborted() {
            Err(io::Error::other(ABORTED))
        } else {
            Ok(())
        }
    }

    /// Bytes moved so far.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// A copy of the ranges written so far.
    pub fn ranges(&self) -> RangeSet {
        self.ranges.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// Bytes written without a gap from offset 0: how far a hash that follows the file as it
    /// arrives may read.
    pub fn prefix(&self) -> u64 {
        self.ranges
            .lock()
            .ok()
            .and_then(|r| r.ranges().first().filter(|r| r.0 == 0).map(|r| r.1))
            .unwrap_or(0)
    }
}

/// Hands out spans of the requested ranges to sender threads, which send each as blocks.
struct Cursor {
    ranges: Vec<(u64, u64)>,
    idx: usize,
    at: u64,
    block: u64,
}

impl Cursor {
    fn next(&mut self) -> Option<(u64, usize)> {
        while self.idx < self.ranges.len() {
            let (s, e) = self.ranges[self.idx];
            let at = self.at.max(s);
            if at < e {
                // Spans end on multiples of the span size, so a span never straddles two XXHC
                // chunks when it is a multiple of one.
                let n = (e - at).min(self.block - at % self.block);
                self.at = at + n;
                return Some((at, n as usize));
            }
            self.idx += 1;
        }
        None
    }
}

/// Most separate byte ranges a receive may hold. Parallel streams leave a few gaps per stream
/// while blocks are in flight; a sender that scatters tiny blocks to grow the receiver's range
/// set (and its restart markers) without bound is refused.
pub const MAX_RANGES: usize = 16_384;

/// Buffers larger than this are not kept for the next transfer.
const KEEP_BUFFER: usize = 4 << 20;

thread_local! {
    /// A transfer buffer kept between transfers on the same thread, so a session moving many
    /// small files neither allocates nor zeroes a block-sized buffer per file.
    static BUFFER: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Runs `f` with a buffer of exactly `len` bytes (contents unspecified), reusing this thread's.
/// The buffer starts at a page boundary (it is over-allocated by one page), so a receiver's
/// blocks can go to an `O_DIRECT` file as they are ([`crate::io::DirectFile`]).
fn with_buffer<R>(len: usize, f: impl FnOnce(&mut [u8]) -> R) -> R {
    let align = crate::io::DIRECT_ALIGN;
    let mut buf = BUFFER.with(|b| b.take());
    if buf.len() < len + align {
        buf.resize(len + align, 0);
    }
    let pad = buf.as_ptr().align_offset(align).min(align);
    let r = f(&mut buf[pad..pad + len]);
    if buf.len() <= KEEP_BUFFER + HEADER_LEN + align {
        BUFFER.with(|b| {
            let mut cur = b.borrow_mut();
            if cur.len() < buf.len() {
                *cur = buf;
            }
        });
    }
    r
}

/// Sends `ranges` of `src` over every connection in `conns`, then an EOD on each and one EOF
/// announcing `conns.len()` EODs. With `close`, each EOD also carries CLOSE and the write half is
/// shut, so the connections cannot be reused.
pub fn send(
    conns: &mut [Conn],
    src: &dyn Source,
    ranges: &[(u64, u64)],
    block: usize,
    progress: &Progress,
    close: bool,
) -> io::Result<()> {
    if conns.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "MODE E send needs at least one data connection",
        ));
    }
    // Blocks as large as asked (within MODE E's bounds), but no larger than what is to be sent:
    // a small file should not cost a whole block.
    let total: u64 = ranges.iter().map(|(a, b)| b.saturating_sub(*a)).sum();
    let block = (total.min(block.clamp(4096, haul_proto::mode_e::MAX_BLOCK as usize) as u64)
        as usize)
        .max(1);
    // Streams claim whole XXHC chunks (or whole blocks, when larger), so each chunk travels in
    // order on one stream and both ends hash it once, as it passes.
    let cursor = Mutex::new(Cursor {
        ranges: ranges.to_vec(),
        idx: 0,
        at: 0,
        block: (block as u64).div_ceil(crate::checksum::chunked::CHUNK)
            * crate::checksum::chunked::CHUNK,
    });
    let abort = AtomicBool::new(false);
    let eods = conns.len() as u64;
    if let [conn] = conns {
        // One stream (a pipelined small file, usually): send on the caller's thread, with its
        // reused buffer, rather than spawning a thread per file.
        return send_one(
            conn.as_mut(),
            src,
            &cursor,
            &abort,
            progress,
            block,
            true,
            eods,
            close,
        );
    }
    std::thread::scope(|s| {
        let handles: Vec<_> = conns
            .iter_mut()
            .enumerate()
            .map(|(i, conn)| {
                let (cursor, abort) = (&cursor, &abort);
                s.spawn(move || {
                    let r = send_one(
                        conn.as_mut(),
                        src,
                        cursor,
                        abort,
                        progress,
                        block,
                        i == 0,
                        eods,
                        close,
                    );
                    if r.is_err() {
                        abort.store(true, Ordering::Relaxed);
                    }
                    r
                })
            })
            .collect();
        let mut first_err = None;
        for h in handles {
            let r = h
                .join()
                .unwrap_or_else(|_| Err(io::Error::other("sender thread panicked")));
            if let Err(e) = r {
                first_err.get_or_insert(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    })
}

#[allow(clippy::too_many_arguments)]
fn send_one(
    conn: &mut dyn crate::DataStream,
    src: &dyn Source,
    cursor: &Mutex<Cursor>,
    abort: &AtomicBool,
    progress: &Progress,
    block: usize,
    first: bool,
    eods: u64,
    close: bool,
) -> io::Result<()> {
    let close_bit = if close { Descriptor::CLOSE } else { 0 };
    let mut last = if first {
        Header::eof(eods, true)
    } else {
        Header::eod()
    };
    last.descriptor.0 |= close_bit;
    let take = || {
        cursor
            .lock()
            .map_err(|_| io::Error::other("cursor poisoned"))
            .map(|mut c| c.next())
    };
    // Room for a block between two headers: its own, and the EOD / EOF that follows the
    // stream's last block in the same write.
    // The blocks of the span this stream claimed, then of the next one it claims.
    let mut span: Option<(u64, u64)> = None;
    let mut take = || -> io::Result<Option<(u64, usize)>> {
        let (at, end) = match span {
            Some(s) if s.0 < s.1 => s,
            _ => match take()? {
                Some((at, n)) => (at, at + n as u64),
                None => return Ok(None),
            },
        };
        let n = (end - at).min(block as u64);
        span = Some((at + n, end));
        Ok(Some((at, n as usize)))
    };
    // A plain file to a plain TCP socket: its pages go to the socket without a copy through
    // this buffer, which then only serves a source that must see the bytes (one that hashes).
    let zero_copy = crate::zerocopy::route(src, &*conn);
    with_buffer(2 * HEADER_LEN + block, |buf| -> io::Result<()> {
        let mut next = take()?;
        while let Some((offset, n)) = next {
            if abort.load(Ordering::Relaxed) {
                return Err(io::Error::other("transfer aborted by another stream"));
            }
            progress.check()?;
            if let Some((file, sock)) = zero_copy {
                if src.observes_reads() {
                    read_exact_at(src, &mut buf[HEADER_LEN..HEADER_LEN + n], offset)?;
                }
                let header = Header::data(offset, n as u64).encode();
                crate::zerocopy::send_block(sock, &header, file, offset, n)?;
                progress.bytes.fetch_add(n as u64, Ordering::Relaxed);
                next = take()?;
                if next.is_none() {
                    conn.write_all(&last.encode())?;
                    return Ok(());
                }
                continue;
            }
            read_exact_at(src, &mut buf[HEADER_LEN..HEADER_LEN + n], offset)?;
            buf[..HEADER_LEN].copy_from_slice(&Header::data(offset, n as u64).encode());
            let mut len = HEADER_LEN + n;
            next = take()?;
            if next.is_none() {
                buf[len..len + HEADER_LEN].copy_from_slice(&last.encode());
                len += HEADER_LEN;
            }
            conn.write_all(&buf[..len])?;
            progress.bytes.fetch_add(n as u64, Ordering::Relaxed);
            if next.is_none() {
                return Ok(());
            }
        }
        // No block fell to this stream.
        if abort.load(Ordering::Relaxed) {
            return Err(io::Error::other("transfer aborted by another stream"));
        }
        conn.write_all(&last.encode())
    })?;
    conn.flush()?;
    if close {
        conn.shutdown_write()?;
    }
    Ok(())
}

/// Accepts further data connections while a receive is running (the passive side).
pub trait Acceptor: Sync {
    /// Waits up to `wait` for one more connection; Ok(None) when none arrived.
    fn accept(&self, wait: Duration) -> io::Result<Option<Conn>>;
}

/// What a finished receive leaves behind.
pub struct Received {
    /// Connections that may carry the next transfer (those the sender did not close).
    pub reusable: Vec<Conn>,
}

#[derive(Default)]
struct RecvState {
    eods: u64,
    expected: Option<u64>,
    readers: usize,
    error: Option<io::Error>,
}

impl RecvState {
    fn done(&self) -> bool {
        self.error.is_some() || self.expected.is_some_and(|e| self.eods >= e)
    }
}

/// Receives one MODE E transfer into `sink` from the connections in `conns` plus any that
/// `acceptor` yields, until the announced number of EODs has arrived. `max_len`, when known,
/// bounds where blocks may land.
pub fn receive(
    conns: Vec<Conn>,
    acceptor: Option<&dyn Acceptor>,
    sink: &dyn Sink,
    progress: &Progress,
    max_len: Option<u64>,
    block: usize,
) -> io::Result<Received> {
    let state = Mutex::new(RecvState::default());
    let cv = Condvar::new();
    let kept = Mutex::new(Vec::new());
    let mut conns = conns;
    // One reused stream (a pipelined small file, usually): read it on the caller's thread
    // instead of spawning a reader per file. Should its EOD not complete the transfer, the loop
    // below waits for the sender's further connections as usual. Not when the sender may open
    // more streams and the transfer is longer than a block: a sender that cannot finish this
    // stream before its new ones are read would wait for an accept that comes only after.
    let may_grow = acceptor.is_some() && max_len.is_none_or(|l| l > block as u64);
    if conns.len() == 1 && !may_grow {
        if let Some(conn) = conns.pop() {
            // Nobody waits on the condition variable yet: no wake-ups to send.
            let r = recv_one(conn, sink, progress, max_len, block, &state, None);
            settle(
                r,
                &mut state.lock().unwrap_or_else(|p| p.into_inner()),
                &kept,
            );
        }
    }
    std::thread::scope(|s| {
        let spawn = |conn: Conn| {
            if let Ok(mut st) = state.lock() {
                st.readers += 1;
            }
            let (state, cv, kept) = (&state, &cv, &kept);
            s.spawn(move || {
                let r = recv_one(conn, sink, progress, max_len, block, state, Some(cv));
                let mut st = state.lock().unwrap_or_else(|p| p.into_inner());
                st.readers -= 1;
                settle(r, &mut st, kept);
                cv.notify_all();
            });
        };
        for c in conns {
            spawn(c);
        }
        loop {
            let st = state.lock().unwrap_or_else(|p| p.into_inner());
            if st.done() {
                break;
            }
            let Some(a) = acceptor else {
                if st.readers == 0 {
                    let mut st = st;
                    st.error.get_or_insert_with(|| {
                        io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "data connections ended before every EOD arrived",
                        )
                    });
                    break;
                }
                let _unused = cv.wait_timeout(st, Duration::from_millis(200));
                continue;
            };
            // Poll for new connections without delaying the end of the transfer: readers wake
            // the condition variable on every EOD / EOF.
            drop(st);
            match a.accept(Duration::ZERO) {
                Ok(Some(c)) => spawn(c),
                Ok(None) => {
                    let st = state.lock().unwrap_or_else(|p| p.into_inner());
                    if !st.done() {
                        let _unused = cv.wait_timeout(st, Duration::from_millis(2));
                    }
                }
                Err(e) => {
                    let mut st = state.lock().unwrap_or_else(|p| p.into_inner());
                    st.error.get_or_insert(e);
                    break;
                }
            }
        }
    });
    let st = state.into_inner().unwrap_or_else(|p| p.into_inner());
    if let Some(e) = st.error {
        return Err(e);
    }
    Ok(Received {
        reusable: kept.into_inner().unwrap_or_else(|p| p.into_inner()),
    })
}

/// Keeps a finished stream's connection for the next transfer, or records its error (the
/// first one stands).
fn settle(r: io::Result<Option<Conn>>, st: &mut RecvState, kept: &Mutex<Vec<Conn>>) {
    match r {
        Ok(Some(c)) => kept.lock().unwrap_or_else(|p| p.into_inner()).push(c),
        Ok(None) => {}
        Err(e) => {
            st.error.get_or_insert(e);
        }
    }
}
