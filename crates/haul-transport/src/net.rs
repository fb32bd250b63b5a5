//! The network stack under a session's data connections: kernel TCP, or UDT4 over UDP. Globus
//! calls the choice the "net stack" (`SITE SETNETSTACK udt`); haul's client and server use the
//! same command. Whichever stack carries them, data connections are [`Conn`]s, so MODE E and
//! stream mode, markers, tokens and the watch over a data phase are the same code.

use std::fmt;
use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::str::FromStr;
use std::time::Duration;

use crate::udt::{self, UdtListener, UdtStream};
use crate::{socket, Conn, Cutter, DataStream};

/// Which protocol carries data connections.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum NetStack {
    /// Kernel TCP (GridFTP's default).
    #[default]
    Tcp,
    /// UDT4: reliable, congestion-controlled streams over UDP.
    Udt,
}

impl NetStack {
    /// The name `SITE SETNETSTACK` takes.
    pub fn as_str(self) -> &'static str {
        match self {
            NetStack::Tcp => "tcp",
            NetStack::Udt => "udt",
        }
    }
}

impl fmt::Display for NetStack {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for NetStack {
    type Err = String;

    /// `tcp` or `udt`, in any case (Globus names a stack by its XIO drivers; haul takes the
    /// two it has).
    fn from_str(s: &str) -> Result<NetStack, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "tcp" | "default" => Ok(NetStack::Tcp),
            "udt" => Ok(NetStack::Udt),
            o => Err(format!(
                "unknown network stack {o:?} (haul has tcp and udt)"
            )),
        }
    }
}

/// A listening data socket of either stack.
pub enum DataListener {
    /// TCP.
    Tcp(TcpListener),
    /// UDT.
    Udt(UdtListener),
}

impl DataListener {
    /// Listens at `addr` (port 0: any) with `buffer` bytes of socket buffer (None: defaults).
    pub fn bind(stack: NetStack, addr: SocketAddr, buffer: Option<usize>) -> io::Result<Self> {
        Ok(match stack {
            NetStack::Tcp => DataListener::Tcp(socket::listen(addr, buffer)?),
            NetStack::Udt => DataListener::Udt(UdtListener::bind(
                addr,
                &udt::Options::with_buffers(buffer),
            )?),
        })
    }

    /// The address it listens at.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        match self {
            DataListener::Tcp(l) => l.local_addr(),
            DataListener::Udt(l) => Ok(l.local_addr()),
        }
    }

    /// A second handle on the same TCP listening socket (another thread may accept on it);
    /// UDT listeners have none.
    pub fn try_clone(&self) -> io::Result<Self> {
        match self {
            DataListener::Tcp(l) => l.try_clone().map(DataListener::Tcp),
            DataListener::Udt(_) => Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "a UDT listener cannot be shared",
            )),
        }
    }

    /// Which stack it belongs to.
    pub fn stack(&self) -> NetStack {
        match self {
            DataListener::Tcp(_) => NetStack::Tcp,
            DataListener::Udt(_) => NetStack::Udt,
        }
    }

    /// Accepts one connection, failing with `TimedOut` after `wait`.
    pub fn accept_timeout(&self, wait: Duration) -> io::Result<(RawConn, SocketAddr)> {
        match self {
            DataListener::Tcp(l) => {
                socket::accept_timeout(l, wait).map(|(c, a)| (RawConn::Tcp(c), a))
            }
            DataListener::Udt(l) => l.accept_timeout(wait).map(|(c, a)| (RawConn::Udt(c), a)),
        }
    }
}

/// A new data connection of either stack, before TLS or a token is put on it.
pub enum RawConn {
    /// TCP.
    Tcp(TcpStream),
    /// UDT.
    Udt(UdtStream),
}

impl RawConn {
    /// Connects to `addr` with `buffer` bytes of socket buffer (UDT's own handshake timeout
    /// stands in for `timeout`).
    pub fn connect(
        stack: NetStack,
        addr: SocketAddr,
        buffer: Option<usize>,
        timeout: Duration,
    ) -> io::Result<RawConn> {
        Self::connect_from(stack, addr, None, buffer, timeout)
    }

    /// As [`RawConn::connect`], from the local address `from` (TCP only; see
    /// [`socket::connect_from`]).
    pub fn connect_from(
        stack: NetStack,
        addr: SocketAddr,
        from: Option<std::net::IpAddr>,
        buffer: Option<usize>,
        timeout: Duration,
    ) -> io::Result<RawConn> {
        Ok(match stack {
            NetStack::Tcp => RawConn::Tcp(socket::connect_from(addr, from, buffer, timeout)?),
            NetStack::Udt => RawConn::Udt(UdtStream::connect(
                addr,
                None,
                &udt::Options::with_buffers(buffer),
            )?),
        })
    }

    /// Sets how long a read and a write may wait.
    pub fn set_timeouts(&self, read: Option<Duration>, write: Option<Duration>) -> io::Result<()> {
        match self {
            RawConn::Tcp(s) => {
                s.set_read_timeout(read)?;
                s.set_write_timeout(write)
            }
            RawConn::Udt(s) => {
                s.set_read_timeout(read)?;
                s.set_write_timeout(write)
            }
        }
    }

    /// A handle that cuts this connection from another thread.
    pub fn cutter(&self) -> io::Result<Cutter> {
        match self {
            RawConn::Tcp(s) => DataStream::cutter(s),
            RawConn::Udt(s) => DataStream::cutter(s),
        }
    }

    /// The TCP socket, for TLS; UDT connections carry no TLS (an `Unsupported` error).
    pub fn into_tcp(self) -> io::Result<TcpStream> {
        match self {
            RawConn::Tcp(s) => Ok(s),
            RawConn::Udt(_) => Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "TLS data channels (PROT P) run over TCP only, not UDT",
            )),
        }
    }

    /// The connection as a plain data stream.
    pub fn into_conn(self) -> Conn {
        match self {
            RawConn::Tcp(s) => Box::new(s),
            RawConn::Udt(s) => Box::new(s),
        }
    }
}
