//! Data channels: how bytes of one file move between two hosts once the control channel has
//! agreed on the method. Blocking threads on the hot path, one per TCP stream, reading and
//! writing by offset so blocks may be placed out of order.
//!
//! - [`socket`]: TCP connection set-up with buffer sizes applied before connect/listen.
//! - [`io`]: byte sources and sinks addressed by offset (files, the zero source, the null sink).
//! - [`mode_e`]: GridFTP MODE E over N parallel connections, sender and receiver.
//! - [`plut`]: PLUT (reliable UDP, `haul-plut`) over real sockets with batched IO and pacing.
//! - [`stream`]: RFC 959 stream mode over one connection.
//! - [`tls`]: rustls configs and TLS data streams (RFC 4217).
//! - [`token`]: data-connection tokens (haul's `DTOK` extension).

pub mod checksum;
pub mod io;
pub mod mode_e;
pub mod plut;
pub mod socket;
pub mod stream;
pub mod tls;
pub mod token;

use std::io::{Read, Write};

/// A connected data stream (plain TCP, or TLS over TCP).
pub trait DataStream: Read + Write + Send {
    /// Shuts the write half so the peer sees end of stream.
    fn shutdown_write(&mut self) -> std::io::Result<()>;

    /// A second handle of the underlying TCP socket, so that another thread can cut the stream
    /// (`shutdown(Both)`) while this one is blocked reading or writing it.
    fn socket(&self) -> std::io::Result<std::net::TcpStream>;
}

impl DataStream for std::net::TcpStream {
    fn shutdown_write(&mut self) -> std::io::Result<()> {
        self.shutdown(std::net::Shutdown::Write)
    }

    fn socket(&self) -> std::io::Result<std::net::TcpStream> {
        self.try_clone()
    }
}

/// A boxed data stream, as kept in a session's connection pool.
pub type Conn = Box<dyn DataStream>;

/// Default MODE E block size: large enough that the 17-byte header and per-block syscalls
/// vanish, small enough to spread a file across streams.
pub const DEFAULT_BLOCK: usize = 1 << 20;
