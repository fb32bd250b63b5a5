//! The split-TCP overlay (002): `haul serve` as a relay for nested URLs
//! (`ftp://relay/ftp://origin:2811/path`). A relay is a GridFTP server on its first leg and a
//! GridFTP client on the next. Route choice gathers the servers' shared predictions
//! (`gather`), optionally from an aggregating registry (`registry`).

pub mod allow;
pub mod nested;

pub use allow::{AllowList, NotAllowed};
pub use nested::{nested, redact, NestedError, NextHop};

mod ask;
pub mod gather;
mod hop;
pub mod registry;
pub mod relay;
pub mod route;

pub use relay::{Credential, LegParams, Relay, RelayConfig, RelayError};
