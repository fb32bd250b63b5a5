//! What a server tells about each transfer it served, for the history that throughput
//! predictions are built from (002 §2.3: passive measurements, nothing probed). The server
//! calls a [`TransferLog`] the configuration gives (`haul serve` writes to the history store);
//! it never waits for it.

use std::net::{IpAddr, SocketAddr};
use std::time::SystemTime;

pub use haul_proto::btc::{Direction, PeerPrediction, RegistryReply};

/// One transfer a server served.
#[derive(Debug, Clone)]
pub struct ServedTransfer {
    /// When the transfer command arrived.
    pub started: SystemTime,
    /// Seconds from the transfer command to its end (data connections set up included, as
    /// the thesis measures BTC).
    pub elapsed_s: f64,
    /// Which way the data went.
    pub direction: Direction,
    /// The path as the client named it (a nested URL for a relayed transfer).
    pub path: String,
    /// The server's control address.
    pub local: SocketAddr,
    /// The client's address.
    pub peer: IpAddr,
    /// The logged-in user.
    pub user: String,
    /// Payload bytes moved.
    pub bytes: u64,
    /// Data connections used.
    pub streams: usize,
    /// `tcp`, `udt` or `plut`.
    pub transport: &'static str,
    /// The server's end was memory (`/dev/zero`, `/dev/null`, a listing, or a relay's buffer).
    pub memory: bool,
    /// The next hop, for a relayed transfer.
    pub next_hop: Option<String>,
    /// Whether it completed; otherwise why not.
    pub outcome: Result<(), String>,
}

/// Something that happened on a server besides a transfer, for its metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerEvent {
    /// A control session was admitted.
    SessionOpened,
    /// An admitted control session ended.
    SessionClosed,
    /// A client was turned away at a limit (the limit's flag, in `snake_case`).
    Refused(&'static str),
    /// A login failed (wrong password, unknown user, anonymous not allowed).
    LoginFailed,
    /// A `CKSM` of a file was answered: from the digest computed while the file was sent or
    /// received (`read` false), or by reading `bytes` of it again.
    Checksum {
        /// The file was read again.
        read: bool,
        /// Bytes read again (0 when not).
        bytes: u64,
    },
    /// A reload (`SIGHUP`) was done, whole or not.
    Reloaded {
        /// Everything loaded.
        ok: bool,
    },
}

/// Where a server's transfer records (and its other events) go.
pub trait TransferLog: Send + Sync + std::fmt::Debug {
    /// Takes one record; must not block the session for long.
    fn record(&self, t: ServedTransfer);
    /// Takes one event; must not block (the default ignores it).
    fn event(&self, _e: ServerEvent) {}
}

/// Several logs as one: each record and event goes to every log, in order.
#[derive(Debug, Default)]
pub struct Tee(pub Vec<std::sync::Arc<dyn TransferLog>>);

impl TransferLog for Tee {
    fn record(&self, t: ServedTransfer) {
        if let Some((last, rest)) = self.0.split_last() {
            for log in rest {
                log.record(t.clone());
            }
            last.record(t);
        }
    }
    fn event(&self, e: ServerEvent) {
        for log in &self.0 {
            log.event(e);
        }
    }
}

/// Where a server's shared predictions come from (`haul serve`: its history).
pub trait Predictions: Send + Sync + std::fmt::Debug {
    /// The current predictions for every peer with fresh enough measurements.
    fn current(&self) -> Vec<PeerPrediction>;
}

/// Where an aggregating registry's cached predictions come from (`haul serve
/// --registry-gather`: what it polls from other servers), shared with `SITE BTC ALL`.
pub trait Aggregated: Send + Sync + std::fmt::Debug {
    /// Every server whose last poll answered and its predictions, aged to now.
    fn snapshot(&self) -> RegistryReply;
}
