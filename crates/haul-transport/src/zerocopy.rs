//! Sending file pages to a TCP socket without copying them through user space (`sendfile`),
//! for MODE E senders whose source is a plain file and whose data connection is plain TCP.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, RawFd};

use crate::io::Source;
use crate::DataStream;

/// The file and socket to send between without a copy: a source with a backing file, and a
/// plain TCP data connection; None when the bytes must pass through the sender's buffer.
pub(crate) fn route<'a>(src: &'a dyn Source, conn: &dyn DataStream) -> Option<(&'a File, RawFd)> {
    src.backing_file()
        .zip(conn.plain_tcp().map(AsRawFd::as_raw_fd))
}

/// Sends `header` and then `len` bytes of `file` from `offset` on the TCP socket `sock`; the
/// header is held back (`MSG_MORE`) to leave in the same segment as the first file bytes.
/// Fails if the file ends early: the header has promised `len` bytes.
pub(crate) fn send_block(
    sock: RawFd,
    header: &[u8],
    file: &File,
    offset: u64,
    len: usize,
) -> io::Result<()> {
    send_all(sock, header, libc::MSG_MORE)?;
    let mut off = libc::off_t::try_from(offset)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "offset beyond off_t"))?;
    let mut left = len;
    while left > 0 {
        // SAFETY: both descriptors are open for the call (`file` is borrowed, `sock` belongs
        // to the connection the caller holds); `off` is a live off_t the kernel updates.
        let r = unsafe { libc::sendfile(sock, file.as_raw_fd(), &mut off, left) };
        match r {
            0 => return Err(ended(off)),
            r if r > 0 => left -= r as usize,
            _ => {
                let e = io::Error::last_os_error();
                // A file system without splice support: copy the rest through user space.
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EINVAL | libc::ENOSYS | libc::EOPNOTSUPP)
                ) {
                    return copy_rest(sock, file, off as u64, left);
                }
                retry_or_fail(e)?
            }
        }
    }
    Ok(())
}

fn ended(off: impl std::fmt::Display) -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        format!("source ended at offset {off}, inside a block already announced"),
    )
}

/// Sends `left` bytes of `file` from `off` by reading and writing them.
fn copy_rest(sock: RawFd, file: &File, mut off: u64, mut left: usize) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    let mut buf = vec![0u8; left.min(1 << 20)];
    while left > 0 {
        let want = left.min(buf.len());
        let n = FileExt::read_at(file, &mut buf[..want], off)?;
        if n == 0 {
            return Err(ended(off));
        }
        send_all(sock, &buf[..n], 0)?;
        off += n as u64;
        left -= n;
    }
    Ok(())
}

/// Sends all of `bytes` on `sock` with `flags` (and `MSG_NOSIGNAL`).
fn send_all(sock: RawFd, mut bytes: &[u8], flags: libc::c_int) -> io::Result<()> {
    while !bytes.is_empty() {
        // SAFETY: `bytes` is a live byte slice; `send` reads at most `bytes.len()` from it.
        let r = unsafe {
            libc::send(
                sock,
                bytes.as_ptr().cast(),
                bytes.len(),
                flags | libc::MSG_NOSIGNAL,
            )
        };
        match r {
            r if r >= 0 => bytes = &bytes[r as usize..],
            _ => retry_or_fail(io::Error::last_os_error())?,
        }
    }
    Ok(())
}

fn retry_or_fail(e: io::Error) -> io::Result<()> {
    match e.kind() {
        io::ErrorKind::Interrupted => Ok(()),
        // A send timeout (SO_SNDTIMEO) reads as EAGAIN on a blocking socket.
        io::ErrorKind::WouldBlock => Err(io::Error::new(io::ErrorKind::TimedOut, e)),
        _ => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};

    #[test]
    fn header_then_file_bytes_and_an_early_end_fails() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        let mut f = tempfile::tempfile().unwrap();
        let data: Vec<u8> = (0..300_000u32).map(|i| (i % 253) as u8).collect();
        f.write_all(&data).unwrap();
        send_block(s.as_raw_fd(), b"HDR", &f, 1000, 200_000).unwrap();
        let mut got = vec![0u8; 200_003];
        c.read_exact(&mut got).unwrap();
        assert_eq!(&got[..3], b"HDR");
        assert_eq!(&got[3..], &data[1000..201_000]);
        let e = send_block(s.as_raw_fd(), b"H", &f, 250_000, 60_000).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
    }
}
