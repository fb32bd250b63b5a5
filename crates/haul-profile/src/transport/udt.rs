//! UDT4 data channels through the C++ shim in `csrc/udt_shim.cpp` (Debian's `libudt-dev`):
//! UDT_MSS = m + 28, UDT_SNDBUF / UDT_RCVBUF, UDP_SNDBUF / UDP_RCVBUF, UDT_MAXBW; RTT and
//! retransmissions from `perfmon`. Without `udt.h` at build time, [`AVAILABLE`] is false.

#[cfg(haul_udt)]
pub use imp::Udt;
#[cfg(haul_udt)]
/// Whether UDT4 was compiled in.
pub const AVAILABLE: bool = true;

#[cfg(not(haul_udt))]
pub use unavailable::Udt;
#[cfg(not(haul_udt))]
/// Whether UDT4 was compiled in.
pub const AVAILABLE: bool = false;

#[cfg(not(haul_udt))]
mod unavailable {
    use std::net::{IpAddr, SocketAddr};
    use std::time::Duration;

    use crate::params::{ProfileParams, TransportKind};
    use crate::transport::{Channel, Listener, Transport};
    use crate::{ProfileError, Result};

    /// UDT4 (not compiled in: every call fails with a clear error).
    #[derive(Debug, Clone, Copy, Default)]
    pub struct Udt;

    fn missing() -> ProfileError {
        ProfileError::Unavailable(
            "udt".into(),
            "haul was built without UDT4 (libudt-dev)".into(),
        )
    }

    impl Transport for Udt {
        fn kind(&self) -> TransportKind {
            TransportKind::Udt
        }
        fn init(&self, _p: &ProfileParams) -> Result<()> {
            Err(missing())
        }
        fn listen(&self, _p: &ProfileParams, _a: SocketAddr) -> Result<Box<dyn Listener>> {
            Err(missing())
        }
        fn connect(
            &self,
            _p: &ProfileParams,
            _l: Option<IpAddr>,
            _r: SocketAddr,
            _t: Duration,
        ) -> Result<Box<dyn Channel>> {
            Err(missing())
        }
    }
}

#[cfg(haul_udt)]
mod imp {
    use std::ffi::CStr;
    use std::net::{IpAddr, SocketAddr};
    use std::os::raw::{c_char, c_int, c_void};
    use std::sync::Once;
    use std::time::Duration;

    use socket2::SockAddr;

    use crate::params::{ProfileParams, TransportKind, IP_UDP_HEADER};
    use crate::transport::{Channel, Listener, Perf, Recv, Transport, POLL};
    use crate::{ProfileError, Result};

    extern "C" {
        fn hu_startup() -> c_int;
        fn hu_last_error() -> *const c_char;
        fn hu_last_error_code() -> c_int;
        fn hu_socket(af: c_int) -> c_int;
        fn hu_setopt(s: c_int, which: c_int, value: i64) -> c_int;
        fn hu_bind(s: c_int, addr: *const c_void, len: c_int) -> c_int;
        fn hu_port(s: c_int) -> c_int;
        fn hu_listen(s: c_int, backlog: c_int) -> c_int;
        fn hu_accept(s: c_int) -> c_int;
        fn hu_connect(s: c_int, addr: *const c_void, len: c_int) -> c_int;
        fn hu_send(s: c_int, buf: *const c_char, len: c_int) -> c_int;
        fn hu_recv(s: c_int, buf: *mut c_char, len: c_int) -> c_int;
        fn hu_close(s: c_int) -> c_int;
        fn hu_perfmon(
            s: c_int,
            rtt_ms: *mut f64,
            send_mbps: *mut f64,
            retrans: *mut i64,
            lost: *mut i64,
        ) -> c_int;
    }

    const OPT_MSS: c_int = 0;
    const OPT_SNDBUF: c_int = 1;
    const OPT_RCVBUF: c_int = 2;
    const OPT_UDP_SNDBUF: c_int = 3;
    const OPT_UDP_RCVBUF: c_int = 4;
    const OPT_MAXBW: c_int = 5;
    const OPT_RCVTIMEO: c_int = 6;
    /// UDT error code for a receive timeout.
    const ETIMEOUT: c_int = 6003;
    /// UDT error codes for a broken or closed connection.
    const ECONNLOST: c_int = 2001;
    const ENOCONN: c_int = 2002;
    const EINVSOCK: c_int = 5004;

    static STARTUP: Once = Once::new();

    fn last_error(what: &str) -> ProfileError {
        // SAFETY: UDT returns a pointer to a NUL-terminated thread-local string.
        let msg = unsafe { CStr::from_ptr(hu_last_error()) }
            .to_string_lossy()
            .into_owned();
        ProfileError::Udt {
            what: what.into(),
            message: msg,
        }
    }

    fn check(rc: c_int, what: &str) -> Result<c_int> {
        if rc < 0 {
            Err(last_error(what))
        } else {
            Ok(rc)
        }
    }

    fn int_opt(name: &str, v: u64) -> Result<i64> {
        i32::try_from(v)
            .map(i64::from)
            .map_err(|_| ProfileError::param(name, format!("{v} does not fit a UDT int option")))
    }

    /// Creates a UDT socket with θ's options set (they must precede bind / connect).
    fn new_socket(p: &ProfileParams, addr: &SocketAddr) -> Result<Sock> {
        // SAFETY: plain FFI calls on integers.
        let s = Sock(check(
            unsafe {
                hu_socket(if addr.is_ipv4() {
                    libc::AF_INET
                } else {
                    libc::AF_INET6
                })
            },
            "socket",
        )?);
        let mss = i64::from(p.packet_size() + IP_UDP_HEADER);
        let opts = [
            (OPT_MSS, Some(mss), "UDT_MSS"),
            (
                OPT_SNDBUF,
                p.udt
                    .sndbuf
                    .map(|v| int_opt("--udt-sndbuf", v))
                    .transpose()?,
                "UDT_SNDBUF",
            ),
            (
                OPT_RCVBUF,
                p.udt
                    .rcvbuf
                    .map(|v| int_opt("--udt-rcvbuf", v))
                    .transpose()?,
                "UDT_RCVBUF",
            ),
            (
                OPT_UDP_SNDBUF,
                p.udt
                    .udp_sndbuf
                    .map(|v| int_opt("--udp-sndbuf", v))
                    .transpose()?,
                "UDP_SNDBUF",
            ),
            (
                OPT_UDP_RCVBUF,
                p.udt
                    .udp_rcvbuf
                    .map(|v| int_opt("--udp-rcvbuf", v))
                    .transpose()?,
                "UDP_RCVBUF",
            ),
            (
                OPT_MAXBW,
                p.udt.maxbw.map(|v| v.min(i64::MAX as u64) as i64),
                "UDT_MAXBW",
            ),
            (OPT_RCVTIMEO, Some(POLL.as_millis() as i64), "UDT_RCVTIMEO"),
        ];
        for (which, v, name) in opts {
            if let Some(v) = v {
                check(
                    // SAFETY: FFI on integers; the shim copies the value.
                    unsafe { hu_setopt(s.0, which, v) },
                    &format!("setsockopt {name}={v}"),
                )?;
            }
        }
        Ok(s)
    }

    /// An owned UDT socket, closed on drop.
    struct Sock(c_int);

    impl Drop for Sock {
        fn drop(&mut self) {
            // SAFETY: closing an owned descriptor once.
            unsafe { hu_close(self.0) };
        }
    }

    /// UDT4.
    #[derive(Debug, Clone, Copy, Default)]
    pub struct Udt;

    impl Transport for Udt {
        fn kind(&self) -> TransportKind {
            TransportKind::Udt
        }

        fn init(&self, p: &ProfileParams) -> Result<()> {
            // SAFETY: UDT::startup is safe to call; Once keeps it to one call per process.
            STARTUP.call_once(|| unsafe {
                hu_startup();
            });
            if p.packet_size() + IP_UDP_HEADER < 76 {
                return Err(ProfileError::param(
                    "-M",
                    format!("UDT packet size {} too small", p.packet_size()),
                ));
            }
            Ok(())
        }

        fn listen(&self, p: &ProfileParams, addr: SocketAddr) -> Result<Box<dyn Listener>> {
            let s = new_socket(p, &addr)?;
            let sa = SockAddr::from(addr);
            check(
                // SAFETY: `sa` outlives the call and `len` is its size.
                unsafe { hu_bind(s.0, sa.as_ptr().cast(), sa.len() as c_int) },
                &format!("bind {addr}"),
            )?;
            // SAFETY: FFI on a socket this function owns.
            check(unsafe { hu_listen(s.0, 64) }, &format!("listen {addr}"))?;
            // SAFETY: as above.
            let port = check(unsafe { hu_port(s.0) }, "getsockname")?;
            Ok(Box::new(UdtListen {
                s,
                port: port as u16,
            }))
        }

        fn connect(
            &self,
            p: &ProfileParams,
            local: Option<IpAddr>,
            remote: SocketAddr,
            _timeout: Duration,
        ) -> Result<Box<dyn Channel>> {
            let s = new_socket(p, &remote)?;
            if let Some(ip) = local {
                let sa = SockAddr::from(SocketAddr::new(ip, 0));
                check(
                    // SAFETY: `sa` outlives the call and `len` is its size.
                    unsafe { hu_bind(s.0, sa.as_ptr().cast(), sa.len() as c_int) },
                    &format!("bind {ip}"),
                )?;
            }
            let sa = SockAddr::from(remote);
            check(
                // SAFETY: `sa` outlives the call and `len` is its size.
                unsafe { hu_connect(s.0, sa.as_ptr().cast(), sa.len() as c_int) },
                &format!("connect {remote}"),
            )?;
            Ok(Box::new(UdtChannel { s }))
        }
    }

    struct UdtListen {
        s: Sock,
        port: u16,
    }

    impl Listener for UdtListen {
        fn port(&self) -> u16 {
            self.port
        }

        /// Blocking accept: the driver calls it after the client reported every connect done.
        fn accept(&mut self, _timeout: Duration) -> Result<Box<dyn Channel>> {
            // SAFETY: FFI on an owned listening socket.
            let c = check(
                unsafe { hu_accept(self.s.0) },
                &format!("accept on port {}", self.port),
            )?;
            Ok(Box::new(UdtChannel { s: Sock(c) }))
        }
    }

    struct UdtChannel {
        s: Sock,
    }

    impl Channel for UdtChannel {
        fn send(&mut self, block: &[u8]) -> Result<()> {
            let mut off = 0;
            while off < block.len() {
                let chunk = &block[off..];
                let len = chunk.len().min(i32::MAX as usize) as c_int;
                // SAFETY: `chunk` is valid for `len` bytes.
                let n = check(
                    unsafe { hu_send(self.s.0, chunk.as_ptr().cast(), len) },
                    "send",
                )?;
                off += n as usize;
            }
            Ok(())
        }

        fn recv(&mut self, buf: &mut [u8]) -> Result<Recv> {
            let len = buf.len().min(i32::MAX as usize) as c_int;
            // SAFETY: `buf` is valid for `len` bytes.
            let n = unsafe { hu_recv(self.s.0, buf.as_mut_ptr().cast(), len) };
            if n > 0 {
                return Ok(Recv::Data(n as usize));
            }
            // SAFETY: reads the calling thread's last UDT error.
            match unsafe { hu_last_error_code() } {
                ETIMEOUT => Ok(Recv::Idle),
                ECONNLOST | ENOCONN | EINVSOCK => Ok(Recv::Eof),
                _ if n == 0 => Ok(Recv::Idle),
                _ => Err(last_error("recv")),
            }
        }

        fn close(&mut self) -> Result<()> {
            // The socket closes on drop; UDT lingers until queued data is delivered.
            Ok(())
        }

        fn perfmon(&self) -> Perf {
            let (mut rtt, mut rate, mut retrans, mut lost) = (0.0, 0.0, 0i64, 0i64);
            // SAFETY: the out-pointers are valid locals.
            let rc = unsafe { hu_perfmon(self.s.0, &mut rtt, &mut rate, &mut retrans, &mut lost) };
            if rc < 0 {
                return Perf::default();
            }
            Perf {
                rtt_ms: Some(rtt),
                retransmits: Some(retrans.max(0) as u64),
                packets: None,
                lost: Some(lost.max(0) as u64),
            }
        }
    }
}
