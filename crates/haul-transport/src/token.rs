//! Data-channel tokens (haul's `DTOK` extension, docs/protocol.md): a session's secret that the
//! side opening a data connection sends as the connection's first 16 bytes (inside TLS under
//! `PROT P`), and the accepting side checks before it trusts a byte. Addresses already keep other
//! hosts out; the token keeps out other processes on the peer's own host, which can connect to
//! a passive port or a `PORT` listener as easily as the peer can.

use std::io::{self, Read, Write};
use std::time::Duration;

use crate::Conn;

/// Bytes of a token.
pub const LEN: usize = 16;

/// How long the accepting side waits for a connection's token.
pub const WAIT: Duration = Duration::from_secs(5);

/// One session's data-connection token.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct DataToken([u8; LEN]);

impl std::fmt::Debug for DataToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DataToken(..)")
    }
}

impl DataToken {
    /// A fresh random token (`getrandom`).
    pub fn random() -> io::Result<DataToken> {
        let mut b = [0u8; LEN];
        let mut got = 0;
        while got < LEN {
            // SAFETY: writing at most LEN - got bytes into the rest of `b`.
            let n = unsafe { libc::getrandom(b[got..].as_mut_ptr().cast(), LEN - got, 0) };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            got += n as usize;
        }
        Ok(DataToken(b))
    }

    /// Lowercase hex, as the `DTOK` reply carries it.
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Parses the hex of a `DTOK` reply.
    pub fn from_hex(s: &str) -> Option<DataToken> {
        let s = s.trim();
        if s.len() != 2 * LEN || !s.bytes().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        let mut b = [0u8; LEN];
        for (i, out) in b.iter_mut().enumerate() {
            *out = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
        }
        Some(DataToken(b))
    }

    /// Sends the token on a connection this side opened.
    pub fn present(&self, conn: &mut Conn) -> io::Result<()> {
        conn.write_all(&self.0)?;
        conn.flush()
    }

    /// Reads a connection's first bytes and checks them, waiting at most [`WAIT`]: an error of
    /// kind `PermissionDenied` if they are not the token (in time).
    pub fn check(&self, conn: &mut Conn, timeout: Duration) -> io::Result<()> {
        conn.set_read_timeout(Some(WAIT))?;
        let mut got = [0u8; LEN];
        let read = conn.read_exact(&mut got);
        conn.set_read_timeout(Some(timeout))?;
        // Constant time: every byte compared whatever the first difference.
        let same = read.is_ok()
            && got
                .iter()
                .zip(self.0.iter())
                .fold(0u8, |d, (a, b)| d | (a ^ b))
                == 0;
        if !same {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "a data connection without this session's token",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream};

    #[test]
    fn hex_round_trips_and_rejects_garbage() {
        let t = DataToken::random().unwrap();
        assert_eq!(DataToken::from_hex(&t.to_hex()), Some(t));
        assert_ne!(DataToken::random().unwrap(), t);
        for bad in ["", "00", &"g".repeat(32), &"0".repeat(33)] {
            assert_eq!(DataToken::from_hex(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn only_the_token_passes() {
        let t = DataToken::random().unwrap();
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = l.local_addr().unwrap();
        let mut good: Conn = Box::new(TcpStream::connect(a).unwrap());
        t.present(&mut good).unwrap();
        let mut bad: Conn = Box::new(TcpStream::connect(a).unwrap());
        bad.write_all(&[0u8; LEN]).unwrap();
        let mut g: Conn = Box::new(l.accept().unwrap().0);
        let mut b: Conn = Box::new(l.accept().unwrap().0);
        assert!(t.check(&mut g, Duration::from_secs(5)).is_ok());
        assert_eq!(
            t.check(&mut b, Duration::from_secs(5)).unwrap_err().kind(),
            io::ErrorKind::PermissionDenied
        );
    }
}
