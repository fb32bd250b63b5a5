//! UDP blast: blocks cut into datagrams of at most m bytes, each led by a 16-byte header
//! (`seq: u64 BE | flags: u64 BE`, flag 1 = final). The receiver counts datagrams and derives
//! loss from the highest sequence number seen. No congestion control: the caller paces (`haul
//! profile -b`).

use std::io::ErrorKind;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::time::Duration;

use socket2::{Domain, Protocol, Socket, Type};

use super::{
    io_err, set_buffers, Channel, ChannelError, ChannelParams, Connector, Kind, Listener, Perf,
    Recv, Result, Setting, POLL,
};

/// Sequence header bytes in every datagram.
pub const HEADER: usize = 16;
const FLAG_FIN: u64 = 1;
/// Final datagrams sent on close (some may be lost).
const FIN_COPIES: usize = 3;

/// UDP blast.
#[derive(Debug, Clone, Copy, Default)]
pub struct Udp;

fn socket(addr: &SocketAddr, p: &ChannelParams, bind: SocketAddr) -> Result<UdpSocket> {
    let s = Socket::new(Domain::for_address(*addr), Type::DGRAM, Some(Protocol::UDP))
        .map_err(|e| io_err("UDP socket for", addr, e))?;
    set_buffers(&s, p.buffer)?;
    s.bind(&bind.into())
        .map_err(|e| io_err("bind UDP", bind, e))?;
    Ok(s.into())
}

impl Connector for Udp {
    fn kind(&self) -> Kind {
        Kind::Udp
    }

    fn init(&self, p: &ChannelParams) -> Result<()> {
        if (p.packet as usize) < HEADER || p.packet > 65_507 {
            return Err(ChannelError::setting(
                Setting::Packet,
                format!("UDP datagram size {} (16..=65507)", p.packet),
            ));
        }
        Ok(())
    }

    fn listen(&self, p: &ChannelParams, addr: SocketAddr) -> Result<Box<dyn Listener>> {
        let s = socket(&addr, p, addr)?;
        let port = s
            .local_addr()
            .map_err(|e| io_err("local address of", addr, e))?
            .port();
        Ok(Box::new(UdpListen { s: Some(s), port }))
    }

    fn connect(
        &self,
        p: &ChannelParams,
        local: Option<IpAddr>,
        remote: SocketAddr,
        _timeout: Duration,
    ) -> Result<Box<dyn Channel>> {
        let bind = SocketAddr::new(
            local.unwrap_or(if remote.is_ipv4() {
                [0, 0, 0, 0].into()
            } else {
                [0u16; 8].into()
            }),
            0,
        );
        let s = socket(&remote, p, bind)?;
        s.connect(remote)
            .map_err(|e| io_err("UDP connect to", remote, e))?;
        Ok(Box::new(UdpChannel::new(s, p.packet as usize)?))
    }
}

struct UdpListen {
    s: Option<UdpSocket>,
    port: u16,
}

impl Listener for UdpListen {
    fn port(&self) -> u16 {
        self.port
    }

    /// UDP is connectionless: the bound socket is the channel (one accept per listener).
    fn accept(&mut self, _timeout: Duration) -> Result<Box<dyn Channel>> {
        let s = self
            .s
            .take()
            .ok_or_else(|| ChannelError::Usage(format!("UDP port {} accepted twice", self.port)))?;
        Ok(Box::new(UdpChannel::new(s, 65_536)?))
    }
}

struct UdpChannel {
    s: UdpSocket,
    packet: usize,
    seq: u64,
    buf: Vec<u8>,
    received: u64,
    max_seq: Option<u64>,
}

impl UdpChannel {
    fn new(s: UdpSocket, packet: usize) -> Result<UdpChannel> {
        s.set_read_timeout(Some(POLL))
            .map_err(|e| io_err("read timeout", "on a UDP channel", e))?;
        Ok(UdpChannel {
            s,
            packet,
            seq: 0,
            buf: vec![0; 65_536],
            received: 0,
            max_seq: None,
        })
    }

    fn datagram(&mut self, len: usize, flags: u64) -> Result<()> {
        let len = len.clamp(HEADER, self.buf.len());
        self.buf[..8].copy_from_slice(&self.seq.to_be_bytes());
        self.buf[8..16].copy_from_slice(&flags.to_be_bytes());
        match self.s.send(&self.buf[..len]) {
            Ok(_) => {}
            // A full socket buffer or a refused port drops the datagram, like the network would.
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::ConnectionRefused
                ) || e.raw_os_error() == Some(libc::ENOBUFS) => {}
            Err(e) => return Err(io_err("UDP send", "on a data channel", e)),
        }
        if flags != FLAG_FIN {
            self.seq += 1;
        }
        Ok(())
    }
}

impl Channel for UdpChannel {
    fn send(&mut self, block: &[u8]) -> Result<()> {
        let mut left = block.len();
        while left > 0 {
            let n = left.min(self.packet);
            self.datagram(n, 0)?;
            left -= n;
        }
        Ok(())
    }

    fn recv(&mut self, buf: &mut [u8]) -> Result<Recv> {
        match self.s.recv(buf) {
            Ok(n) if n >= HEADER => {
                let seq = u64::from_be_bytes(buf[..8].try_into().unwrap_or_default());
                let flags = u64::from_be_bytes(buf[8..16].try_into().unwrap_or_default());
                if flags & FLAG_FIN != 0 {
                    return Ok(Recv::Eof);
                }
                self.received += 1;
                self.max_seq = Some(self.max_seq.map_or(seq, |m| m.max(seq)));
                Ok(Recv::Data(n))
            }
            Ok(_) => Ok(Recv::Idle),
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock
                        | ErrorKind::TimedOut
                        | ErrorKind::Interrupted
                        | ErrorKind::ConnectionRefused
                ) =>
            {
                Ok(Recv::Idle)
            }
            Err(e) => Err(io_err("UDP recv", "on a data channel", e)),
        }
    }

    fn close(&mut self) -> Result<()> {
        for _ in 0..FIN_COPIES {
            self.datagram(HEADER, FLAG_FIN)?;
        }
        Ok(())
    }

    fn perfmon(&self) -> Perf {
        match self.max_seq {
            Some(m) => Perf {
                packets: Some(self.received),
                lost: Some((m + 1).saturating_sub(self.received)),
                ..Perf::default()
            },
            None if self.seq > 0 => Perf {
                packets: Some(self.seq),
                ..Perf::default()
            },
            None => Perf {
                packets: Some(0),
                lost: Some(0),
                ..Perf::default()
            },
        }
    }
}
