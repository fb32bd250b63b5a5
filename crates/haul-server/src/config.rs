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
    /// A session idle this long gets `421` and is closed; also bounds data-channel stalls.
    pub idle_timeout: Duration,
    /// Interval of 111/112 markers while receiving.
    pub marker_interval: Duration,
    /// MODE E block size this server sends.
    pub block_size: usize,
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
            max_sessions: 64,
            idle_timeout: Duration::from_secs(300),
            marker_interval: Duration::from_secs(1),
            block_size: 256 * 1024,
        }
    }
}
