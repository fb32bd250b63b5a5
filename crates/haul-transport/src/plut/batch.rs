//! Helpers of PLUT's batched UDP IO (the batches themselves are in `gso.rs`, sending, and
//! `gro.rs`, receiving): socket addresses, the monotonic clock in nanoseconds, kernel receive
//! times on it, and the timer-and-spin wait the pacer uses.

use std::io;
use std::net::{SocketAddr, SocketAddrV4, SocketAddrV6, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::Instant;

use haul_plut::Nanos;

/// The socket address in `s`, if it holds an IPv4 or IPv6 one.
pub(super) fn from_storage(s: &libc::sockaddr_storage) -> Option<SocketAddr> {
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
    /// ([`RecvBatch::stamp`](super::gro::RecvBatch::stamp)) to put it on this clock. Taken once per received batch.
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

/// DATA counts as flowing for this long after the last datagram arrived, ns.
const FLOWING: Nanos = 1_000_000;

/// The receiver's wait between batches: while DATA is flowing (a datagram arrived within the
/// last millisecond), a plain sleep of the nap, which leaves the socket without a waiter for
/// the sender's `sendmmsg` to wake; otherwise, or with a zero nap, a wait until the socket is
/// readable.
pub(super) struct Napper {
    nap: Nanos,
    last_data: Option<Nanos>,
}

impl Napper {
    /// Naps of `nap` (see [`Tuning::receive_nap`](super::Tuning::receive_nap)).
    pub(super) fn new(nap: std::time::Duration) -> Napper {
        Napper {
            nap: nap.as_nanos() as Nanos,
            last_data: None,
        }
    }

    /// Waits at most `timeout` ns after a receive at `now` that brought `got` datagrams.
    pub(super) fn wait(
        &mut self,
        sock: &UdpSocket,
        now: Nanos,
        got: usize,
        timeout: Nanos,
    ) -> io::Result<()> {
        if got > 0 {
            self.last_data = Some(now);
        }
        let flowing = self
            .last_data
            .is_some_and(|t| now.saturating_sub(t) < FLOWING);
        if flowing && self.nap > 0 {
            std::thread::sleep(std::time::Duration::from_nanos(self.nap.min(timeout)));
            return Ok(());
        }
        readable(sock, timeout).map(drop)
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
