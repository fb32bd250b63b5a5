//! The receiving batch: `recvmmsg` into preallocated buffers, with the kernel's receive time
//! of each message (`SO_TIMESTAMPNS`) and, where the kernel offers UDP GRO
//! (`setsockopt(SOL_UDP, UDP_GRO)`), runs of datagrams of one flow coalesced into one message
//! whose `UDP_GRO` control message gives the segment size; the batch splits them back into
//! the datagrams the sender sent (all of the segment size but possibly the last). Callers see
//! datagrams, indexed `0..n`, whichever way they came. Nothing here allocates after
//! construction.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;

use super::batch::from_storage;
use crate::socket::set_int;

/// `SO_TIMESTAMPNS` (`SO_TIMESTAMPNS_OLD`, a 64-bit `timespec` on these targets); the `libc`
/// crate does not export it for Linux.
#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
const SO_TIMESTAMPNS: libc::c_int = 35;

/// Control-message space per message: `SCM_TIMESTAMPNS` (32 bytes) and `UDP_GRO` (24 bytes),
/// with room to spare.
const CTRL_LEN: usize = 128;
/// Buffer of one message when GRO is on: the largest UDP payload.
const GRO_BUFFER: usize = 65_536;
/// Most datagrams one GRO message may hold (the kernel coalesces at most 64).
const GRO_MAX_SEGMENTS: usize = 64;

/// One datagram of the last receive: where it lies in `data`, its length, its message.
#[derive(Clone, Copy, Default)]
struct Seg {
    start: usize,
    len: usize,
    msg: usize,
}

/// `count` message buffers with the `mmsghdr` array that points into them.
pub(super) struct RecvBatch {
    data: Vec<u8>,
    /// Bytes of one message buffer.
    size: usize,
    iov: Vec<libc::iovec>,
    hdr: Vec<libc::mmsghdr>,
    addr: Vec<libc::sockaddr_storage>,
    /// Control-message buffers (8-byte aligned).
    ctrl: Vec<u64>,
    /// Kernel receive time of each message, CLOCK_REALTIME nanoseconds.
    stamps: Vec<Option<u64>>,
    segs: Vec<Seg>,
    /// Datagrams of the last receive.
    count: usize,
    /// Whether the last receive filled every message buffer (more may be waiting).
    full: bool,
    timestamps: bool,
    gro: bool,
}

// SAFETY: the raw pointers in `iov` / `hdr` point into this struct's own heap buffers and are
// rebuilt before every system call; a `RecvBatch` is used by one thread at a time.
unsafe impl Send for RecvBatch {}

impl RecvBatch {
    /// Buffers for `count` messages on `sock`: datagrams of up to `mds` bytes each or, when
    /// `gro` is asked for and the kernel turns it on, coalesced runs of up to 64 KiB each.
    pub(super) fn new(sock: &UdpSocket, mds: usize, count: usize, gro: bool) -> RecvBatch {
        let count = count.max(1);
        let gro = gro && set_int(sock, libc::SOL_UDP, libc::UDP_GRO, 1).is_ok();
        let size = if gro { GRO_BUFFER } else { mds.max(1) };
        let per = if gro { GRO_MAX_SEGMENTS } else { 1 };
        // SAFETY: all-zero is a valid iovec (null base, zero length).
        let zero_iov: libc::iovec = unsafe { std::mem::zeroed() };
        // SAFETY: all-zero is a valid mmsghdr (null pointers, zero lengths).
        let zero_hdr: libc::mmsghdr = unsafe { std::mem::zeroed() };
        // SAFETY: all-zero is a valid sockaddr_storage (AF_UNSPEC).
        let zero_addr: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        RecvBatch {
            data: vec![0; size * count],
            size,
            iov: vec![zero_iov; count],
            hdr: vec![zero_hdr; count],
            addr: vec![zero_addr; count],
            ctrl: vec![0; count * CTRL_LEN / 8],
            stamps: vec![None; count],
            segs: vec![Seg::default(); count * per],
            count: 0,
            full: false,
            timestamps: false,
            gro,
        }
    }

    /// Asks the kernel for each datagram's receive time (`SO_TIMESTAMPNS`); see
    /// [`RecvBatch::stamp`]. False where unsupported (the batch then reports none).
    pub(super) fn enable_timestamps(&mut self, sock: &UdpSocket) -> bool {
        #[cfg(all(
            target_os = "linux",
            any(target_arch = "x86_64", target_arch = "aarch64")
        ))]
        {
            self.timestamps = set_int(sock, libc::SOL_SOCKET, SO_TIMESTAMPNS, 1).is_ok();
        }
        let _ = sock;
        self.timestamps
    }

    /// Whether coalesced receives (GRO) are on.
    pub(super) fn gro(&self) -> bool {
        self.gro
    }

    /// Whether the last receive filled every buffer, so more datagrams may be waiting.
    pub(super) fn full(&self) -> bool {
        self.full
    }

    /// Messages of the last receive that held more than one datagram.
    #[cfg(test)]
    pub(super) fn coalesced(&self) -> usize {
        let segs = &self.segs[..self.count];
        segs.windows(2)
            .filter(|w| w[0].msg == w[1].msg)
            .map(|w| w[0].msg)
            .collect::<std::collections::BTreeSet<_>>()
            .len()
    }

    /// The kernel's receive time of datagram `i` of the last `recv`, CLOCK_REALTIME ns.
    pub(super) fn stamp(&self, i: usize) -> Option<u64> {
        self.stamps[self.segs[i].msg]
    }

    /// Datagram `i` of the last `recv`.
    pub(super) fn get(&self, i: usize) -> &[u8] {
        let s = self.segs[i];
        &self.data[s.start..s.start + s.len]
    }

    /// The source address of datagram `i` of the last `recv`.
    pub(super) fn source(&self, i: usize) -> Option<SocketAddr> {
        from_storage(&self.addr[self.segs[i].msg])
    }

    fn prepare(&mut self) {
        for i in 0..self.hdr.len() {
            self.iov[i] = libc::iovec {
                iov_base: self.data[i * self.size..].as_mut_ptr().cast(),
                iov_len: self.size,
            };
            // SAFETY: a zeroed msghdr is valid; its fields are then set to our own buffers.
            let mut m: libc::msghdr = unsafe { std::mem::zeroed() };
            m.msg_iov = &mut self.iov[i];
            m.msg_iovlen = 1;
            m.msg_name = (&mut self.addr[i] as *mut libc::sockaddr_storage).cast();
            m.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            if self.timestamps || self.gro {
                m.msg_control = self.ctrl[i * CTRL_LEN / 8..].as_mut_ptr().cast();
                m.msg_controllen = CTRL_LEN as _;
            }
            self.hdr[i] = libc::mmsghdr {
                msg_hdr: m,
                msg_len: 0,
            };
        }
    }

    /// Receives what is waiting, up to a batch, without blocking; returns how many datagrams
    /// arrived (a coalesced message counts as the datagrams it holds).
    pub(super) fn recv(&mut self, sock: &UdpSocket) -> io::Result<usize> {
        let n = self.hdr.len();
        self.prepare();
        self.count = 0;
        self.full = false;
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
                self.full = got == n;
                for m in 0..got {
                    self.split(m);
                }
                return Ok(self.count);
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

    /// Records message `m`'s datagrams: one, or its coalesced segments.
    fn split(&mut self, m: usize) {
        if self.count == self.segs.len() {
            return;
        }
        let len = (self.hdr[m].msg_len as usize).min(self.size);
        let (stamp, segment) = control(&self.hdr[m].msg_hdr);
        self.stamps[m] = if self.timestamps { stamp } else { None };
        let seg = match segment {
            Some(s) if s > 0 && self.gro => s,
            _ => len.max(1),
        };
        let mut at = 0;
        loop {
            let take = seg.min(len - at);
            self.segs[self.count] = Seg {
                start: m * self.size + at,
                len: take,
                msg: m,
            };
            self.count += 1;
            at += take;
            if at >= len || self.count == self.segs.len() {
                break;
            }
        }
    }
}

/// The receive time (`SCM_TIMESTAMPNS`, CLOCK_REALTIME ns) and GRO segment size (`UDP_GRO`)
/// of a received message, where present.
#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
fn control(m: &libc::msghdr) -> (Option<u64>, Option<usize>) {
    let (mut stamp, mut segment) = (None, None);
    if m.msg_control.is_null() {
        return (stamp, segment);
    }
    // SAFETY: `m` was filled by recvmmsg with msg_control pointing at this batch's buffer and
    // msg_controllen set to the bytes the kernel wrote; the CMSG macros stay inside it, and
    // the data of each message read is the type its level and type say (read unaligned).
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(m);
        while !c.is_null() {
            match ((*c).cmsg_level, (*c).cmsg_type) {
                (libc::SOL_SOCKET, SO_TIMESTAMPNS) => {
                    let ts: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                    stamp = Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64);
                }
                (libc::SOL_UDP, libc::UDP_GRO) => {
                    let s: libc::c_int = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                    segment = usize::try_from(s).ok();
                }
                _ => {}
            }
            c = libc::CMSG_NXTHDR(m, c);
        }
    }
    (stamp, segment)
}

#[cfg(not(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
)))]
fn control(_: &libc::msghdr) -> (Option<u64>, Option<usize>) {
    (None, None)
}
