//! The hook through which `haul serve` relays (002's split-DSI): a command whose path is a
//! nested URL (`RETR /ftp://origin:2811/data/f`) is carried out on the next hop by the
//! [`Relay`] in the server's configuration (haul-overlay implements it). The server keeps its
//! own side: who may relay, the client's data channels, the reply sequence, and the
//! [`Pump`] between the two legs. Without a relay, nested paths are refused.

use std::fmt::Debug;

use haul_proto::command::Restart;
use haul_proto::server::ListKind;
use haul_proto::Reply;
use haul_transport::mode_e::Progress;
use haul_transport::pump::Pump;

pub use haul_proto::nested::is_nested;

/// Who asks to relay.
#[derive(Debug, Clone)]
pub struct RelayUser {
    /// The login name (`anonymous` for anonymous users).
    pub name: String,
    /// An anonymous login.
    pub anonymous: bool,
    /// The users file (or, for anonymous users, `--relay-anonymous`) lets it relay.
    pub may_relay: bool,
    /// The client's address.
    pub peer: std::net::IpAddr,
    /// Under GSI, the credential the client delegated, with which the relay acts for it on a
    /// `gsiftp://` next hop, and the server's trust to check that hop with.
    pub gsi: Option<DelegatedGsi>,
}

/// A GSI client's delegated credential, lent to the relay for the client's next hops.
#[derive(Clone)]
pub struct DelegatedGsi {
    /// The delegated proxy, the client's chain and the proxy's key.
    pub credential: haul_gsi::Credential,
    /// The server's CAs and proxy rules (for the next hop's host certificate).
    pub policy: haul_gsi::PeerPolicy,
}

impl Debug for DelegatedGsi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DelegatedGsi { .. }")
    }
}

/// One file a relay fetches from its next hop.
#[derive(Debug, Clone)]
pub struct FileFetch {
    /// The path on the next hop.
    pub path: String,
    /// A partial read (`ERET P <offset> <length>`).
    pub eret: Option<(u64, u64)>,
    /// What the client already holds (`REST`).
    pub restart: Option<Restart>,
    /// The client's leg is MODE S, so the bytes must arrive in order: the next leg is MODE S
    /// too (one connection), which tells a next relay the same.
    pub in_order: bool,
    /// The next leg's settings the client asked for (`OPTS RELAY`).
    pub leg: haul_proto::nested::NextLeg,
}

/// One file a relay stores on its next hop.
#[derive(Debug, Clone)]
pub struct FileStore {
    /// The path on the next hop.
    pub path: String,
    /// What the next hop already holds (`REST`).
    pub restart: Option<Restart>,
    /// The size the client announced (`ALLO`), passed on to the next hop.
    pub allocate: Option<u64>,
    /// The next leg's settings the client asked for (`OPTS RELAY`).
    pub leg: haul_proto::nested::NextLeg,
}

/// The next hop of a relay session: a logged-in GridFTP client session, kept for the
/// session's later commands on the same hop.
pub trait Hop: Send {
    /// The next hop as logs and replies name it (`ftp://origin:2811`, never a password).
    fn name(&self) -> String;

    /// The FEAT reply of the server at the end of `inner` (the next hop's own, or, when
    /// `inner` is nested again, what the next relay answers for the rest of the chain).
    fn feat(&mut self, inner: &str) -> Reply;

    /// Whether this session can carry a command for the next hop `key` identifies (the relay's
    /// own notion of the same scheme, user, host and port), and is still usable.
    fn reusable_for(&self, key: &str) -> bool;

    /// Carries out a command without data (SIZE, MDTM, MLST, CKSM, MKD, RMD, DELE, whose path
    /// is the next hop's) and gives the reply to pass back.
    fn command(&mut self, cmd: &haul_proto::Command) -> Reply;

    /// A listing's bytes from the next hop.
    fn listing(&mut self, path: Option<&str>, kind: ListKind) -> Result<Vec<u8>, Reply>;

    /// Fetches `f` into `pump`, counting bytes in `progress`; `started` is called once the
    /// next hop opened its data phase, before any byte. Err: the reply for the client.
    fn fetch(
        &mut self,
        f: &FileFetch,
        pump: &Pump,
        progress: &Progress,
        started: &(dyn Fn() + Sync),
    ) -> Result<(), Reply>;

    /// Stores what `pump` delivers as `s`; `started` is called once the next hop opened its
    /// data phase. Err: the reply for the client.
    fn store(
        &mut self,
        s: &FileStore,
        pump: &Pump,
        started: &(dyn Fn() + Sync),
    ) -> Result<(), Reply>;
}

/// A pump with its share of the relay's buffer memory, given back when dropped.
pub struct PumpGrant {
    /// The pump.
    pub pump: Pump,
    release: Option<Box<dyn FnOnce() + Send + Sync>>,
}

impl PumpGrant {
    /// A pump whose memory `release` gives back.
    pub fn new(pump: Pump, release: Box<dyn FnOnce() + Send + Sync>) -> PumpGrant {
        PumpGrant {
            pump,
            release: Some(release),
        }
    }
}

impl Drop for PumpGrant {
    fn drop(&mut self) {
        if let Some(r) = self.release.take() {
            r();
        }
    }
}

/// What carries out commands on nested URLs (002's split-DSI).
pub trait Relay: Send + Sync + Debug {
    /// Whether anonymous users may relay (`--relay-anonymous`).
    fn anonymous_may_relay(&self) -> bool;

    /// The next hop `path` names, opened for `user` (or `cached` again, when it is the same
    /// hop), and the path on it. Err: the refusal for the client (relaying not allowed, a next
    /// hop off the allow-list, too many relay sessions, the next hop unreachable).
    fn open(
        &self,
        user: &RelayUser,
        path: &str,
        cached: Option<Box<dyn Hop>>,
    ) -> Result<(Box<dyn Hop>, String), Reply>;

    /// A pump for one transfer, within the relay's buffer memory. Err: the refusal.
    fn pump(&self) -> Result<PumpGrant, Reply>;
}
