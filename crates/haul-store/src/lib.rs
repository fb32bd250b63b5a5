//! SQLite history of every haul transfer.
//!
//! Every transfer (and, later, every profiler run) is one [`TransferRecord`]: endpoints,
//! parameters, bytes, duration, per-interval throughput [`Sample`]s and the [`Outcome`].
//! [`Store`] keeps them in an embedded SQLite database (WAL mode, schema versioned with
//! `PRAGMA user_version`). The schema is described in `docs/history.md`.

mod error;
mod record;
mod schema;
mod store;

pub use error::StoreError;
pub use record::{Outcome, Params, Sample, TransferRecord};
pub use store::{Filter, Store};

/// Result type of this crate.
pub type Result<T> = std::result::Result<T, StoreError>;
