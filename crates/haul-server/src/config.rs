//! Server configuration: the served root, who may log in, TLS, and the bounds on sessions.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Everything a [`crate::Server`] needs to start.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Directory served as `/`.
    pub root: PathBuf,
    /// Control-channel listen address (port 0 picks one).
    pub listen: SocketAddr,
    /// Allow `anonymous` / `ftp` logins.
    pub anonymous: bool,
    /// Let anonymous users write (they are read-only otherwise).
    pub anonymous_write: bool,
    /// Password file: lines `name:$argon2id$...:rw|ro`.
    pub users: Option<PathBuf>,
    /// PEM certificate chain and key enabling AUTH TLS.
    pub tls: Option<(PathBuf, PathBuf)>,
    /// Most concurrent control sessions; more get `421` and are closed.
    pub max_sessions: usize,
    /// Most concurrent control sessions from one client address.
    pub max_sessions_per_ip: usize,
    /// Most concurrent logged-in sessions of one named user.
    pub max_sessions_per_user: usize,
    /// Time from connecting to a completed login; then `421` and close.
    pub login_timeout: Duration,
    /// GSI (`gsiftp://`): where the host credential, CAs and grid-mapfile are; None: not offered.
    pub gsi: Option<crate::gsi::GsiSettings>,
    /// Refuse logins before `AUTH TLS` and data connections without `PROT P`.
    pub require_tls: bool,
    /// A session idle this long gets `421` and is closed.
    pub idle_timeout: Duration,
    /// A data phase in which no byte moves for this long (waiting for a data connection
    /// included) ends with `426`.
    pub data_timeout: Duration,
    /// Most data connections one transfer may open or accept (`OPTS RETR Parallelism`, `SPOR`
    /// addresses, passive connections).
    pub max_parallelism: usize,
    /// Interval of 111/112 markers while receiving.
    pub marker_interval: Duration,
    /// MODE E block size this server sends.
    pub block_size: usize,
    /// Send plain files' pages to plain TCP data connections with `sendfile` (`haul serve
    /// --sendfile`). Off by default: on loopback it cut the server's CPU per GiB by a fifth but
    /// raised the receiving client's by more (docs/benchmarks.md, issue 23).
    pub sendfile: bool,
    /// Write large new uploads to local disks around the page cache (`O_DIRECT`) when the
    /// client announced their size with `ALLO` and pipelined a `CKSM XXHC` behind the `STOR`,
    /// so nothing reads them back (on by default; `haul serve --no-direct-io` turns it off).
    pub direct_io: bool,
    /// What carries out commands on nested URLs (`ftp://relay/ftp://origin/path`); without
    /// one, such commands are refused (`haul serve --relay-allow` gives one).
    pub relay: Option<std::sync::Arc<dyn crate::relay::Relay>>,
    /// Where each served transfer is recorded (`haul serve` writes the history store).
    pub journal: Option<std::sync::Arc<dyn crate::journal::TransferLog>>,
    /// The throughput predictions it shares with `SITE BTC` (none: the command is refused).
    pub predictions: Option<std::sync::Arc<dyn crate::journal::Predictions>>,
    /// The other servers' predictions it caches and shares with `SITE BTC ALL` (none: that
    /// request is refused and FEAT has no `BTCREG`).
    pub registry: Option<std::sync::Arc<dyn crate::journal::Aggregated>>,
    /// The depth and size bounds of one `MLSR` listing.
    pub mlsr_limits: crate::listing::TreeLimits,
    /// Ports passive data listeners (TCP, UDT and PLUT) are bound in, inclusive, for a
    /// firewall to open (`haul serve --data-ports`); none: any port the kernel gives.
    pub data_ports: Option<(u16, u16)>,
    /// What else a reload (`SIGHUP`) loads again, beyond the users file and TLS material.
    pub reloaders: Vec<std::sync::Arc<dyn crate::ops::Reload>>,
}

impl ServerConfig {
    /// A configuration serving `root` on 127.0.0.1:2811 with the default limits.
    pub fn new(root: impl Into<PathBuf>) -> ServerConfig {
        ServerConfig {
            root: root.into(),
            listen: SocketAddr::from(([127, 0, 0, 1], 2811)),
            anonymous: false,
            anonymous_write: false,
            users: None,
            tls: None,
            gsi: None,
            max_sessions: 64,
            max_sessions_per_ip: 48,
            max_sessions_per_user: 48,
            login_timeout: Duration::from_secs(30),
            require_tls: false,
            idle_timeout: Duration::from_secs(300),
            data_timeout: Duration::from_secs(60),
            max_parallelism: 64,
            marker_interval: Duration::from_secs(1),
            block_size: 256 * 1024,
            sendfile: false,
            direct_io: true,
            relay: None,
            journal: None,
            predictions: None,
            registry: None,
            mlsr_limits: Default::default(),
            data_ports: None,
            reloaders: Vec::new(),
        }
    }
}
