//! Client-side TLS for `haul://` URLs (RFC 4217: AUTH TLS on control, PROT P on data; the
//! client is always the TLS client, whoever opened the TCP connection).

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::Arc;

use haul_transport::{Conn, DataStream};
use rustls::pki_types::ServerName;

/// A TLS stream as a data / control connection.
pub struct TlsConn(rustls::StreamOwned<rustls::ClientConnection, TcpStream>);

impl Read for TlsConn {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(buf)
    }
}

impl Write for TlsConn {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

impl DataStream for TlsConn {
    fn shutdown_write(&mut self) -> io::Result<()> {
        self.0.conn.send_close_notify();
        self.0.flush()?;
        self.0.sock.shutdown(std::net::Shutdown::Write)
    }
}

/// Client TLS settings: the roots that server certificates must chain to.
#[derive(Clone, Debug)]
pub struct ClientTls {
    config: Arc<rustls::ClientConfig>,
}

impl ClientTls {
    /// Trusts the certificates in the PEM file `ca` (a private CA or a self-signed server cert).
    pub fn from_ca_file(ca: &Path) -> io::Result<ClientTls> {
        let pem = std::fs::read(ca).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", ca.display())))?;
        let mut roots = rustls::RootCertStore::empty();
        for c in rustls_pemfile::certs(&mut pem.as_slice()) {
            let c = c.map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("{}: {e}", ca.display())))?;
            roots.add(c).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("{}: {e}", ca.display())))?;
        }
        if roots.is_empty() {
            return Err(io::Error::new(io::ErrorKind::InvalidData, format!("{}: no certificates", ca.display())));
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(io::Error::other)?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(ClientTls { config: Arc::new(config) })
    }

    fn wrap(&self, tcp: TcpStream, host: &str) -> io::Result<TlsConn> {
        let name = ServerName::try_from(host.to_string())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("server name {host:?}: {e}")))?;
        let conn = rustls::ClientConnection::new(self.config.clone(), name).map_err(io::Error::other)?;
        let mut s = rustls::StreamOwned::new(conn, tcp);
        while s.conn.is_handshaking() {
            s.conn.complete_io(&mut s.sock)?;
        }
        Ok(TlsConn(s))
    }

    /// Upgrades the control connection after `234`.
    pub fn wrap_control(&self, tcp: TcpStream, host: &str) -> io::Result<Conn> {
        Ok(Box::new(self.wrap(tcp, host)?))
    }

    /// Wraps a data connection (either direction) under PROT P.
    pub fn wrap_data(&self, tcp: TcpStream, host: &str) -> io::Result<Conn> {
        Ok(Box::new(self.wrap(tcp, host)?))
    }
}
