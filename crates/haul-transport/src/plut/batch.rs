//! Batched UDP IO for PLUT: `sendmmsg` / `recvmmsg` over preallocated datagram buffers, the
//! monotonic clock in nanoseconds, and the timer-and-spin wait the pacer uses. Nothing here
//! allocates after construction.

use std::io;
use std::net::{SocketAddr, SocketAddrV4, SocketAddrV6, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::Instant;

use haul_plut::Nanos;

/// `SO_TIMESTAMPNS` (`SO_TIMESTAMPNS_OLD`, a 64-bit `timespec` on these targets); the `libc`
/// crate does not export it for Linux.
#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
const SO_TIMESTAMPNS: libc::c_int = 35;

/// Control-message space per datagram: one `SCM_TIMESTAMPNS` (32 bytes) with room to spare.
const CTRL_LEN: usize = 64;

/// `count` datagram buffers of `mds` bytes with the `mmsghdr` array that points into them.
pub(super) struct Batch {
    data: Vec<u8>,
    mds: usize,
    lens: Vec<usize>,
    iov: Vec<libc::iovec>,
    hdr: Vec<libc::mmsghdr>,
    addr: Vec<libc::sockaddr_storage>,
    /// Control-message buffers (8-byte aligned), when receive timestamps are on.
    ctrl: Vec<u64>,
    /// Kernel receive time of each received datagram, CLOCK_REALTIME nanoseconds.
    stamps: Vec<Option<u64>>,
}

// SAFETY: the raw pointers in `iov` / `hdr` point into this struct's own heap buffers and are
// rebuilt before every system call; a `Batch` is used by one thread at a time.
unsafe impl Send for Batch {}

impl Batch {
    /// Buffers for `count` datagrams of up to `mds` bytes.
    pub(super) fn new(mds: usize, count: usize) -> Batch {
        let count = count.max(1);
        // SAFETY: all-zero is a valid iovec (null base, zero length).
        let zero_iov: libc::iovec = unsafe { std::mem::zeroed() };
        // SAFETY: all-zero is a valid mmsghdr (null pointers, zero lengths).
        let zero_hdr: libc::mmsghdr = unsafe { std::mem::zeroed() };
        // SAFETY: all-zero is a valid sockaddr_storage (AF_UNSPEC).
        let zero_addr: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        Batch {
            data: vec![0; mds * count],
            mds,
            lens: vec![0; count],
            iov: vec![zero_iov; count],
            hdr: vec![zero_hdr; count],
            addr: vec![zero_addr; count],
            ctrl: Vec::new(),
            stamps: vec![None; count],
        }
    }

    /// Asks the kernel for each datagram's receive time (`SO_TIMESTAMPNS`); see
    /// [`Batch::stamp`]. False where unsupported (the batch then reports none).
    pub(super) fn enable_timestamps(&mut self, sock: &UdpSocket) -> bool {
        #[cfg(all(
            target_os = "linux",
            any(target_arch = "x86_64", target_arch = "aarch64")
        ))]
        {
            let on: libc::c_int = 1;
            // SAFETY: valid fd and an int option value.
            let r = unsafe {
                libc::setsockopt(
                    sock.as_raw_fd(),
                    libc::SOL_SOCKET,
                    SO_TIMESTAMPNS,
                    (&on as *const libc::c_int).cast(),
                    size_of::<libc::c_int>() as libc::socklen_t,
                )
            };
            if r == 0 {
                self.ctrl = vec![0; self.capacity() * CTRL_LEN / 8];
                return true;
            }
        }
        let _ = sock;
        false
    }

    /// The kernel's receive time of datagram `i` of the last `recv`, CLOCK_REALTIME ns.
    pub(super) fn stamp(&self, i: usize) -> Option<u64> {
        self.stamps.get(i).copied().flatten()
    }

    /// Datagrams the batch holds.
    pub(super) fn capacity(&self) -> usize {
        self.lens.len()
    }

    /// The whole buffer of slot `i`, to write a datagram into.
    pub(super) fn slot(&mut self, i: usize) -> &mut [u8] {
        &mut self.data[i * self.mds..(i + 1) * self.mds]
    }

    /// Sets the length of the datagram in slot `i`.
    pub(super) fn set_len(&mut self, i: usize, len: usize) {
        self.lens[i] = len.min(self.mds);
    }

    /// The datagram in slot `i` (after `recv` or `set_len`).
    pub(super) fn get(&self, i: usize) -> &[u8] {
        &self.data[i * self.mds..i * self.mds + self.lens[i]]
    }

    /// The source address of received datagram `i`.
    pub(super) fn source(&self, i: usize) -> Option<SocketAddr> {
        from_storage(&self.addr[i])
    }

    fn prepare(&mut self, n: usize, lens_from_buffer: bool) {
        for i in 0..n {
            let len = if lens_from_buffer {
                self.mds
            } else {
                self.lens[i]
            };
            self.iov[i] = libc::iovec {
                iov_base: self.data[i * self.mds..].as_mut_ptr().cast(),
                iov_len: len,
            };
            // SAFETY: zeroed msghdr is valid; fields are then set to our own buffers.
            let mut m: libc::msghdr = unsafe { std::mem::zeroed() };
            m.msg_iov = &mut self.iov[i];
            m.msg_iovlen = 1;
            if lens_from_buffer {
                m.msg_name = (&mut self.addr[i] as *mut libc::sockaddr_storage).cast();
                m.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
                if !self.ctrl.is_empty() {
                    m.msg_control = self.ctrl[i * CTRL_LEN / 8..].as_mut_ptr().cast();
                    m.msg_controllen = CTRL_LEN as _;
                }
            }
            self.hdr[i] = libc::mmsghdr {
                msg_hdr: m,
                msg_len: 0,
            };
        }
    }

    /// Sends datagrams `0..n` on a connected socket with `sendmmsg`, retrying on a full queue.
    pub(super) fn send(&mut self, sock: &UdpSocket, n: usize) -> io::Result<()> {
        self.prepare(n, false);
        let mut done = 0;
        while done < n {
            // SAFETY: hdr[done..n] point at live buffers of this batch (prepared above).
            let r = unsafe {
                libc::sendmmsg(
                    sock.as_raw_fd(),
                    self.hdr[done..].as_mut_ptr(),
                    (n - done) as u32,
                    0,
                )
            };
            if r < 0 {
                let e = io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::EINTR) => continue,
                    // The device queue or socket buffer is full: let it drain.
                    Some(libc::ENOBUFS) | Some(libc::EAGAIN) => {
                        std::thread::sleep(std::time::Duration::from_micros(20))
                    }
                    _ => return Err(e),
                }
            } else {
                done += r as usize;
            }
        }
        Ok(())
    }

    /// Receives up to a batch without blocking; returns how many datagrams arrived.
    pub(super) fn recv(&mut self, sock: &UdpSocket) -> io::Result<usize> {
        let n = self.capacity();
        self.prepare(n, true);
        loop {
            // SAFETY: hdr[..n] point at live buffers of this batch (prepared above).
            let r = unsafe {
                libc::recvmmsg(
                    sock.as_raw_fd(),
                    self.hdr.as_mut_ptr(),
                    n as u32,
                    libc::MSG_DONTWAIT,
                    std::ptr::null_mut(),
                )
            };
            if r >= 0 {
                let got = r as usize;
                for i in 0..got {
                    self.lens[i] = self.hdr[i].msg_len as usize;
                    self.stamps[i] = if self.ctrl.is_empty() {
                        None
                    } else {
                        timestamp(&self.hdr[i].msg_hdr)
                    };
                }
                return Ok(got);
            }
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EAGAIN) => return Ok(0),
                // ICMP port unreachable for something we sent earlier: not fatal here.
                Some(libc::ECONNREFUSED) => return Ok(0),
                _ => return Err(e),
            }
        }
    }
}

/// The `SCM_TIMESTAMPNS` control message of a received datagram, as CLOCK_REALTIME ns.
#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
fn timestamp(m: &libc::msghdr) -> Option<u64> {
    // SAFETY: `m` was filled by recvmmsg with msg_control pointing at this batch's buffer of
    // msg_controllen bytes; the CMSG macros stay inside it, and the data of a
    // SOL_SOCKET/SCM_TIMESTAMPNS message is one timespec (read unaligned).
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(m);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == SO_TIMESTAMPNS {
                let ts: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                return Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64);
            }
            c = libc::CMSG_NXTHDR(m, c);
        }
    }
    None
}

#[cfg(not(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
)))]
fn timestamp(_: &libc::msghdr) -> Option<u64> {
    None
}

fn from_storage(s: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match i32::from(s.ss_family) {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in.
            let a: &libc::sockaddr_in = unsafe { &*(s as *const libc::sockaddr_storage).cast() };
            let ip = std::net::Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr));
            Some(SocketAddr::V4(SocketAddrV4::new(
                ip,
                u16::from_be(a.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says the storage holds a sockaddr_in6.
            let a: &libc::sockaddr_in6 = unsafe { &*(s as *const libc::sockaddr_storage).cast() };
            let ip = std::net::Ipv6Addr::from(a.sin6_addr.s6_addr);
            Some(SocketAddr::V6(SocketAddrV6::new(
                ip,
                u16::from_be(a.sin6_port),
                a.sin6_flowinfo,
                a.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

/// Nanoseconds since the start of a transfer (the `Nanos` the state machines see).
pub(super) struct Clock(Instant);

impl Clock {
    pub(super) fn start() -> Clock {
        Clock(Instant::now())
    }

    pub(super) fn now(&self) -> Nanos {
        self.0.elapsed().as_nanos() as Nanos
    }

    /// CLOCK_REALTIME less this clock, ns: subtract it from a kernel receive time
    /// ([`Batch::stamp`]) to put it on this clock. Taken once per received batch.
    pub(super) fn realtime_offset(&self) -> i128 {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes one timespec.
        unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
        let mono = self.now() as i128;
        ts.tv_sec as i128 * 1_000_000_000 + ts.tv_nsec as i128 - mono
    }
}

/// A kernel receive time on the transfer's clock (see [`Clock::realtime_offset`]), never
/// later than `now`; `now` itself when the datagram has none.
pub(super) fn arrival(stamp: Option<u64>, offset: i128, now: Nanos) -> Nanos {
    match stamp {
        Some(t) => (t as i128 - offset).clamp(0, i128::from(now)) as Nanos,
        None => now,
    }
}

/// What ended a wait.
#[derive(PartialEq, Eq)]
pub(super) enum Woke {
    /// The deadline passed.
    Deadline,
    /// The socket became readable first.
    Readable,
}

/// Waits until `deadline` or until `sock` is readable: sleeps in `ppoll` until `spin` before
/// the deadline, then spins on the clock (timer and spin hybrid; the pacer's precision).
pub(super) fn wait(
    sock: &UdpSocket,
    clock: &Clock,
    deadline: Nanos,
    spin: Nanos,
) -> io::Result<Woke> {
    loop {
        let now = clock.now();
        if now >= deadline {
            return Ok(Woke::Deadline);
        }
        let left = deadline - now;
        if left <= spin {
            while clock.now() < deadline {
                std::hint::spin_loop();
            }
            return Ok(Woke::Deadline);
        }
        if readable(sock, left - spin)? {
            return Ok(Woke::Readable);
        }
    }
}

/// Waits up to `timeout` ns for `sock` to become readable.
pub(super) fn readable(sock: &UdpSocket, timeout: Nanos) -> io::Result<bool> {
    let mut pfd = libc::pollfd {
        fd: sock.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ts = libc::timespec {
        tv_sec: (timeout / 1_000_000_000) as libc::time_t,
        tv_nsec: (timeout % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: one valid pollfd, a valid timespec, no signal mask.
    let r = unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) };
    if r < 0 {
        let e = io::Error::last_os_error();
        return if e.raw_os_error() == Some(libc::EINTR) {
            Ok(false)
        } else {
            Err(e)
        };
    }
    Ok(r > 0)
}

/// Lets this thread's timers fire within 1 µs of their deadline (default slack is 50 µs).
pub(super) fn tight_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument and affects only this thread.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1000 as libc::c_ulong, 0, 0, 0);
    }
}

/// CPU seconds (user + system) this thread has used.
pub(super) fn thread_cpu() -> f64 {
    // SAFETY: all-zero is a valid rusage.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes into the rusage we own.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut u) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    tv(u.ru_utime) + tv(u.ru_stime)
}
