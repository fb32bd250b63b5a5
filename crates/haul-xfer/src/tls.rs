//! Client-side TLS for `haul://` URLs (RFC 4217: AUTH TLS on control, PROT P on data; the
//! client is always the TLS client, whoever opened the TCP connection). The TLS plumbing itself
//! lives in `haul_transport::tls`.

use std::io;
use std::net::TcpStream;
use std::path::Path;
use std::sync::Arc;

use haul_transport::{tls, Conn};

/// Client TLS settings: the roots that server certificates must chain to.
#[derive(Clone)]
pub struct ClientTls {
    config: Arc<rustls::ClientConfig>,
}

impl std::fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClientTls")
    }
}

impl ClientTls {
    /// Trusts the certificates in the PEM file `ca` (a private CA or a self-signed server cert).
    pub fn from_ca_file(ca: &Path) -> io::Result<ClientTls> {
        let config = tls::client_config(ca)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
        Ok(ClientTls { config })
    }

    /// Upgrades the control connection after `234`.
    pub fn wrap_control(&self, tcp: TcpStream, host: &str) -> io::Result<Conn> {
        self.wrap_data(tcp, host)
    }

    /// Wraps a data connection (either direction) under PROT P.
    pub fn wrap_data(&self, tcp: TcpStream, host: &str) -> io::Result<Conn> {
        Ok(Box::new(tls::connect(self.config.clone(), host, tcp)?))
    }
}
