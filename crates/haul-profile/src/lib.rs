//! haul-profile: the Transport Profile Generator (TPG) and FastProf of 000 §§3–4 / 001.
//!
//! A profiler run is a client/server pair: a TCP control channel driven by the sans-IO state
//! machines in [`tpg`], and one data channel per stream opened by a [`transport::Connector`]
//! (TCP, UDP blast, UDT4, PLUT), which are `haul_transport::channel`'s, re-exported in
//! [`transport`]. [`driver`] runs the client and the server, [`report`] turns the
//! counters into per-stream averages and the aggregate throughput (Eqs. 3.1–3.2 of 000),
//! [`sweep`] walks a parameter grid into a profile table and control-response plots, and
//! [`tune`] drives `haul_tune`'s SPSA with real probes (FastProf); [`handoff`] reads a result
//! back as the settings a transfer can use.

pub mod driver;
mod error;
pub mod handoff;
pub mod params;
pub mod plot;
pub mod report;
pub mod sweep;
pub mod tpg;
pub mod transport;
pub mod tune;

pub use driver::{run_client, Server};
pub use error::ProfileError;
pub use handoff::TransferSettings;
pub use params::{NicPair, ProfileParams, TransportKind};
pub use report::{ProfileReport, StreamResult};

/// Result type of this crate.
pub type Result<T> = std::result::Result<T, ProfileError>;
