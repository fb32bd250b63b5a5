//! Pure link models driven by (packet, now): no IO, no clocks, seeded RNGs.
//! Time is nanoseconds on an arbitrary monotonic origin.

pub mod cross;
pub mod link;
pub mod loss;

pub use link::{DirModel, DirStats, DropCause, Verdict};

/// Nanoseconds per second.
pub const NS: f64 = 1e9;

/// Converts seconds to nanoseconds (saturating, never negative).
pub fn ns(secs: f64) -> u64 {
    (secs * NS).max(0.0).round() as u64
}
