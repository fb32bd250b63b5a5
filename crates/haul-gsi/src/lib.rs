//! GSI, the Grid Security Infrastructure as GridFTP speaks it (`gsiftp://`): X.509 proxy
//! certificates (RFC 3820 and the older Globus forms) validated against a trust directory
//! (`trust`, `chain`, `policy`), grid-mapfiles (`gridmap`), credentials found as the Globus
//! tools find them (`cred`), the GSSAPI context over TLS 1.2 with Globus's delegation exchange
//! (`context`, `delegation`, `tls`) and RFC 2228's protection of control commands and replies
//! (`ftp`). Everything here is sans-IO except reading credential and trust files: tokens in,
//! tokens out.

pub mod chain;
pub mod context;
pub mod cred;
pub mod delegation;
pub mod der;
pub mod ftp;
pub mod gridmap;
pub mod name;
pub mod policy;
pub mod proxy;
pub mod tls;
pub mod trust;

pub use chain::{ChainError, Peer};
pub use context::{Context, ContextError, Role, Step};
pub use cred::{CredError, Credential};
pub use gridmap::{Gridmap, GridmapError};
pub use tls::PeerPolicy;
pub use trust::{TrustError, TrustStore};
