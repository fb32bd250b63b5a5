//! UDT4 data channels (Debian's `libudt-dev`, through the C++ shim in `csrc/udt_shim.cpp`):
//! [`UdtListener`] and [`UdtStream`], blocking sockets with the `std::net` shape, so that MODE E
//! and stream mode run over UDT exactly as over TCP, and the profiler measures the same sockets.
//!
//! Options ([`Options`]) must be set before bind / connect: UDT_MSS, UDT_SNDBUF / UDT_RCVBUF,
//! UDP_SNDBUF / UDP_RCVBUF, UDT_MAXBW. A build without `udt.h` keeps the same API, and every
//! constructor fails with [`unavailable`]'s error ([`AVAILABLE`] is false).

use std::io;
#[cfg(haul_udt)]
use std::time::Duration;

/// UDT socket options; `None` keeps UDT's default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Options {
    /// UDT_MSS: bytes per UDP packet, IP and UDP headers included (UDT's default is 1500).
    pub mss: Option<u32>,
    /// UDT_SNDBUF, bytes.
    pub sndbuf: Option<u64>,
    /// UDT_RCVBUF, bytes.
    pub rcvbuf: Option<u64>,
    /// UDP_SNDBUF, bytes.
    pub udp_sndbuf: Option<u64>,
    /// UDP_RCVBUF, bytes.
    pub udp_rcvbuf: Option<u64>,
    /// UDT_MAXBW, bytes per second.
    pub maxbw: Option<u64>,
}

impl Options {
    /// UDT's and UDP's buffers all set to `bytes` (a data channel's `SBUF` / `--tcp-buffer`).
    pub fn with_buffers(bytes: Option<usize>) -> Options {
        let b = bytes.map(|b| b as u64);
        Options {
            sndbuf: b,
            rcvbuf: b,
            udp_sndbuf: b,
            udp_rcvbuf: b,
            ..Options::default()
        }
    }
}

/// Transport statistics of one UDT connection (`UDT::perfmon`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Perf {
    /// Smoothed RTT, milliseconds.
    pub rtt_ms: f64,
    /// Packets retransmitted so far.
    pub retransmits: u64,
    /// Packets the receiver reported lost so far.
    pub lost: u64,
}

/// The error every UDT call returns in a build without UDT4.
pub fn unavailable() -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        "haul was built without UDT4 (install libudt-dev, which provides /usr/include/udt/udt.h, and rebuild)",
    )
}

/// A UDT timeout in the milliseconds UDT_RCVTIMEO / UDT_SNDTIMEO take (-1: wait forever).
#[cfg(haul_udt)]
fn millis(t: Option<Duration>) -> i64 {
    t.map_or(-1, |t| t.as_millis().clamp(1, i32::MAX as u128) as i64)
}

#[cfg(haul_udt)]
mod ffi;
#[cfg(haul_udt)]
pub use ffi::{Cutter, UdtListener, UdtStream};
/// Whether UDT4 was compiled in.
#[cfg(haul_udt)]
pub const AVAILABLE: bool = true;

#[cfg(not(haul_udt))]
mod missing;
#[cfg(not(haul_udt))]
pub use missing::{Cutter, UdtListener, UdtStream};
/// Whether UDT4 was compiled in.
#[cfg(not(haul_udt))]
pub const AVAILABLE: bool = false;

/// Whether UDT4 can be used in this process: compiled in, and its library (`libudt.so.0`,
/// loaded on first use) found and started; if not, why. The first call loads the library.
pub fn usable() -> io::Result<()> {
    #[cfg(haul_udt)]
    return ffi::startup();
    #[cfg(not(haul_udt))]
    return Err(unavailable());
}

#[cfg(all(test, haul_udt))]
mod tests;
