//! The harness's side of data connections: it connects to the server's passive port, or takes
//! the connections the server made to the active-mode port, when a `150` says a transfer begins;
//! after `DTOK` it sends the session's token first on the connections it opens and checks the
//! server's on those the server opened; uploads write a fixed payload (MODE E blocks in MODE E),
//! and every connection is read until the server closes it, keeping at most [`MAX_KEEP`] bytes
//! for the checks.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::thread::JoinHandle;
use std::time::Duration;

use haul_proto::Header;

/// Bytes of each data connection kept for the checks (and read at all: `/dev/zero` is endless).
pub const MAX_KEEP: usize = 1 << 20;

/// How long one data connection may stay silent before the harness gives up on it.
const SILENCE: Duration = Duration::from_secs(10);

/// What an upload sends, as one MODE S stream.
pub const PAYLOAD: &[u8] = b"uploaded by the haul-fuzz harness\n";

/// The upload in MODE E: one block at offset 0, then EOF (one EOD expected) with EOD.
pub fn mode_e_payload() -> Vec<u8> {
    let mut v = Header::data(0, PAYLOAD.len() as u64).encode().to_vec();
    v.extend_from_slice(PAYLOAD);
    v.extend_from_slice(&Header::eof(1, true).encode());
    v
}

/// The data connections of one input, and what came over them.
#[derive(Default)]
pub struct Peers {
    readers: Vec<JoinHandle<Vec<u8>>>,
    /// Write handles of this setup's MODE E connections, which the server may reuse (`125`).
    reusable: Vec<TcpStream>,
    /// The session's data-connection token, once `DTOK` gave one.
    pub token: Option<[u8; 16]>,
}

impl Peers {
    /// Starts serving a new data connection: the token first if this side `opened` it (and,
    /// if the server opened it, the token is checked as the first bytes read), then optionally
    /// `upload` (closing the write side in MODE S), then reads it to the end on a thread.
    pub fn start(&mut self, mut s: TcpStream, opened: bool, upload: Option<&[u8]>, mode_e: bool) {
        let _ = s.set_read_timeout(Some(SILENCE));
        let _ = s.set_write_timeout(Some(SILENCE));
        if let (true, Some(t)) = (opened, self.token) {
            let _ = s.write_all(&t);
        }
        if let Some(p) = upload {
            let _ = s.write_all(p);
            if !mode_e {
                let _ = s.shutdown(Shutdown::Write);
            }
        }
        if mode_e {
            if let Ok(w) = s.try_clone() {
                self.reusable.push(w);
            }
        }
        let expect = if opened { None } else { self.token };
        self.readers.push(std::thread::spawn(move || {
            let mut kept = Vec::new();
            let _ = (&mut s).take(MAX_KEEP as u64).read_to_end(&mut kept);
            if let Some(t) = expect {
                let n = kept.len().min(t.len());
                assert_eq!(
                    kept[..n],
                    t[..n],
                    "the server's data connection did not start with the DTOK token"
                );
            }
            kept
        }));
    }

    /// Connects `n` times to the server's passive port.
    pub fn connect(&mut self, addr: SocketAddr, n: usize, upload: Option<&[u8]>, mode_e: bool) {
        for _ in 0..n {
            if let Ok(s) = TcpStream::connect_timeout(&addr, SILENCE) {
                self.start(s, true, upload, mode_e);
            }
        }
    }

    /// An upload over a reused MODE E connection (`125`): the payload goes on the first one.
    pub fn reuse(&mut self, upload: Option<&[u8]>) {
        if let (Some(p), Some(w)) = (upload, self.reusable.first_mut()) {
            let _ = w.write_all(p);
        }
    }

    /// PORT / PASV / a change of MODE: the server dropped its cached connections.
    pub fn forget_reusable(&mut self) {
        self.reusable.clear();
    }

    /// Waits for every reader and returns what each received.
    pub fn finish(self) -> Vec<Vec<u8>> {
        drop(self.reusable);
        self.readers
            .into_iter()
            .map(|h| h.join().expect("reader thread"))
            .collect()
    }
}
