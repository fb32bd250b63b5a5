//! TCP channels: socket buffers ([`ChannelParams::buffer`]), and congestion control, MSS and
//! pacing through [`TcpOptions`](crate::socket::TcpOptions) (the options every TCP data socket
//! of haul takes); RTT and retransmissions from TCP_INFO.

use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use super::{
    io_err, set_buffers, Channel, ChannelError, ChannelParams, Connector, Kind, Listener, Perf,
    Recv, Result, Setting, POLL,
};

/// Kernel TCP.
#[derive(Debug, Clone, Copy, Default)]
pub struct Tcp;

fn configure(s: &Socket, p: &ChannelParams) -> Result<()> {
    set_buffers(s, p.buffer)?;
    p.tcp.apply(s).map_err(|e| {
        let setting = match e.option {
            "TCP_CONGESTION" => Setting::Congestion,
            "TCP_MAXSEG" => Setting::Mss,
            _ => Setting::Pacing,
        };
        ChannelError::setting(setting, e.to_string())
    })
}

fn new_socket(addr: &SocketAddr, p: &ChannelParams) -> Result<Socket> {
    let s = Socket::new(
        Domain::for_address(*addr),
        Type::STREAM,
        Some(Protocol::TCP),
    )
    .map_err(|e| io_err("TCP socket for", addr, e))?;
    configure(&s, p)?;
    Ok(s)
}

impl Connector for Tcp {
    fn kind(&self) -> Kind {
        Kind::Tcp
    }

    fn init(&self, _p: &ChannelParams) -> Result<()> {
        Ok(())
    }

    fn listen(&self, p: &ChannelParams, addr: SocketAddr) -> Result<Box<dyn Listener>> {
        let s = new_socket(&addr, p)?;
        s.set_reuse_address(true)
            .map_err(|e| io_err("SO_REUSEADDR", addr, e))?;
        s.bind(&addr.into()).map_err(|e| io_err("bind", addr, e))?;
        s.listen(128).map_err(|e| io_err("listen", addr, e))?;
        let l: TcpListener = s.into();
        let port = l
            .local_addr()
            .map_err(|e| io_err("local address of", addr, e))?
            .port();
        Ok(Box::new(TcpListen { l, port }))
    }

    fn connect(
        &self,
        p: &ChannelParams,
        local: Option<IpAddr>,
        remote: SocketAddr,
        timeout: Duration,
    ) -> Result<Box<dyn Channel>> {
        let s = new_socket(&remote, p)?;
        if let Some(ip) = local {
            let a = SocketAddr::new(ip, 0);
            s.bind(&SockAddr::from(a))
                .map_err(|e| io_err("bind", a, e))?;
        }
        s.connect_timeout(&remote.into(), timeout)
            .map_err(|e| io_err("TCP data connection to", remote, e))?;
        Ok(Box::new(TcpChannel::new(s.into())?))
    }
}

struct TcpListen {
    l: TcpListener,
    port: u16,
}

impl Listener for TcpListen {
    fn port(&self) -> u16 {
        self.port
    }

    fn accept(&mut self, timeout: Duration) -> Result<Box<dyn Channel>> {
        let deadline = Instant::now() + timeout;
        self.l
            .set_nonblocking(true)
            .map_err(|e| io_err("nonblocking listener", self.port, e))?;
        loop {
            match self.l.accept() {
                Ok((c, _)) => {
                    c.set_nonblocking(false)
                        .map_err(|e| io_err("blocking data socket on port", self.port, e))?;
                    return Ok(Box::new(TcpChannel::new(c)?));
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(2));
                }
                Err(e) => return Err(io_err("accept TCP data connection on port", self.port, e)),
            }
        }
    }
}

struct TcpChannel {
    s: TcpStream,
}

impl TcpChannel {
    fn new(s: TcpStream) -> Result<TcpChannel> {
        s.set_read_timeout(Some(POLL))
            .map_err(|e| io_err("read timeout", "on a TCP data channel", e))?;
        Ok(TcpChannel { s })
    }
}

impl Channel for TcpChannel {
    fn send(&mut self, block: &[u8]) -> Result<()> {
        self.s
            .write_all(block)
            .map_err(|e| io_err("TCP send", "on a data channel", e))
    }

    fn recv(&mut self, buf: &mut [u8]) -> Result<Recv> {
        match self.s.read(buf) {
            Ok(0) => Ok(Recv::Eof),
            Ok(n) => Ok(Recv::Data(n)),
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) =>
            {
                Ok(Recv::Idle)
            }
            Err(e) if e.kind() == ErrorKind::ConnectionReset => Ok(Recv::Eof),
            Err(e) => Err(io_err("TCP recv", "on a data channel", e)),
        }
    }

    fn close(&mut self) -> Result<()> {
        match self.s.shutdown(Shutdown::Write) {
            Err(e) if e.kind() != ErrorKind::NotConnected => {
                Err(io_err("TCP shutdown", "of a data channel", e))
            }
            _ => Ok(()),
        }
    }

    fn perfmon(&self) -> Perf {
        tcp_info(&self.s).unwrap_or_default()
    }
}

/// RTT and total retransmissions from TCP_INFO.
fn tcp_info(s: &TcpStream) -> Option<Perf> {
    // SAFETY: tcp_info is plain old data; getsockopt writes at most `len` bytes into it.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: `info` and `len` outlive the call; the kernel writes at most `len` bytes.
    let rc = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    (rc == 0).then(|| Perf {
        rtt_ms: Some(f64::from(info.tcpi_rtt) / 1000.0),
        retransmits: Some(u64::from(info.tcpi_total_retrans)),
        packets: None,
        lost: None,
    })
}
