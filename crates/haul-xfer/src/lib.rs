//! The transfer engine: what to move (datasets), how (concurrency, parallelism, pipelining),
//! and proof that it arrived (checksums, restart state).

pub mod autotune;
pub mod checksum;
pub mod control;
pub mod engine;
pub mod error;
#[cfg(feature = "failpoints")]
mod failpoint;
pub mod gsi;
pub mod ledger;
pub mod listing;
pub mod path;
pub mod plan;
pub mod resume;
pub mod schedule;
pub mod session;
pub mod tls;
pub mod url;
pub mod walk;
mod worker;

pub use engine::{Options, Route, Summary, Transfer, Transport};
pub use error::{ErrorKind, XferError};
pub use path::PathEstimate;
pub use schedule::{ClusterInfo, Clustering};
pub use session::PasvAddress;
pub use url::{Endpoint, RemoteUrl};
pub use worker::{is_dev_null, is_dev_zero, DEV_NULL, DEV_ZERO};
