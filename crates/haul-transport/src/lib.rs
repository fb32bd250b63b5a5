//! Data channels: how bytes of one file move between two hosts once the control channel has
//! agreed on the method, and the channels `haul profile` measures. Blocking threads on the hot
//! path, one per TCP stream, reading and writing by offset so blocks may be placed out of order.
//!
//! Two interfaces sit on the same sockets: [`DataStream`] ([`Conn`]) for the byte-stream data
//! connections of a copy (TCP, TLS or UDT: MODE E, MODE S, listings), and
//! [`channel::Connector`] / [`channel::Listener`] / [`channel::Channel`] for the profiler's
//! measurement channels (TCP, UDP, UDT, PLUT). TCP socket options are in one place,
//! [`socket`]: buffer sizes, and [`socket::TcpOptions`] (congestion control, MSS, pacing), which
//! the measurement channels apply (a copy's data connections set buffer sizes only).
//!
//! - [`channel`]: measurement channels (TPG's callbacks) over TCP, a UDP blast, UDT and PLUT,
//!   configured by [`channel::ChannelParams`].
//! - [`net`]: the network stack under a session's data connections (TCP or UDT, as Globus's
//!   `SITE SETNETSTACK` names it): listeners and connections of either, as [`Conn`]s.
//! - [`socket`]: TCP connection set-up with buffer sizes and [`socket::TcpOptions`] (congestion
//!   control, MSS, pacing) applied before connect/listen.
//! - [`udt`]: UDT4 sockets (Debian's `libudt-dev`) with the `std::net` shape.
//! - [`io`]: byte sources and sinks addressed by offset (files, the zero source, the null sink).
//! - [`mode_e`]: GridFTP MODE E over N parallel connections, sender and receiver.
//! - [`plut`]: PLUT (reliable UDP, `haul-plut`) over real sockets with batched IO and pacing.
//! - [`pump`]: the bounded buffer between a relay's two legs, forwarding blocks as they come.
//! - [`stream`]: RFC 959 stream mode over one connection.
//! - [`tls`]: rustls configs and TLS data streams (RFC 4217).
//! - [`token`]: data-connection tokens (haul's `DTOK` extension).

pub mod channel;
pub mod checksum;
pub mod gsi;
pub mod io;
pub mod mode_e;
pub mod net;
pub mod plut;
pub mod pump;
pub mod socket;
pub mod stream;
pub mod tls;
pub mod token;
pub mod udt;
mod zerocopy;

use std::io::{Read, Result as IoResult, Write};
use std::net::{Shutdown, TcpStream};
use std::time::Duration;

/// A connected data stream (plain TCP, TLS over TCP, or UDT).
pub trait DataStream: Read + Write + Send {
    /// Ends this side's sending so the peer sees end of stream (UDT, which has no half-close,
    /// closes once what was written is delivered).
    fn shutdown_write(&mut self) -> IoResult<()>;

    /// How long a read waits before it fails (None: forever).
    fn set_read_timeout(&self, t: Option<Duration>) -> IoResult<()>;

    /// A handle another thread can use to cut the stream while this one is blocked reading or
    /// writing it.
    fn cutter(&self) -> IoResult<Cutter>;

    /// The plain TCP socket under this stream, to which file pages may be sent without a copy
    /// (`sendfile`); None when bytes must pass through the stream (TLS, UDT).
    fn plain_tcp(&self) -> Option<&TcpStream> {
        None
    }
}

impl DataStream for TcpStream {
    fn shutdown_write(&mut self) -> IoResult<()> {
        self.shutdown(Shutdown::Write)
    }

    fn set_read_timeout(&self, t: Option<Duration>) -> IoResult<()> {
        TcpStream::set_read_timeout(self, t)
    }

    fn cutter(&self) -> IoResult<Cutter> {
        self.try_clone().map(Cutter::Tcp)
    }

    fn plain_tcp(&self) -> Option<&TcpStream> {
        Some(self)
    }
}

impl DataStream for udt::UdtStream {
    fn shutdown_write(&mut self) -> IoResult<()> {
        self.close()
    }

    fn set_read_timeout(&self, t: Option<Duration>) -> IoResult<()> {
        udt::UdtStream::set_read_timeout(self, t)
    }

    fn cutter(&self) -> IoResult<Cutter> {
        Ok(Cutter::Udt(udt::UdtStream::cutter(self)))
    }
}

/// Cuts one data stream from another thread ([`DataStream::cutter`]).
#[derive(Debug)]
pub enum Cutter {
    /// A second handle of the TCP socket, shut down both ways.
    Tcp(TcpStream),
    /// The UDT socket's id, closed at once.
    Udt(udt::Cutter),
}

impl Cutter {
    /// Ends the stream now: blocked reads and writes on it return.
    pub fn cut(&self) {
        match self {
            Cutter::Tcp(s) => {
                let _ = s.shutdown(Shutdown::Both);
            }
            Cutter::Udt(c) => c.cut(),
        }
    }
}

/// A boxed data stream, as kept in a session's connection pool.
pub type Conn = Box<dyn DataStream>;

/// Default MODE E block size: large enough that the 17-byte header and per-block syscalls
/// vanish, small enough to spread a file across streams.
pub const DEFAULT_BLOCK: usize = 1 << 20;
