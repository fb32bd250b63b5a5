//! Data channels behind one interface covering TPG's seven callbacks (`struct tpg_protocol`,
//! 000 §3): [`Connector::init`], [`Connector::listen`], [`Connector::connect`],
//! [`Listener::accept`], [`Channel::send`], [`Channel::recv`], [`Channel::close`], plus
//! [`Channel::perfmon`] (TPG's `client_perfmon` / `server_perfmon`).

mod plut;
mod tcp;
mod udp;
mod udt;

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use crate::params::{ProfileParams, TransportKind};
use crate::{ProfileError, Result};

pub use plut::Plut;
pub use tcp::Tcp;
pub use udp::Udp;
pub use udt::Udt;

/// How long one [`Channel::recv`] waits before it reports [`Recv::Idle`].
pub const POLL: Duration = Duration::from_millis(200);

/// What one receive call produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recv {
    /// This many bytes arrived.
    Data(usize),
    /// Nothing arrived within [`POLL`].
    Idle,
    /// The sender closed the channel (or sent its final block).
    Eof,
}

/// Transport statistics of one channel (TCP_INFO, UDT perfmon, UDP sequence accounting, PLUT's
/// counters).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Perf {
    /// Smoothed RTT, milliseconds.
    pub rtt_ms: Option<f64>,
    /// Retransmitted segments or packets.
    pub retransmits: Option<u64>,
    /// Datagrams sent or received.
    pub packets: Option<u64>,
    /// Datagrams lost.
    pub lost: Option<u64>,
}

/// A protocol that can be profiled.
pub trait Connector: Send + Sync {
    /// Which protocol this is.
    fn kind(&self) -> TransportKind;
    /// `tpg_init`: checks θ against what this transport supports and prepares the library.
    fn init(&self, p: &ProfileParams) -> Result<()>;
    /// `tpg_listen`: opens one server data channel at `addr` (port 0 picks a free one).
    fn listen(&self, p: &ProfileParams, addr: SocketAddr) -> Result<Box<dyn Listener>>;
    /// `tpg_connect`: opens one client data channel to `remote`, bound to `local` if given.
    fn connect(
        &self,
        p: &ProfileParams,
        local: Option<IpAddr>,
        remote: SocketAddr,
        timeout: Duration,
    ) -> Result<Box<dyn Channel>>;
}

/// A listening server data channel.
pub trait Listener: Send {
    /// The port it listens on.
    fn port(&self) -> u16;
    /// `tpg_accept`: the client's channel, within `timeout`.
    fn accept(&mut self, timeout: Duration) -> Result<Box<dyn Channel>>;
}

/// One open data channel.
pub trait Channel: Send {
    /// `tpg_send`: sends a whole block (possibly several protocol sends).
    fn send(&mut self, block: &[u8]) -> Result<()>;
    /// `tpg_recv`: receives up to `buf.len()` bytes, waiting at most [`POLL`].
    fn recv(&mut self, buf: &mut [u8]) -> Result<Recv>;
    /// `tpg_close`: ends the channel (the peer sees [`Recv::Eof`]).
    fn close(&mut self) -> Result<()>;
    /// Transport statistics so far.
    fn perfmon(&self) -> Perf;
}

/// The transport for `kind`, or a clear error when it is not available in this build.
pub fn for_kind(kind: TransportKind) -> Result<Box<dyn Connector>> {
    match kind {
        TransportKind::Tcp => Ok(Box::new(Tcp)),
        TransportKind::Udp => Ok(Box::new(Udp)),
        TransportKind::Udt if udt::AVAILABLE => Ok(Box::new(Udt)),
        TransportKind::Udt => Err(udt::unavailable()),
        TransportKind::Plut => Ok(Box::new(Plut)),
    }
}

/// Whether UDT4 was compiled in.
pub fn udt_available() -> bool {
    udt::AVAILABLE
}

/// Wraps an IO error with what was done and where.
fn io_err(
    what: impl std::fmt::Display,
    addr: impl std::fmt::Display,
    e: std::io::Error,
) -> ProfileError {
    ProfileError::io(format!("{what} {addr}"), e)
}
