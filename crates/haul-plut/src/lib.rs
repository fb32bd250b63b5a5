//! PLUT (Peak Link Utilization Transport, `004-plut-transport.txt`) as a sans-IO protocol core:
//! a [`Sender`] and a [`Receiver`] state machine that take datagrams and timer ticks, with the
//! time passed in, and say what to send and when to wake up. No sockets or clocks inside, so a
//! transfer runs deterministically over a simulated network in tests and over UDP in haul.
//!
//! - [`wire`]: datagram format (DATA and the NXT/RXM/TNT/TMO acknowledgements), checked parser.
//! - [`config`]: every tunable, with the values haul chose where the paper is silent.
//! - [`control`]: pure controllers — Robbins–Monro source rate (Eqs. 1–3), SPSA ACK interval
//!   (Eqs. 4–5), and Tsunami/ARET for comparison.
//! - [`buffer`]: the sender's three-tier dynamic queuing buffer (DQ, OP, RP) with heap fallback.
//! - [`checklist`]: the receiver's check list and in-order (reordering) writer.
//! - [`sender`], [`receiver`]: the two state machines; [`stats`]: their counters and verdicts.

pub mod buffer;
pub mod checklist;
pub mod config;
pub mod control;
pub mod receiver;
mod rtt;
pub mod sender;
mod sendlog;
pub mod stats;
pub mod wire;

pub use config::{Config, ConfigError};
pub use control::{RateControl, RateController};
pub use receiver::Receiver;
pub use sender::Sender;
pub use stats::{DropReason, ReceiverStats, SenderStats, Verdict};
pub use wire::{AckKind, Datagram, WireError};

use std::io;

/// Time in nanoseconds since an arbitrary epoch chosen by the IO layer (or the simulator).
pub type Nanos = u64;

/// Nanoseconds per second.
pub const SECOND: Nanos = 1_000_000_000;

/// Where the sender reads file bytes from (the same shape as `haul_transport::io::Source`).
pub trait Source {
    /// Fills `buf` from `offset`; returns the bytes read (0 at end of data).
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;
}

/// Where the receiver's in-order writer puts file bytes; offsets arrive strictly in order.
pub trait Sink {
    /// Writes all of `buf` at `offset`.
    fn write_at(&mut self, buf: &[u8], offset: u64) -> io::Result<()>;
}

impl Source for [u8] {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let start = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(self.len());
        let n = buf.len().min(self.len() - start);
        buf[..n].copy_from_slice(&self[start..start + n]);
        Ok(n)
    }
}

impl Sink for Vec<u8> {
    fn write_at(&mut self, buf: &[u8], offset: u64) -> io::Result<()> {
        if offset != self.len() as u64 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "in-order sink at {} got a write at offset {offset}",
                    self.len()
                ),
            ));
        }
        self.extend_from_slice(buf);
        Ok(())
    }
}
