//! The UDT4 sockets themselves, over `csrc/udt_shim.cpp`.

use std::ffi::CStr;
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::os::raw::{c_char, c_int, c_void};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use socket2::SockAddr;

use super::{millis, Options, Perf};

extern "C" {
    fn hu_startup() -> c_int;
    fn hu_last_error() -> *const c_char;
    fn hu_last_error_code() -> c_int;
    fn hu_socket(af: c_int) -> c_int;
    fn hu_setopt(s: c_int, which: c_int, value: i64) -> c_int;
    fn hu_bind(s: c_int, addr: *const c_void, len: c_int) -> c_int;
    fn hu_port(s: c_int) -> c_int;
    fn hu_listen(s: c_int, backlog: c_int) -> c_int;
    fn hu_accept(s: c_int, peer: *mut c_void, len: *mut c_int) -> c_int;
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
const OPT_SNDTIMEO: c_int = 7;
const OPT_RCVSYN: c_int = 8;
const OPT_LINGER: c_int = 9;

/// UDT error codes (`UDT::ERRORINFO`).
const EASYNCRCV: c_int = 6002;
const ETIMEOUT: c_int = 6003;
const ECONNLOST: c_int = 2001;
const ENOCONN: c_int = 2002;
const EINVSOCK: c_int = 5004;

/// How long a graceful [`UdtStream::close`] waits for UDT to deliver what was written.
const LINGER_SECS: i64 = 60;

/// How often a non-blocking accept looks again.
const ACCEPT_POLL: Duration = Duration::from_millis(2);

/// Whether the UDT library loaded and started (the shim loads it on first use), or why not.
static STARTUP: OnceLock<Result<(), String>> = OnceLock::new();

/// Loads and starts UDT4 once per process.
pub(super) fn startup() -> io::Result<()> {
    let started = STARTUP.get_or_init(|| {
        // SAFETY: called once per process (OnceLock), before any other shim function.
        if unsafe { hu_startup() } < 0 {
            // SAFETY: the shim returns a NUL-terminated string it owns for the process.
            let why = unsafe { CStr::from_ptr(hu_last_error()) };
            return Err(why.to_string_lossy().into_owned());
        }
        Ok(())
    });
    started
        .clone()
        .map_err(|why| io::Error::new(io::ErrorKind::Unsupported, why))
}

/// The calling thread's last UDT error as an IO error saying what was done.
fn last_error(what: &str) -> io::Error {
    // SAFETY: reads the calling thread's last UDT error code.
    let kind = match unsafe { hu_last_error_code() } {
        ETIMEOUT | EASYNCRCV => io::ErrorKind::TimedOut,
        ECONNLOST | ENOCONN => io::ErrorKind::BrokenPipe,
        EINVSOCK => io::ErrorKind::NotConnected,
        1000..=1999 => io::ErrorKind::ConnectionRefused,
        _ => io::ErrorKind::Other,
    };
    // SAFETY: UDT returns a pointer to a NUL-terminated thread-local string.
    let msg = unsafe { CStr::from_ptr(hu_last_error()) }.to_string_lossy();
    io::Error::new(kind, format!("UDT {what}: {msg}"))
}

fn check(rc: c_int, what: &str) -> io::Result<c_int> {
    if rc < 0 {
        Err(last_error(what))
    } else {
        Ok(rc)
    }
}

fn set(s: c_int, which: c_int, value: i64, name: &str) -> io::Result<()> {
    // SAFETY: FFI on integers; the shim copies the value.
    check(
        unsafe { hu_setopt(s, which, value) },
        &format!("setsockopt {name}={value}"),
    )
    .map(drop)
}

/// An owned UDT socket, closed on drop.
struct Sock(c_int);

impl Drop for Sock {
    fn drop(&mut self) {
        // SAFETY: closes a descriptor this value owns; a second close (after a cut or an
        // explicit close) fails harmlessly with EINVSOCK, since UDT never reuses an id.
        unsafe { hu_close(self.0) };
    }
}

/// A UDT option whose value must fit a C int.
fn int_opt(name: &str, v: u64) -> io::Result<i64> {
    i32::try_from(v).map(i64::from).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{name} {v} does not fit a UDT int option"),
        )
    })
}

/// A new UDT socket for `addr`'s family with `o` applied (they must precede bind / connect).
fn new_socket(o: &Options, addr: &SocketAddr) -> io::Result<Sock> {
    startup()?;
    let af = if addr.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    // SAFETY: plain FFI on an integer.
    let s = Sock(check(unsafe { hu_socket(af) }, "socket")?);
    let opts = [
        (OPT_MSS, o.mss.map(u64::from), "UDT_MSS"),
        (OPT_SNDBUF, o.sndbuf, "UDT_SNDBUF"),
        (OPT_RCVBUF, o.rcvbuf, "UDT_RCVBUF"),
        (OPT_UDP_SNDBUF, o.udp_sndbuf, "UDP_SNDBUF"),
        (OPT_UDP_RCVBUF, o.udp_rcvbuf, "UDP_RCVBUF"),
    ];
    for (which, v, name) in opts {
        if let Some(v) = v {
            set(s.0, which, int_opt(name, v)?, name)?;
        }
    }
    if let Some(bw) = o.maxbw {
        set(s.0, OPT_MAXBW, bw.min(i64::MAX as u64) as i64, "UDT_MAXBW")?;
    }
    // A drop or a cut closes at once; only `close` waits for delivery. (Options cannot be
    // changed later while another thread reads: UDT's setsockopt takes the receive lock.)
    set(s.0, OPT_LINGER, 0, "UDT_LINGER")?;
    Ok(s)
}

fn bind(s: &Sock, addr: SocketAddr) -> io::Result<()> {
    let sa = SockAddr::from(addr);
    // SAFETY: `sa` outlives the call and `len` is its size.
    let rc = unsafe { hu_bind(s.0, sa.as_ptr().cast(), sa.len() as c_int) };
    check(rc, &format!("bind {addr}")).map(drop)
}

/// A listening UDT socket.
pub struct UdtListener {
    sock: Sock,
    addr: SocketAddr,
}

impl UdtListener {
    /// Listens at `addr` (port 0 picks a free UDP port).
    pub fn bind(addr: SocketAddr, o: &Options) -> io::Result<UdtListener> {
        let sock = new_socket(o, &addr)?;
        bind(&sock, addr)?;
        // SAFETY: FFI on a socket this function owns.
        check(unsafe { hu_listen(sock.0, 64) }, &format!("listen {addr}"))?;
        // Accept without blocking, so that a wait has a deadline.
        set(sock.0, OPT_RCVSYN, 0, "UDT_RCVSYN")?;
        // SAFETY: as above.
        let port = check(unsafe { hu_port(sock.0) }, "getsockname")?;
        let addr = SocketAddr::new(addr.ip(), port as u16);
        Ok(UdtListener { sock, addr })
    }

    /// The address it listens at (the port the kernel chose).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Accepts one connection, giving up with `TimedOut` after `wait`.
    pub fn accept_timeout(&self, wait: Duration) -> io::Result<(UdtStream, SocketAddr)> {
        let deadline = Instant::now() + wait;
        loop {
            // SAFETY: zeroed sockaddr_storage is a valid out buffer of `len` bytes.
            let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
            let mut len = size_of::<libc::sockaddr_storage>() as c_int;
            // SAFETY: `ss` and `len` outlive the call; UDT writes at most `len` bytes.
            let rc = unsafe {
                hu_accept(
                    self.sock.0,
                    (&mut ss as *mut libc::sockaddr_storage).cast(),
                    &mut len,
                )
            };
            if rc >= 0 {
                let sock = Sock(rc);
                // The new socket inherits the listener's non-blocking receive.
                set(sock.0, OPT_RCVSYN, 1, "UDT_RCVSYN")?;
                // SAFETY: UDT wrote a sockaddr of `len` bytes into `ss`.
                let peer = unsafe { SockAddr::new(ss, len as libc::socklen_t) }
                    .as_socket()
                    .ok_or_else(|| io::Error::other("UDT accept: peer is not an IP address"))?;
                return Ok((UdtStream { sock }, peer));
            }
            let e = last_error(&format!("accept on {}", self.addr));
            if e.kind() != io::ErrorKind::TimedOut {
                return Err(e);
            }
            if Instant::now() >= deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "no UDT data connection arrived in time",
                ));
            }
            std::thread::sleep(ACCEPT_POLL);
        }
    }
}

/// One connected UDT socket: a reliable byte stream over UDP.
pub struct UdtStream {
    sock: Sock,
}

impl UdtStream {
    /// Connects to `remote`, from `local` if given (UDT's own handshake timeout applies).
    pub fn connect(
        remote: SocketAddr,
        local: Option<IpAddr>,
        o: &Options,
    ) -> io::Result<UdtStream> {
        let sock = new_socket(o, &remote)?;
        if let Some(ip) = local {
            bind(&sock, SocketAddr::new(ip, 0))?;
        }
        let sa = SockAddr::from(remote);
        // SAFETY: `sa` outlives the call and `len` is its size.
        let rc = unsafe { hu_connect(sock.0, sa.as_ptr().cast(), sa.len() as c_int) };
        check(rc, &format!("data connection to {remote}"))?;
        Ok(UdtStream { sock })
    }

    /// How long a read waits before it fails with `TimedOut` (None: forever).
    pub fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        set(self.sock.0, OPT_RCVTIMEO, millis(t), "UDT_RCVTIMEO")
    }

    /// How long a write waits for buffer space before it fails with `TimedOut`.
    pub fn set_write_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        set(self.sock.0, OPT_SNDTIMEO, millis(t), "UDT_SNDTIMEO")
    }

    /// Closes the connection once UDT has delivered what was written (UDT has no half-close),
    /// waiting up to a minute. Later reads and writes fail.
    pub fn close(&mut self) -> io::Result<()> {
        set(self.sock.0, OPT_LINGER, LINGER_SECS, "UDT_LINGER")?;
        // SAFETY: FFI on the owned socket; its drop's second close fails harmlessly.
        check(unsafe { hu_close(self.sock.0) }, "close").map(drop)
    }

    /// A handle another thread can use to end this connection at once.
    pub fn cutter(&self) -> Cutter {
        Cutter(self.sock.0)
    }

    /// RTT, retransmissions and losses so far; None if UDT has none.
    pub fn perfmon(&self) -> Option<Perf> {
        let (mut rtt, mut rate, mut retrans, mut lost) = (0.0, 0.0, 0i64, 0i64);
        // SAFETY: the out-pointers are valid locals.
        let rc = unsafe { hu_perfmon(self.sock.0, &mut rtt, &mut rate, &mut retrans, &mut lost) };
        (rc >= 0).then(|| Perf {
            rtt_ms: rtt,
            retransmits: retrans.max(0) as u64,
            lost: lost.max(0) as u64,
        })
    }
}

impl Read for UdtStream {
    /// Ok(0) once the peer has closed (UDT reports a closed and a lost peer alike; MODE E's
    /// EOD count and the end-to-end checksum tell a cut stream from a finished one).
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let len = buf.len().min(i32::MAX as usize) as c_int;
        // SAFETY: `buf` is valid for `len` bytes.
        let n = unsafe { hu_recv(self.sock.0, buf.as_mut_ptr().cast(), len) };
        if n > 0 {
            return Ok(n as usize);
        }
        let e = last_error("recv");
        match e.kind() {
            io::ErrorKind::BrokenPipe | io::ErrorKind::NotConnected => Ok(0),
            _ if n == 0 => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "UDT recv timed out",
            )),
            _ => Err(e),
        }
    }
}

impl Write for UdtStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let len = buf.len().min(i32::MAX as usize) as c_int;
        // SAFETY: `buf` is valid for `len` bytes.
        let n = unsafe { hu_send(self.sock.0, buf.as_ptr().cast(), len) };
        match n {
            n if n > 0 => Ok(n as usize),
            0 => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "UDT send timed out",
            )),
            _ => Err(last_error("send")),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Ends a UDT connection from another thread: a blocked read or write on it returns at once.
#[derive(Debug)]
pub struct Cutter(c_int);

impl Cutter {
    /// Closes the connection now, dropping unsent data (sockets linger only in `close`).
    pub fn cut(&self) {
        // SAFETY: FFI on an id; on an id already closed the call fails harmlessly.
        unsafe { hu_close(self.0) };
    }
}
