//! One data connection's MODE E blocks: read, gathered into runs of the file, and written,
//! on the reading thread or, for a sink whose writes wait for the device, behind it by a
//! writer thread, so the socket is read while the disk writes.

use std::io::{self, Read};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Condvar, Mutex};
use std::thread::{Scope, ScopedJoinHandle};

use haul_proto::mode_e::{Descriptor, Header, HEADER_LEN};

use super::{with_buffer, Progress, RecvState, MAX_RANGES};
use crate::io::{Sink, DIRECT_ALIGN};
use crate::Conn;

/// Runs a writer thread may hold at once, besides the one the reader fills.
const BEHIND: usize = 2;

pub(super) fn read_header(
    conn: &mut dyn crate::DataStream,
) -> io::Result<Option<[u8; HEADER_LEN]>> {
    let mut h = [0u8; HEADER_LEN];
    let mut have = 0;
    while have < HEADER_LEN {
        match conn.read(&mut h[have..]) {
            Ok(0) if have == 0 => return Ok(None),
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "data connection closed inside a MODE E header",
                ))
            }
            Ok(n) => have += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(Some(h))
}

/// Reads one connection until its EOD; returns it for reuse unless the sender closed it.
pub(super) fn recv_one(
    conn: Conn,
    sink: &dyn Sink,
    progress: &Progress,
    max_len: Option<u64>,
    block: usize,
    state: &Mutex<RecvState>,
    cv: Option<&Condvar>,
) -> io::Result<Option<Conn>> {
    // The buffer is taken only once the first header has arrived: a connection that never
    // sends costs its reader thread, not a block of memory.
    let mut conn = conn;
    let Some(first) = read_header(conn.as_mut())? else {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "data connection closed before its EOD",
        ));
    };
    // No larger than the file: a pipelined small file should not cost a megabyte of zeroing.
    let cap = max_len.map_or(block as u64, |l| l.min(block as u64)) as usize;
    let cap = cap.clamp(4096, 4 << 20);
    let stream = Stream { max_len, state, cv };
    if sink.writes_wait() {
        return std::thread::scope(|s| {
            let mut runs = Runs::behind(s, sink, progress, cap);
            stream.recv_blocks(conn, first, &mut runs)
        });
    }
    with_buffer(cap, |buf| {
        let mut runs = Runs {
            sink,
            progress,
            offset: 0,
            len: 0,
            buf: Buf::Borrowed(buf),
        };
        stream.recv_blocks(conn, first, &mut runs)
    })
}

/// Records `from..to` as received (written to the sink).
fn record(progress: &Progress, from: u64, to: u64) -> io::Result<()> {
    progress.bytes.fetch_add(to - from, Ordering::Relaxed);
    if let Ok(mut r) = progress.ranges.lock() {
        r.insert(from, to);
        if r.ranges().len() > MAX_RANGES {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("MODE E blocks left more than {MAX_RANGES} separate ranges: refusing a transfer this fragmented"),
            ));
        }
    }
    Ok(())
}

/// A buffer of `len` bytes starting at a page boundary, owned (so it can change threads).
struct Aligned {
    mem: Vec<u8>,
    pad: usize,
    len: usize,
}

impl Aligned {
    fn new(len: usize) -> Aligned {
        let mem = vec![0u8; len + DIRECT_ALIGN];
        let pad = mem.as_ptr().align_offset(DIRECT_ALIGN).min(DIRECT_ALIGN);
        Aligned { mem, pad, len }
    }

    fn get(&self) -> &[u8] {
        &self.mem[self.pad..self.pad + self.len]
    }

    fn get_mut(&mut self) -> &mut [u8] {
        &mut self.mem[self.pad..self.pad + self.len]
    }
}

/// A run handed to the writer: its buffer, where it goes, how long it is.
type Job = (Aligned, u64, usize);

/// Where the runs are gathered: the reading thread's own buffer, written in place, or one of a
/// few owned buffers passed to a writer thread and back.
enum Buf<'a, 's> {
    Borrowed(&'a mut [u8]),
    Behind {
        cur: Aligned,
        to: Option<SyncSender<Job>>,
        free: Receiver<Aligned>,
        writer: Option<ScopedJoinHandle<'s, io::Result<()>>>,
    },
}

/// Blocks read but not yet written: one contiguous run of the file at the front of the buffer.
struct Runs<'a, 's> {
    sink: &'a dyn Sink,
    progress: &'a Progress,
    offset: u64,
    len: usize,
    buf: Buf<'a, 's>,
}

impl<'a, 's> Runs<'a, 's> {
    /// Runs written by a writer thread in `s`, through `BEHIND + 1` buffers of `cap` bytes.
    fn behind<'e>(
        s: &'s Scope<'s, 'e>,
        sink: &'e dyn Sink,
        progress: &'e Progress,
        cap: usize,
    ) -> Runs<'e, 's>
    where
        'e: 's,
    {
        let (to, jobs) = sync_channel::<Job>(BEHIND);
        let (back, free) = sync_channel::<Aligned>(BEHIND + 1);
        for _ in 0..BEHIND {
            let _ = back.send(Aligned::new(cap));
        }
        let writer = s.spawn(move || {
            for (buf, offset, len) in jobs {
                sink.write_at(&buf.get()[..len], offset)?;
                record(progress, offset, offset + len as u64)?;
                // The reader may have gone (an error on its side); then nobody needs it back.
                let _ = back.send(buf);
            }
            Ok(())
        });
        Runs {
            sink,
            progress,
            offset: 0,
            len: 0,
            buf: Buf::Behind {
                cur: Aligned::new(cap),
                to: Some(to),
                free,
                writer: Some(writer),
            },
        }
    }

    fn space(&mut self) -> &mut [u8] {
        match &mut self.buf {
            Buf::Borrowed(b) => b,
            Buf::Behind { cur, .. } => cur.get_mut(),
        }
    }

    /// Writes the pending run (or hands it to the writer) and records it as received.
    fn flush(&mut self) -> io::Result<()> {
        if self.len == 0 {
            return Ok(());
        }
        let (offset, len) = (self.offset, std::mem::take(&mut self.len));
        match &mut self.buf {
            Buf::Borrowed(b) => {
                self.sink.write_at(&b[..len], offset)?;
                record(self.progress, offset, offset + len as u64)
            }
            Buf::Behind {
                cur,
                to,
                free,
                writer,
            } => {
                let handed = free.recv().ok().and_then(|next| {
                    let full = std::mem::replace(cur, next);
                    to.as_ref()?.send((full, offset, len)).ok()
                });
                match handed {
                    Some(()) => Ok(()),
                    None => Err(join(writer, to)
                        .err()
                        .unwrap_or_else(|| io::Error::other("the writer thread stopped"))),
                }
            }
        }
    }

    /// Flushes and, with a writer, waits until it has written everything.
    fn finish(&mut self) -> io::Result<()> {
        self.flush()?;
        match &mut self.buf {
            Buf::Borrowed(_) => Ok(()),
            Buf::Behind { to, writer, .. } => join(writer, to),
        }
    }
}

/// Closes the writer's queue and waits for it: its error, if it had one.
fn join(
    writer: &mut Option<ScopedJoinHandle<'_, io::Result<()>>>,
    to: &mut Option<SyncSender<Job>>,
) -> io::Result<()> {
    drop(to.take());
    match writer.take().map(|w| w.join()) {
        Some(Ok(r)) => r,
        Some(Err(_)) => Err(io::Error::other("the writer thread panicked")),
        None => Ok(()),
    }
}

/// What one connection's loop checks its blocks against and reports to.
struct Stream<'a> {
    max_len: Option<u64>,
    state: &'a Mutex<RecvState>,
    cv: Option<&'a Condvar>,
}

impl Stream<'_> {
    /// Reads one block's `count` bytes at `at`: behind the pending run when it continues the
    /// run and fits, else after writing the run out; a block larger than the buffer goes
    /// through it in pieces.
    fn read_block(
        &self,
        conn: &mut Conn,
        mut at: u64,
        count: u64,
        runs: &mut Runs<'_, '_>,
    ) -> io::Result<()> {
        let extends = runs.len > 0 && runs.offset + runs.len as u64 == at;
        let cap = runs.space().len();
        if !extends || runs.len as u64 + count > cap as u64 {
            runs.flush()?;
        }
        let mut left = count;
        while left > 0 {
            let from = runs.len;
            let n = left.min((cap - from) as u64) as usize;
            conn.read_exact(&mut runs.space()[from..from + n])
                .map_err(|e| {
                    io::Error::new(
                        e.kind(),
                        format!("MODE E block at offset {at} truncated: {e}"),
                    )
                })?;
            if runs.len == 0 {
                runs.offset = at;
            }
            runs.len += n;
            at += n as u64;
            left -= n as u64;
            if runs.len == cap {
                runs.flush()?;
            }
        }
        Ok(())
    }

    fn lock(&self) -> io::Result<std::sync::MutexGuard<'_, RecvState>> {
        self.state
            .lock()
            .map_err(|_| io::Error::other("state poisoned"))
    }

    /// The loop of [`recv_one`]. Blocks that continue each other (a sender's 256 KiB blocks of
    /// one 1 MiB span) are gathered and written with one call. However the loop ends, what it
    /// read is written and recorded: a restart needs the blocks that arrived before a
    /// connection broke.
    fn recv_blocks(
        &self,
        conn: Conn,
        first: [u8; HEADER_LEN],
        runs: &mut Runs<'_, '_>,
    ) -> io::Result<Option<Conn>> {
        let r = self.blocks(conn, first, runs);
        let written = runs.finish();
        let conn = r?;
        written.map(|()| conn)
    }

    fn blocks(
        &self,
        mut conn: Conn,
        first: [u8; HEADER_LEN],
        runs: &mut Runs<'_, '_>,
    ) -> io::Result<Option<Conn>> {
        let mut first = Some(first);
        loop {
            if self.state.lock().map(|s| s.error.is_some()).unwrap_or(true) {
                return Ok(None);
            }
            runs.progress.check()?;
            let Some(raw) = first
                .take()
                .map_or_else(|| read_header(conn.as_mut()), |h| Ok(Some(h)))?
            else {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "data connection closed before its EOD",
                ));
            };
            let h =
                Header::decode(&raw).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
            if let Some(n) = h.eod_count() {
                runs.finish()?;
                let mut st = self.lock()?;
                match st.expected {
                    Some(prev) if prev != n => {
                        return Err(io::Error::new(
                            io::ErrorKind::InvalidData,
                            format!("conflicting EOD counts {prev} and {n}"),
                        ))
                    }
                    _ => st.expected = Some(n),
                }
                if let Some(cv) = self.cv {
                    cv.notify_all();
                }
            } else if h.count > 0 {
                if let Some(len) = self.max_len {
                    if h.offset + h.count > len {
                        return Err(io::Error::new(
                            io::ErrorKind::InvalidData,
                            format!(
                                "MODE E block {}+{} lies beyond the expected length {len}",
                                h.offset, h.count
                            ),
                        ));
                    }
                }
                self.read_block(&mut conn, h.offset, h.count, runs)?;
            }
            if h.descriptor.has(Descriptor::EOD) {
                runs.finish()?;
                let mut st = self.lock()?;
                st.eods += 1;
                if let Some(cv) = self.cv {
                    cv.notify_all();
                }
                return Ok((!h.descriptor.has(Descriptor::CLOSE)).then_some(conn));
            }
        }
    }
}
