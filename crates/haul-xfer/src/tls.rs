//! Client-side security of control and data connections: TLS for `haul://` URLs (RFC 4217:
//! AUTH TLS on control, PROT P on data; the client is always the TLS client, whoever opened
//! the TCP connection) and GSI for `gsiftp://` URLs ([`crate::gsi`]). The TLS plumbing itself
//! lives in `haul_transport::tls`.

use std::io;
use std::net::TcpStream;
use std::path::Path;
use std::sync::Arc;

use haul_transport::{tls, Conn};

use crate::gsi::ClientGsi;
use crate::url::RemoteUrl;

/// What secures a command's sessions: the roots that `haul://` servers' certificates must
/// chain to, and the user's GSI credential for `gsiftp://` servers. A session keeps the part
/// its URL calls for ([`ClientTls::for_url`]).
#[derive(Clone, Default)]
pub struct ClientTls {
    config: Option<Arc<rustls::ClientConfig>>,
    gsi: Option<Arc<ClientGsi>>,
}

impl std::fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientTls")
            .field("tls", &self.config.is_some())
            .field("gsi", &self.gsi)
            .finish()
    }
}

impl ClientTls {
    /// Trusts the certificates in the PEM file `ca` (a private CA or a self-signed server cert).
    pub fn from_ca_file(ca: &Path) -> io::Result<ClientTls> {
        let config = tls::client_config(ca)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
        Ok(ClientTls {
            config: Some(config),
            gsi: None,
        })
    }

    /// Adds the GSI credential `gsiftp://` sessions use.
    pub fn with_gsi(mut self, gsi: ClientGsi) -> ClientTls {
        self.gsi = Some(Arc::new(gsi));
        self
    }

    /// The part a session with `url` uses: GSI for `gsiftp://`, else TLS when there is a
    /// configuration for it; None when the session runs in clear.
    pub fn for_url(&self, url: &RemoteUrl) -> Option<ClientTls> {
        let keep = if url.gsi {
            ClientTls {
                config: None,
                gsi: self.gsi.clone(),
            }
        } else {
            ClientTls {
                config: self.config.clone(),
                gsi: None,
            }
        };
        (keep.config.is_some() || keep.gsi.is_some()).then_some(keep)
    }

    /// The GSI credential, for `gsiftp://` sessions.
    pub fn gsi(&self) -> Option<&ClientGsi> {
        self.gsi.as_deref()
    }

    /// True when this secures a control connection with `AUTH TLS`.
    pub fn is_tls(&self) -> bool {
        self.config.is_some()
    }

    /// Upgrades the control connection after `234`.
    pub fn wrap_control(&self, tcp: TcpStream, host: &str) -> io::Result<Conn> {
        let config = self
            .config
            .clone()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no TLS configuration"))?;
        Ok(Box::new(tls::connect(config, host, tcp)?))
    }

    /// Secures a data connection (either direction): under GSI the `DCAU` handshake, where
    /// `accepted` says this side accepted the connection (nothing under `DCAU N`); else TLS
    /// under `PROT P`.
    pub fn wrap_data(&self, tcp: TcpStream, host: &str, accepted: bool) -> io::Result<Conn> {
        match &self.gsi {
            Some(g) if !g.authenticates_data() => Ok(Box::new(tcp)),
            Some(g) => g.data().handshake(tcp, accepted),
            None => self.wrap_control(tcp, host),
        }
    }
}
