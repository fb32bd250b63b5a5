//! GridFTP server (`haul serve`): RFC 959 control channel with the RFC 2389/3659/4217
//! extensions and the GFD.020 GridFTP dialect (MODE E, parallel streams, SPAS/SPOR, ERET/ESTO,
//! SBUF, CKSM, restart and performance markers), serving one directory tree confined to its
//! root. Blocking, one thread per control session; the data path uses `haul-transport`.
//!
//! - [`config`]: what a server serves and its limits.
//! - [`server`]: the accept loop, session limit and the in-process handle.
//! - [`auth`]: anonymous and password (argon2) logins.
//! - `vfs`: the root-relative file layer (`openat2` beneath a root handle): every file
//!   operation of a session, `/dev/zero` and `/dev/null`.
//! - `datachan`: data-channel set-up, the peers a session may reach, the watch over a data
//!   phase.
//! - `session`: one control session, its commands routed by family to `session::login`
//!   (USER / PASS / AUTH / PBSZ / PROT / QUIT), `session::feat` (FEAT / OPTS / SITE / HELP),
//!   `session::fs` (CWD / MKD / DELE / RNFR / SIZE / MDTM / STAT ...), `session::cksm` (CKSM)
//!   and `session::data` (transfer settings and data-channel commands).
//! - `transfer`, `listing`, `control`: a session's transfers, directory listings and the
//!   (optionally TLS) control stream; `upload`: STOR / APPE / ESTO; `plut_transfer`: RETR / STOR
//!   over PLUT (UDP) once a client selected it with `OPTS HAUL Transport=plut`.
//! - [`gsi`]: GSI (`AUTH GSSAPI`, grid-mapfile logins, `DCAU` on data connections), with the
//!   GSS context moved into `control` once established.
//! - [`journal`]: the record of each served transfer (and of sessions, refusals, failed
//!   logins), for the history and the metrics.
//! - [`ops`]: operating a running server: reload (`SIGHUP`) and drain (`SIGTERM`).
//! - [`metrics`]: Prometheus metrics of a server and the bounded HTTP endpoint serving them.
//! - [`relay`]: the hook through which commands on nested URLs reach a next hop (haul-overlay
//!   implements it), driven by `session::relay`.

pub mod auth;
pub mod config;
mod control;
mod datachan;
pub mod gsi;
pub mod journal;
mod listing;
pub mod metrics;
pub mod ops;
mod plut_transfer;
pub mod relay;
pub mod server;
mod session;
mod transfer;
mod upload;
mod vfs;

pub use auth::{hash_password, Users};
pub use config::ServerConfig;
pub use ops::{Reload, Reloaded, ServerOps};
pub use server::{Server, ServerHandle};

/// A server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The root directory is missing or not a directory.
    #[error("served root {path}: {reason}")]
    Root {
        /// The configured root.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The control listener could not bind.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: std::net::SocketAddr,
        /// The IO error.
        source: std::io::Error,
    },
    /// The users file is unreadable or malformed.
    #[error(transparent)]
    Users(#[from] auth::UsersError),
    /// The TLS certificate or key could not be loaded.
    #[error(transparent)]
    Tls(#[from] haul_transport::tls::TlsError),
    /// The configuration contradicts itself.
    #[error("configuration: {0}")]
    Config(String),
    /// Other IO failure while starting.
    #[error("server: {0}")]
    Io(#[from] std::io::Error),
}
