//! TCP set-up for data connections. Buffer sizes are set before `connect` / `listen` so the
//! kernel can negotiate a window scale large enough for long fat paths; [`TcpOptions`] holds
//! the other per-socket settings (congestion control, MSS, pacing) in one place.

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use socket2::{Domain, Protocol, Socket, Type};

/// TCP socket options beyond the buffer size; `None` keeps the kernel's default.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TcpOptions {
    /// Congestion control (`cubic`, `bbr`, `reno`), TCP_CONGESTION.
    pub congestion: Option<String>,
    /// TCP_MAXSEG in bytes.
    pub mss: Option<u32>,
    /// SO_MAX_PACING_RATE, bytes per second.
    pub pacing: Option<u64>,
}

/// A socket option the kernel refused: which one, and why.
#[derive(Debug, thiserror::Error)]
#[error("{option} {value}: {source}{hint}")]
pub struct OptionError {
    /// The option (`TCP_CONGESTION`, `TCP_MAXSEG`, `SO_MAX_PACING_RATE`).
    pub option: &'static str,
    /// The value asked for.
    pub value: String,
    /// What to look at.
    pub hint: &'static str,
    /// The kernel's error.
    #[source]
    pub source: io::Error,
}

impl TcpOptions {
    /// Sets every option given on `s` (before connect / listen, so MSS applies).
    pub fn apply(&self, s: &Socket) -> Result<(), OptionError> {
        let err = |option, value: String, hint, source| OptionError {
            option,
            value,
            hint,
            source,
        };
        if let Some(cc) = &self.congestion {
            setsockopt(s, libc::IPPROTO_TCP, libc::TCP_CONGESTION, cc.as_bytes()).map_err(|e| {
                let hint = " (see /proc/sys/net/ipv4/tcp_available_congestion_control)";
                err("TCP_CONGESTION", cc.clone(), hint, e)
            })?;
        }
        if let Some(mss) = self.mss {
            s.set_mss(mss)
                .map_err(|e| err("TCP_MAXSEG", mss.to_string(), "", e))?;
        }
        if let Some(rate) = self.pacing {
            let v = u32::try_from(rate).unwrap_or(u32::MAX).to_ne_bytes();
            setsockopt(s, libc::SOL_SOCKET, libc::SO_MAX_PACING_RATE, &v)
                .map_err(|e| err("SO_MAX_PACING_RATE", format!("{rate} B/s"), "", e))?;
        }
        Ok(())
    }
}

/// `setsockopt` with a raw value.
fn setsockopt(
    s: &impl AsRawFd,
    level: libc::c_int,
    name: libc::c_int,
    val: &[u8],
) -> io::Result<()> {
    // SAFETY: `val` is a valid buffer of the given length for the duration of the call.
    let rc = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            level,
            name,
            val.as_ptr().cast(),
            val.len() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn new_socket(addr: &SocketAddr, buffer: Option<usize>) -> io::Result<Socket> {
    let s = Socket::new(
        Domain::for_address(*addr),
        Type::STREAM,
        Some(Protocol::TCP),
    )?;
    if let Some(b) = buffer {
        s.set_send_buffer_size(b)?;
        s.set_recv_buffer_size(b)?;
    }
    Ok(s)
}

/// Unsent bytes a data socket may hold before `write` blocks. Without a bound, autotuned send
/// buffers of tens of MB let a stream that just lost packets sit on megabytes of queued blocks
/// while the other streams finish, so a transfer ends at the pace of its slowest stream.
/// Bytes in flight are not limited by this, so throughput is not either.
pub const NOTSENT_LOWAT: u32 = 1 << 20;

/// Caps a data socket's unsent backlog at [`NOTSENT_LOWAT`].
pub fn limit_unsent(s: &TcpStream) -> io::Result<()> {
    set_int(
        s,
        libc::IPPROTO_TCP,
        libc::TCP_NOTSENT_LOWAT,
        NOTSENT_LOWAT as libc::c_int,
    )
}

/// Sets the `int` socket option `level` / `name` of `s` to `v`.
pub fn set_int(
    s: &impl AsRawFd,
    level: libc::c_int,
    name: libc::c_int,
    v: libc::c_int,
) -> io::Result<()> {
    setsockopt(s, level, name, &v.to_ne_bytes())
}

/// Opens a data connection to `addr` with the given socket buffer size (None: kernel autotuning).
pub fn connect(
    addr: SocketAddr,
    buffer: Option<usize>,
    timeout: Duration,
) -> io::Result<TcpStream> {
    connect_from(addr, None, buffer, timeout)
}

/// As [`connect`], from the local address `from` when given (and of `addr`'s family): a
/// server's data connections leave from the address its client reached it at, which is the
/// address the client accepts them from.
pub fn connect_from(
    addr: SocketAddr,
    from: Option<std::net::IpAddr>,
    buffer: Option<usize>,
    timeout: Duration,
) -> io::Result<TcpStream> {
    let s = new_socket(&addr, buffer)?;
    if let Some(ip) = from.filter(|ip| ip.is_ipv4() == addr.is_ipv4() && !ip.is_unspecified()) {
        s.bind(&SocketAddr::new(ip, 0).into()).map_err(|e| {
            io::Error::new(e.kind(), format!("bind {ip} for a data connection: {e}"))
        })?;
    }
    s.connect_timeout(&addr.into(), timeout)
        .map_err(|e| io::Error::new(e.kind(), format!("data connection to {addr}: {e}")))?;
    s.set_nodelay(true)?;
    let s: TcpStream = s.into();
    limit_unsent(&s)?;
    Ok(s)
}

/// Listens on `ip` with an ephemeral port (or the given one) and the given buffer size.
pub fn listen(addr: SocketAddr, buffer: Option<usize>) -> io::Result<TcpListener> {
    let s = new_socket(&addr, buffer)?;
    s.set_reuse_address(true)?;
    s.bind(&addr.into())
        .map_err(|e| io::Error::new(e.kind(), format!("bind {addr}: {e}")))?;
    s.listen(128)?;
    Ok(s.into())
}

/// Accepts one connection, giving up after `timeout`.
pub fn accept_timeout(l: &TcpListener, timeout: Duration) -> io::Result<(TcpStream, SocketAddr)> {
    let deadline = std::time::Instant::now() + timeout;
    // Non-blocking, so a connection another thread took between the poll and the accept
    // cannot block this one past its deadline.
    l.set_nonblocking(true)?;
    let r = loop {
        match l.accept() {
            Ok(c) => break Ok(c),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                let left = deadline.saturating_duration_since(std::time::Instant::now());
                if left.is_zero() {
                    break Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "no data connection arrived in time",
                    ));
                }
                // Sleep until a connection is pending or the deadline passes, rather than
                // polling: the connection is taken the moment it arrives.
                let mut pfd = libc::pollfd {
                    fd: l.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                };
                let ms = left.as_millis().clamp(1, i32::MAX as u128) as libc::c_int;
                // SAFETY: one valid pollfd for the duration of the call.
                if unsafe { libc::poll(&mut pfd, 1, ms) } < 0 {
                    let e = io::Error::last_os_error();
                    if e.kind() != io::ErrorKind::Interrupted {
                        break Err(e);
                    }
                }
            }
            Err(e) => break Err(e),
        }
    };
    l.set_nonblocking(false)?;
    let (c, a) = r?;
    c.set_nonblocking(false)?;
    c.set_nodelay(true)?;
    limit_unsent(&c)?;
    Ok((c, a))
}
