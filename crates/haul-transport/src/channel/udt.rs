//! UDT4 channels over [`crate::udt`] (the same sockets `haul cp --transport udt` uses):
//! UDT_MSS = m + 28, UDT_SNDBUF / UDT_RCVBUF, UDP_SNDBUF / UDP_RCVBUF, UDT_MAXBW; RTT and
//! retransmissions from `perfmon`. In a build without `udt.h`, [`AVAILABLE`] is false.

use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use super::{
    Channel, ChannelError, ChannelParams, Connector, Kind, Listener, Perf, Recv, Result, Setting,
    IP_UDP_HEADER, POLL,
};
use crate::udt::{self, UdtListener, UdtStream};

/// Whether UDT4 was compiled in.
pub const AVAILABLE: bool = udt::AVAILABLE;

/// UDT4.
#[derive(Debug, Clone, Copy, Default)]
pub struct Udt;

/// θ's UDT options.
fn options(p: &ChannelParams) -> udt::Options {
    udt::Options {
        mss: Some(p.packet.saturating_add(IP_UDP_HEADER)),
        sndbuf: p.udt.sndbuf,
        rcvbuf: p.udt.rcvbuf,
        udp_sndbuf: p.udt.udp_sndbuf,
        udp_rcvbuf: p.udt.udp_rcvbuf,
        maxbw: p.udt.maxbw,
    }
}

/// The error for UDT in a build without UDT4, with [`udt::unavailable`]'s one message.
pub(super) fn unavailable() -> ChannelError {
    ChannelError::Unavailable {
        kind: Kind::Udt,
        reason: udt::unavailable().to_string(),
    }
}

impl Connector for Udt {
    fn kind(&self) -> Kind {
        Kind::Udt
    }

    fn init(&self, p: &ChannelParams) -> Result<()> {
        if !AVAILABLE {
            return Err(unavailable());
        }
        if p.packet.saturating_add(IP_UDP_HEADER) < 76 {
            return Err(ChannelError::setting(
                Setting::Packet,
                format!("UDT packet size {} too small", p.packet),
            ));
        }
        Ok(())
    }

    fn listen(&self, p: &ChannelParams, addr: SocketAddr) -> Result<Box<dyn Listener>> {
        let l = UdtListener::bind(addr, &options(p))
            .map_err(|e| ChannelError::io(format!("listen on {addr}"), e))?;
        Ok(Box::new(UdtListen(l)))
    }

    fn connect(
        &self,
        p: &ChannelParams,
        local: Option<IpAddr>,
        remote: SocketAddr,
        _timeout: Duration,
    ) -> Result<Box<dyn Channel>> {
        let s = UdtStream::connect(remote, local, &options(p))
            .map_err(|e| ChannelError::io(format!("connect to {remote}"), e))?;
        UdtChannel::boxed(s)
    }
}

struct UdtListen(UdtListener);

impl Listener for UdtListen {
    fn port(&self) -> u16 {
        self.0.local_addr().port()
    }

    fn accept(&mut self, timeout: Duration) -> Result<Box<dyn Channel>> {
        let port = self.port();
        let (s, _) = self
            .0
            .accept_timeout(timeout)
            .map_err(|e| ChannelError::io(format!("accept on port {port}"), e))?;
        UdtChannel::boxed(s)
    }
}

struct UdtChannel {
    s: UdtStream,
}

impl UdtChannel {
    /// A channel whose receive waits at most [`POLL`].
    fn boxed(s: UdtStream) -> Result<Box<dyn Channel>> {
        s.set_read_timeout(Some(POLL))
            .map_err(|e| ChannelError::io("receive timeout of a UDT channel", e))?;
        Ok(Box::new(UdtChannel { s }))
    }
}

impl Channel for UdtChannel {
    fn send(&mut self, block: &[u8]) -> Result<()> {
        self.s
            .write_all(block)
            .map_err(|e| ChannelError::io("UDT channel", e))
    }

    fn recv(&mut self, buf: &mut [u8]) -> Result<Recv> {
        match self.s.read(buf) {
            Ok(0) => Ok(Recv::Eof),
            Ok(n) => Ok(Recv::Data(n)),
            Err(e) if e.kind() == ErrorKind::TimedOut => Ok(Recv::Idle),
            Err(e) => Err(ChannelError::io("UDT channel", e)),
        }
    }

    fn close(&mut self) -> Result<()> {
        // Waits until UDT has delivered what was sent (a drop would discard it).
        self.s
            .close()
            .map_err(|e| ChannelError::io("closing a UDT channel", e))
    }

    fn perfmon(&self) -> Perf {
        self.s.perfmon().map_or_else(Perf::default, |p| Perf {
            rtt_ms: Some(p.rtt_ms),
            retransmits: Some(p.retransmits),
            packets: None,
            lost: Some(p.lost),
        })
    }
}
