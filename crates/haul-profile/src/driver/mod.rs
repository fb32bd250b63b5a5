//! The IO drivers: a blocking client and server that move the control machines' bytes over a
//! TCP control channel and run one thread per data stream.

mod client;
mod server;
pub mod streams;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;

pub use client::{run_client, ClientOptions};
pub use server::{RunSummary, Server};

use crate::{ProfileError, Result};

/// Writes queued control bytes.
fn flush(s: &mut TcpStream, bytes: &[u8], peer: &str) -> Result<()> {
    if bytes.is_empty() {
        return Ok(());
    }
    s.write_all(bytes)
        .map_err(|e| ProfileError::io(format!("control channel write to {peer}"), e))
}

/// Reads whatever control bytes arrive next (an error on EOF or timeout).
fn read_some(s: &mut TcpStream, buf: &mut [u8], peer: &str) -> Result<usize> {
    loop {
        match s.read(buf) {
            Ok(0) => {
                return Err(ProfileError::Protocol(format!(
                    "{peer} closed the control channel"
                )))
            }
            Ok(n) => return Ok(n),
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => {
                return Err(ProfileError::io(
                    format!("control channel read from {peer}"),
                    e,
                ))
            }
        }
    }
}
