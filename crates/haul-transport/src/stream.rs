//! RFC 959 stream mode: the file's bytes in order on one connection, end of file by close.

use std::io::{self, Read, Write};
use std::sync::atomic::Ordering;

use crate::io::{Sink, Source};
use crate::mode_e::Progress;
use crate::Conn;

/// Sends `[offset, end)` of `src` (to the source's end when `end` is None), then closes.
pub fn send(
    mut conn: Conn,
    src: &dyn Source,
    offset: u64,
    end: Option<u64>,
    progress: &Progress,
) -> io::Result<()> {
    let mut buf = vec![0u8; crate::DEFAULT_BLOCK];
    let mut at = offset;
    // A plain file of known length to a plain TCP socket: its pages go to the socket without
    // a copy (see `mode_e::send`).
    let zero_copy = crate::zerocopy::route(src, &*conn).filter(|_| end.is_some());
    loop {
        let want = match end {
            Some(e) if at >= e => break,
            Some(e) => ((e - at) as usize).min(buf.len()),
            None => buf.len(),
        };
        progress.check()?;
        if let Some((file, sock)) = zero_copy {
            if src.observes_reads() {
                crate::io::read_exact_at(src, &mut buf[..want], at)?;
            }
            crate::zerocopy::send_block(sock, &[], file, at, want)?;
            at += want as u64;
            progress.bytes.fetch_add(want as u64, Ordering::Relaxed);
            continue;
        }
        let n = src.read_at(&mut buf[..want], at)?;
        if n == 0 {
            if let Some(e) = end {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("source ended at {at}, before {e}"),
                ));
            }
            break;
        }
        conn.write_all(&buf[..n])?;
        at += n as u64;
        progress.bytes.fetch_add(n as u64, Ordering::Relaxed);
    }
    conn.flush()?;
    conn.shutdown_write()
}

/// Receives until the sender closes, writing from `offset` on; returns the bytes received.
pub fn receive(
    mut conn: Conn,
    sink: &dyn Sink,
    offset: u64,
    progress: &Progress,
) -> io::Result<u64> {
    let mut buf = vec![0u8; crate::DEFAULT_BLOCK];
    let mut at = offset;
    loop {
        progress.check()?;
        let n = match conn.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        sink.write_at(&buf[..n], at)?;
        if let Ok(mut r) = progress.ranges.lock() {
            r.insert(at, at + n as u64);
        }
        at += n as u64;
        progress.bytes.fetch_add(n as u64, Ordering::Relaxed);
    }
    Ok(at - offset)
}
