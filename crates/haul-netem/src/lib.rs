//! Userspace WAN link emulator between network namespaces.
//!
//! Hosts are network namespaces; each link is a pair of TUN devices (one per host side) joined by
//! a forwarder that applies the pure link models of [`model`] per direction: delay, jitter, rate
//! with serialization delay, a drop-tail queue, loss models, reordering, duplication and Pareto
//! on/off cross traffic. [`Testbed`] sets a [`Topology`] up and tears it down; the `haul netem`
//! command keeps one running in a background daemon reachable through a control socket.

pub mod daemon;
pub mod error;
pub mod forward;
pub mod gso;
pub mod model;
pub mod netns;
pub mod params;
pub mod testbed;
pub mod topology;
pub mod tun;
pub mod units;

pub use error::{Error, Result};
pub use params::{CrossTraffic, DirParams, DirPatch, LossModel, QueueLimit};
pub use testbed::{DirReport, LinkReport, Options, Testbed, DEFAULT_PREFIX};
pub use topology::{Dir, LinkSpec, Topology};
