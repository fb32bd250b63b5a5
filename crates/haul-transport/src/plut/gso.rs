//! The sender's DATA batch: datagrams written into preallocated slots and sent either as UDP
//! GSO super-datagrams (`UDP_SEGMENT` as a per-message control message: the kernel cuts one
//! buffer into equal datagrams, so a run of them costs one pass through the UDP and IP layers
//! and, on loopback with a GRO receiver, one socket-buffer entry) or, where the kernel refuses
//! GSO, one datagram per message with `sendmmsg`. Either way all of a batch's datagrams go in
//! one `sendmmsg` call to the socket's connected peer. Nothing here allocates after
//! construction.
//!
//! A batch holds only what the pacer released (`poll_transmit` at one instant), so a GSO send is
//! never a larger burst than the plain path would send back to back. The first refusal
//! (`EINVAL`, `EIO`, `ENOPROTOOPT`, `EOPNOTSUPP`, `EMSGSIZE`) downgrades the batch to plain
//! datagrams for good, and what was not yet sent is sent that way.

use std::io;
use std::net::UdpSocket;
use std::os::fd::AsRawFd;

/// Largest UDP payload of one super-datagram: the IPv4 total-length field less the IP and UDP
/// headers (IPv6's payload-length field allows 8 bytes more; the smaller bound serves both).
const GSO_MAX_BYTES: usize = 65_535 - 20 - 8;
/// Most segments the kernel accepts in one GSO send (`UDP_MAX_SEGMENTS`, 64 in older kernels,
/// 128 from 5.x on; the smaller serves both).
const GSO_MAX_SEGMENTS: usize = 64;
/// Super-datagrams one batch may hold.
const GSO_MESSAGES: usize = 4;
/// Control-message space of one message: a `cmsghdr` and a `u16`, 8-byte aligned.
const CTRL_WORDS: usize = 4;

/// Whether the kernel refused a GSO send for a reason the plain path does not share.
fn refused(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EINVAL | libc::EIO | libc::ENOPROTOOPT | libc::EOPNOTSUPP | libc::EMSGSIZE)
    )
}

/// Whether `sock` accepts the `UDP_SEGMENT` option at all (`ENOPROTOOPT` before Linux 4.18).
/// Setting it to 0 leaves the socket's own default off; the size goes with every send.
fn kernel_offers_gso(sock: &UdpSocket) -> bool {
    crate::socket::set_int(sock, libc::SOL_UDP, libc::UDP_SEGMENT, 0).is_ok()
}

/// Datagram slots of up to `mds` bytes and the `mmsghdr` array that sends them.
pub(super) struct SendBatch {
    data: Vec<u8>,
    mds: usize,
    lens: Vec<usize>,
    iov: Vec<libc::iovec>,
    hdr: Vec<libc::mmsghdr>,
    /// The first slot of each message of the last send, and `n` after the last one.
    first: Vec<usize>,
    ctrl: Vec<u64>,
    /// Segments per super-datagram, 0 when GSO is off.
    segments: usize,
}

// SAFETY: the raw pointers in `iov` / `hdr` point into this struct's own heap buffers and are
// rebuilt before every system call; a `SendBatch` is used by one thread at a time.
unsafe impl Send for SendBatch {}

impl SendBatch {
    /// Slots for datagrams of up to `mds` bytes on `sock`: `plain` per `sendmmsg` without GSO;
    /// with `gso` asked for and offered by the kernel, enough for [`GSO_MESSAGES`] full
    /// super-datagrams (at least `plain`).
    pub(super) fn new(sock: &UdpSocket, mds: usize, plain: usize, gso: bool) -> SendBatch {
        let mds = mds.max(1);
        let segments = if gso && kernel_offers_gso(sock) {
            (GSO_MAX_BYTES / mds).min(GSO_MAX_SEGMENTS)
        } else {
            0
        };
        // One datagram per super-datagram is no GSO at all (datagrams near 64 KiB).
        let segments = if segments > 1 { segments } else { 0 };
        let count = (segments * GSO_MESSAGES).max(plain).max(1);
        // SAFETY: all-zero is a valid iovec (null base, zero length).
        let zero_iov: libc::iovec = unsafe { std::mem::zeroed() };
        // SAFETY: all-zero is a valid mmsghdr (null pointers, zero lengths).
        let zero_hdr: libc::mmsghdr = unsafe { std::mem::zeroed() };
        SendBatch {
            data: vec![0; mds * count],
            mds,
            lens: vec![0; count],
            iov: vec![zero_iov; count],
            hdr: vec![zero_hdr; count],
            first: vec![0; count + 1],
            ctrl: vec![0; count * CTRL_WORDS],
            segments,
        }
    }

    /// Datagrams the batch holds.
    pub(super) fn capacity(&self) -> usize {
        self.lens.len()
    }

    /// Whether sends go out as GSO super-datagrams.
    pub(super) fn gso(&self) -> bool {
        self.segments > 0
    }

    /// Datagrams in one full super-datagram; 0 without GSO.
    pub(super) fn segments(&self) -> usize {
        self.segments
    }

    /// The whole buffer of slot `i`, to write a datagram into.
    pub(super) fn slot(&mut self, i: usize) -> &mut [u8] {
        &mut self.data[i * self.mds..(i + 1) * self.mds]
    }

    /// Sets the length of the datagram in slot `i`.
    pub(super) fn set_len(&mut self, i: usize, len: usize) {
        self.lens[i] = len.min(self.mds);
    }

    /// Sends datagrams `0..n` on a connected socket, as GSO super-datagrams where possible;
    /// returns the `sendmmsg` calls made.
    pub(super) fn send(&mut self, sock: &UdpSocket, n: usize) -> io::Result<u64> {
        let n = n.min(self.capacity());
        if self.gso() {
            let messages = self.prepare_gso(n);
            match self.send_messages(sock, messages) {
                Ok(calls) => return Ok(calls),
                Err((sent, e)) if refused(&e) => {
                    tracing::debug!(error = %e, "UDP GSO refused; PLUT sends plain datagrams");
                    self.segments = 0;
                    let from = self.first[sent];
                    let messages = self.prepare_plain(from, n);
                    return self.send_messages(sock, messages).map_err(|(_, e)| e);
                }
                Err((_, e)) => return Err(e),
            }
        }
        let messages = self.prepare_plain(0, n);
        self.send_messages(sock, messages).map_err(|(_, e)| e)
    }

    /// One message per datagram of slots `from..n`; returns the number of messages.
    fn prepare_plain(&mut self, from: usize, n: usize) -> usize {
        for (m, i) in (from..n).enumerate() {
            self.iov[i] = libc::iovec {
                iov_base: self.data[i * self.mds..].as_mut_ptr().cast(),
                iov_len: self.lens[i],
            };
            // SAFETY: a zeroed msghdr is valid; its iov is then set to our own buffer.
            let mut h: libc::msghdr = unsafe { std::mem::zeroed() };
            h.msg_iov = &mut self.iov[i];
            h.msg_iovlen = 1;
            self.hdr[m] = libc::mmsghdr {
                msg_hdr: h,
                msg_len: 0,
            };
            self.first[m] = i;
        }
        self.first[n - from] = n;
        n - from
    }

    /// Groups slots `0..n` into super-datagrams of equal-sized segments (a shorter one ends
    /// its group), each within the kernel's bounds; returns the number of messages.
    fn prepare_gso(&mut self, n: usize) -> usize {
        let (mut m, mut i) = (0, 0);
        while i < n {
            let (start, size) = (i, self.lens[i]);
            let mut bytes = 0;
            while i < n
                && i - start < self.segments
                && self.lens[i] <= size
                && bytes + self.lens[i] <= GSO_MAX_BYTES
            {
                bytes += self.lens[i];
                i += 1;
                if self.lens[i - 1] < size {
                    break;
                }
            }
            for k in start..i {
                self.iov[k] = libc::iovec {
                    iov_base: self.data[k * self.mds..].as_mut_ptr().cast(),
                    iov_len: self.lens[k],
                };
            }
            // SAFETY: a zeroed msghdr is valid; its iov and control are then set to our own
            // buffers.
            let mut h: libc::msghdr = unsafe { std::mem::zeroed() };
            h.msg_iov = &mut self.iov[start];
            h.msg_iovlen = i - start;
            if i - start > 1 {
                self.segment_size(&mut h, m, size);
            }
            self.hdr[m] = libc::mmsghdr {
                msg_hdr: h,
                msg_len: 0,
            };
            self.first[m] = start;
            m += 1;
        }
        self.first[m] = n;
        m
    }

    /// Points `h` at message `m`'s control buffer holding `UDP_SEGMENT` = `size`.
    fn segment_size(&mut self, h: &mut libc::msghdr, m: usize, size: usize) {
        let ctrl = &mut self.ctrl[m * CTRL_WORDS..(m + 1) * CTRL_WORDS];
        h.msg_control = ctrl.as_mut_ptr().cast();
        // SAFETY: CMSG_SPACE is a pure size computation.
        h.msg_controllen = unsafe { libc::CMSG_SPACE(size_of::<u16>() as u32) } as _;
        // SAFETY: the control buffer is CTRL_WORDS × 8 = 32 bytes, 8-byte aligned, and
        // CMSG_SPACE(2) = 24 bytes of it are declared: CMSG_FIRSTHDR is non-null and the header
        // and its two data bytes lie inside it.
        unsafe {
            let c = libc::CMSG_FIRSTHDR(h);
            (*c).cmsg_level = libc::SOL_UDP;
            (*c).cmsg_type = libc::UDP_SEGMENT;
            (*c).cmsg_len = libc::CMSG_LEN(size_of::<u16>() as u32) as _;
            std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<u16>(), size as u16);
        }
    }

    /// Sends prepared messages `0..count`, retrying on a full queue. On an error, returns how
    /// many messages had gone out with it.
    fn send_messages(&mut self, sock: &UdpSocket, count: usize) -> Result<u64, (usize, io::Error)> {
        let (mut done, mut calls) = (0, 0);
        while done < count {
            // SAFETY: hdr[done..count] were prepared above and point at live buffers of this
            // batch (slots, iovecs, control buffers).
            let r = unsafe {
                libc::sendmmsg(
                    sock.as_raw_fd(),
                    self.hdr[done..].as_mut_ptr(),
                    (count - done) as u32,
                    0,
                )
            };
            calls += 1;
            if r < 0 {
                let e = io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::EINTR) => continue,
                    // The device queue or socket buffer is full: let it drain.
                    Some(libc::ENOBUFS) | Some(libc::EAGAIN) => {
                        std::thread::sleep(std::time::Duration::from_micros(20))
                    }
                    _ => return Err((done, e)),
                }
            } else {
                done += r as usize;
            }
        }
        Ok(calls)
    }
}
