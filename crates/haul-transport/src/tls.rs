//! TLS for control and data channels (RFC 4217) with rustls: config builders from PEM files
//! and [`DataStream`] impls for blocking TLS streams over TCP. Whoever accepted the control
//! connection is the TLS server on every data connection too, regardless of who connected
//! (RFC 4217 §9), so both a server and a client side are offered here.

use std::fs::File;
use std::io::{self, BufReader};
use std::net::TcpStream;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{
    ClientConfig, ClientConnection, RootCertStore, ServerConfig, ServerConnection, StreamOwned,
};
use thiserror::Error;

use crate::{Cutter, DataStream};

/// A TLS configuration could not be built.
#[derive(Debug, Error)]
pub enum TlsError {
    /// A PEM file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The IO error.
        source: io::Error,
    },
    /// A PEM file held nothing usable.
    #[error("{path}: {what}")]
    Pem {
        /// The file.
        path: String,
        /// What was missing or wrong.
        what: String,
    },
    /// rustls refused the configuration.
    #[error("TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
}

/// A TLS stream where this side is the TLS server.
pub type ServerStream = StreamOwned<ServerConnection, TcpStream>;
/// A TLS stream where this side is the TLS client.
pub type ClientStream = StreamOwned<ClientConnection, TcpStream>;

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn open(path: &Path) -> Result<BufReader<File>, TlsError> {
    File::open(path)
        .map(BufReader::new)
        .map_err(|source| TlsError::Read {
            path: path.display().to_string(),
            source,
        })
}

/// Reads every certificate of a PEM file.
pub fn load_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = rustls_pemfile::certs(&mut open(path)?)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| TlsError::Read {
            path: path.display().to_string(),
            source,
        })?;
    if certs.is_empty() {
        return Err(TlsError::Pem {
            path: path.display().to_string(),
            what: "no CERTIFICATE in PEM file".into(),
        });
    }
    Ok(certs)
}

/// Reads the first private key of a PEM file.
pub fn load_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    rustls_pemfile::private_key(&mut open(path)?)
        .map_err(|source| TlsError::Read {
            path: path.display().to_string(),
            source,
        })?
        .ok_or_else(|| TlsError::Pem {
            path: path.display().to_string(),
            what: "no PRIVATE KEY in PEM file".into(),
        })
}

/// A server configuration from a certificate chain and a key, both PEM.
pub fn server_config(cert: &Path, key: &Path) -> Result<Arc<ServerConfig>, TlsError> {
    let cfg = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(load_certs(cert)?, load_key(key)?)?;
    Ok(Arc::new(cfg))
}

/// A client configuration trusting the certificates of the PEM file `ca`.
pub fn client_config(ca: &Path) -> Result<Arc<ClientConfig>, TlsError> {
    let mut roots = RootCertStore::empty();
    for c in load_certs(ca)? {
        roots.add(c)?;
    }
    let cfg = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(cfg))
}

/// Runs the server side of a TLS handshake on `tcp`.
pub fn accept(cfg: Arc<ServerConfig>, mut tcp: TcpStream) -> io::Result<ServerStream> {
    let mut conn = ServerConnection::new(cfg).map_err(io::Error::other)?;
    while conn.is_handshaking() {
        conn.complete_io(&mut tcp)
            .map_err(|e| io::Error::new(e.kind(), format!("TLS handshake: {e}")))?;
    }
    Ok(StreamOwned::new(conn, tcp))
}

/// Runs the client side of a TLS handshake on `tcp`, checking the server is `name`.
pub fn connect(cfg: Arc<ClientConfig>, name: &str, mut tcp: TcpStream) -> io::Result<ClientStream> {
    let server = ServerName::try_from(name.to_string()).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("TLS server name {name:?}: {e}"),
        )
    })?;
    let mut conn = ClientConnection::new(cfg, server).map_err(io::Error::other)?;
    while conn.is_handshaking() {
        conn.complete_io(&mut tcp)
            .map_err(|e| io::Error::new(e.kind(), format!("TLS handshake: {e}")))?;
    }
    Ok(StreamOwned::new(conn, tcp))
}

impl DataStream for ServerStream {
    fn shutdown_write(&mut self) -> io::Result<()> {
        self.conn.send_close_notify();
        self.conn.complete_io(&mut self.sock)?;
        self.sock.shutdown(std::net::Shutdown::Write)
    }

    fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        self.sock.set_read_timeout(t)
    }

    fn cutter(&self) -> io::Result<Cutter> {
        self.sock.try_clone().map(Cutter::Tcp)
    }
}

impl DataStream for ClientStream {
    fn shutdown_write(&mut self) -> io::Result<()> {
        self.conn.send_close_notify();
        self.conn.complete_io(&mut self.sock)?;
        self.sock.shutdown(std::net::Shutdown::Write)
    }

    fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        self.sock.set_read_timeout(t)
    }

    fn cutter(&self) -> io::Result<Cutter> {
        self.sock.try_clone().map(Cutter::Tcp)
    }
}
