//! Measurement channels: the data channels `haul profile` opens, one per stream, behind one
//! interface covering TPG's seven callbacks (`struct tpg_protocol`, 000 §3):
//! [`Connector::init`], [`Connector::listen`], [`Connector::connect`], [`Listener::accept`],
//! [`Channel::send`], [`Channel::recv`], [`Channel::close`], plus [`Channel::perfmon`] (TPG's
//! `client_perfmon` / `server_perfmon`).
//!
//! The implementations use the sockets the copy path uses: [`Tcp`] applies
//! [`TcpOptions`], [`Udt`] runs over [`crate::udt`], [`Plut`] over
//! [`crate::plut`]'s stream API; [`Udp`] is a blast with sequence numbers. What they need of a
//! run is in [`ChannelParams`]; what goes wrong is a [`ChannelError`], whose
//! [`ChannelError::Setting`] names the [`Setting`] refused so a front end can name its flag.

mod plut;
mod tcp;
mod udp;
mod udt;

use std::fmt;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::plut::PlutError;
use crate::socket::TcpOptions;

pub use plut::Plut;
pub use tcp::Tcp;
pub use udp::Udp;
pub use udt::Udt;

/// How long one [`Channel::recv`] waits before it reports [`Recv::Idle`].
pub const POLL: Duration = Duration::from_millis(200);

/// IP + UDP headers: UDT_MSS = m + 28.
pub const IP_UDP_HEADER: u32 = 28;

/// The protocol of a measurement channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// Kernel TCP.
    Tcp,
    /// UDP blast with sequence numbers (no congestion control).
    Udp,
    /// UDT4 through the C++ shim.
    Udt,
    /// PLUT, haul's reliable UDP (004), one flow per stream.
    Plut,
}

impl Kind {
    /// The lowercase name used on the command line and in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Tcp => "tcp",
            Kind::Udp => "udp",
            Kind::Udt => "udt",
            Kind::Plut => "plut",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Kind {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "tcp" => Ok(Kind::Tcp),
            "udp" => Ok(Kind::Udp),
            "udt" => Ok(Kind::Udt),
            "plut" => Ok(Kind::Plut),
            o => Err(format!(
                "unknown transport {o:?} (expected tcp, udp, udt or plut)"
            )),
        }
    }
}

/// UDT4 socket options (001 §IV-A: -f -F -r -R -M -B); UDT_MSS follows the packet size.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct UdtOptions {
    /// UDT_SNDBUF, bytes.
    pub sndbuf: Option<u64>,
    /// UDT_RCVBUF, bytes.
    pub rcvbuf: Option<u64>,
    /// UDP_SNDBUF, bytes.
    pub udp_sndbuf: Option<u64>,
    /// UDP_RCVBUF, bytes.
    pub udp_rcvbuf: Option<u64>,
    /// UDT_MAXBW, bytes per second.
    pub maxbw: Option<u64>,
}

/// PLUT's source-rate controller.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PlutController {
    /// PLUT's Robbins–Monro stabilisation (Eqs. 1–3 of 004).
    #[default]
    Rm,
    /// Tsunami's error-rate control with ARET threshold adaptation (000 §5).
    Tsunami,
}

impl PlutController {
    /// The lowercase name used on the command line and in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            PlutController::Rm => "rm",
            PlutController::Tsunami => "tsunami",
        }
    }
}

impl fmt::Display for PlutController {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for PlutController {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "rm" | "robbins-monro" => Ok(PlutController::Rm),
            "tsunami" | "aret" => Ok(PlutController::Tsunami),
            o => Err(format!(
                "unknown PLUT controller {o:?} (expected rm or tsunami)"
            )),
        }
    }
}

/// PLUT options (004); the packet size is the datagram size (MDS) and the buffer the socket
/// buffers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PlutOptions {
    /// Source-rate controller.
    pub controller: PlutController,
    /// Rate each stream's controller starts from, bytes per second (B/16 when absent).
    pub initial_rate: Option<u64>,
    /// NIC rate B of Eq. 1 of 004: the most one stream's pacer sends, bytes per second
    /// (`-b`/P when a cap is given, else 10 Gb/s).
    pub max_rate: Option<u64>,
    /// Session id of the run's PLUT flows: a nonce the client draws for each run.
    pub session: Option<u64>,
}

/// What the channels take from a run's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct ChannelParams {
    /// Block size l in effect: bytes per send / receive call (the period of PLUT's pattern).
    pub block: u64,
    /// Packet size m in effect: datagram size for UDP and PLUT, UDT_MSS − 28 for UDT.
    pub packet: u32,
    /// Socket buffers (SO_SNDBUF / SO_RCVBUF) of TCP, UDP and PLUT, bytes; `None` keeps the
    /// kernel's (TCP, UDP) or PLUT's default.
    pub buffer: Option<u64>,
    /// Bandwidth cap of one channel, bytes per second: PLUT's NIC rate B when
    /// `plut.max_rate` is absent (the other channels send as fast as they are called).
    pub rate: Option<f64>,
    /// How long a PLUT end waits for a silent peer (`None`: PLUT's default).
    pub idle_timeout: Option<Duration>,
    /// TCP options.
    pub tcp: TcpOptions,
    /// UDT options.
    pub udt: UdtOptions,
    /// PLUT options.
    pub plut: PlutOptions,
}

impl ChannelParams {
    /// Block size l and packet size m, every other setting at its default.
    pub fn new(block: u64, packet: u32) -> ChannelParams {
        ChannelParams {
            block,
            packet,
            buffer: None,
            rate: None,
            idle_timeout: None,
            tcp: TcpOptions::default(),
            udt: UdtOptions::default(),
            plut: PlutOptions::default(),
        }
    }
}

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

/// A setting of [`ChannelParams`] a channel refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting {
    /// [`ChannelParams::buffer`].
    Buffer,
    /// [`ChannelParams::packet`].
    Packet,
    /// [`TcpOptions::congestion`].
    Congestion,
    /// [`TcpOptions::mss`].
    Mss,
    /// [`TcpOptions::pacing`].
    Pacing,
    /// [`PlutOptions::session`].
    PlutSession,
    /// [`PlutOptions::initial_rate`].
    PlutInitialRate,
    /// [`PlutOptions::max_rate`].
    PlutMaxRate,
    /// The PLUT configuration as a whole (what `haul_plut::Config::validate` refused).
    Plut,
}

impl Setting {
    /// The setting's field name.
    pub fn as_str(self) -> &'static str {
        match self {
            Setting::Buffer => "buffer",
            Setting::Packet => "packet",
            Setting::Congestion => "tcp.congestion",
            Setting::Mss => "tcp.mss",
            Setting::Pacing => "tcp.pacing",
            Setting::PlutSession => "plut.session",
            Setting::PlutInitialRate => "plut.initial_rate",
            Setting::PlutMaxRate => "plut.max_rate",
            Setting::Plut => "plut",
        }
    }
}

impl fmt::Display for Setting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What went wrong on a measurement channel.
#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    /// A socket operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done, with the address involved.
        what: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// A setting is out of range for this transport, or the kernel refused it.
    #[error("bad channel setting {setting}: {reason}")]
    Setting {
        /// The setting.
        setting: Setting,
        /// Why it was refused.
        reason: String,
    },
    /// The transport is not available in this build.
    #[error("transport {kind} is not available: {reason}")]
    Unavailable {
        /// The transport.
        kind: Kind,
        /// Why, and what to install.
        reason: String,
    },
    /// A PLUT flow failed.
    #[error("PLUT data channel {channel}: {source}")]
    Plut {
        /// The channel's address.
        channel: String,
        /// The PLUT IO layer's error.
        #[source]
        source: PlutError,
    },
    /// The channel was used in a way it does not support (a second accept on a datagram
    /// listener, receiving on a PLUT sender, a PLUT block other than the test block).
    #[error("{0}")]
    Usage(String),
}

impl ChannelError {
    /// An IO error with context.
    pub fn io(what: impl Into<String>, source: io::Error) -> ChannelError {
        ChannelError::Io {
            what: what.into(),
            source,
        }
    }

    /// A refused setting.
    pub fn setting(setting: Setting, reason: impl Into<String>) -> ChannelError {
        ChannelError::Setting {
            setting,
            reason: reason.into(),
        }
    }
}

/// Result type of the channels.
pub type Result<T> = std::result::Result<T, ChannelError>;

/// A protocol that can be profiled.
pub trait Connector: Send + Sync {
    /// Which protocol this is.
    fn kind(&self) -> Kind;
    /// `tpg_init`: checks θ against what this transport supports and prepares the library.
    fn init(&self, p: &ChannelParams) -> Result<()>;
    /// `tpg_listen`: opens one server data channel at `addr` (port 0 picks a free one).
    fn listen(&self, p: &ChannelParams, addr: SocketAddr) -> Result<Box<dyn Listener>>;
    /// `tpg_connect`: opens one client data channel to `remote`, bound to `local` if given.
    fn connect(
        &self,
        p: &ChannelParams,
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
pub fn for_kind(kind: Kind) -> Result<Box<dyn Connector>> {
    match kind {
        Kind::Tcp => Ok(Box::new(Tcp)),
        Kind::Udp => Ok(Box::new(Udp)),
        Kind::Udt if udt::AVAILABLE => Ok(Box::new(Udt)),
        Kind::Udt => Err(udt::unavailable()),
        Kind::Plut => Ok(Box::new(Plut)),
    }
}

/// Whether UDT4 was compiled in.
pub fn udt_available() -> bool {
    udt::AVAILABLE
}

/// The block every profile sender sends (l bytes): byte i is i mod 251. PLUT channels carry it
/// repeated and check every byte received against it.
pub fn test_block(l: usize) -> Vec<u8> {
    (0..l).map(|i| (i % 251) as u8).collect()
}

/// Wraps an IO error with what was done and where.
fn io_err(what: impl fmt::Display, addr: impl fmt::Display, e: io::Error) -> ChannelError {
    ChannelError::io(format!("{what} {addr}"), e)
}

/// Sets SO_SNDBUF and SO_RCVBUF to `buffer`, if given.
fn set_buffers(s: &socket2::Socket, buffer: Option<u64>) -> Result<()> {
    if let Some(b) = buffer {
        let b = usize::try_from(b)
            .map_err(|_| ChannelError::setting(Setting::Buffer, "buffer too large"))?;
        s.set_send_buffer_size(b)
            .map_err(|e| io_err("SO_SNDBUF", b, e))?;
        s.set_recv_buffer_size(b)
            .map_err(|e| io_err("SO_RCVBUF", b, e))?;
    }
    Ok(())
}
