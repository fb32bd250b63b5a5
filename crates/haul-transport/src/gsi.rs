//! GSI on data connections (GFD.020 `DCAU`): each data connection of a `gsiftp://` session
//! starts with a GSS context, whoever connected being the initiator, and the peer must present
//! the expected identity (`DCAU A`: the session's own user, whose delegated proxy the server
//! uses; `DCAU S`: a named subject). Under `PROT C` the data then flow in clear on the same
//! socket, after the initiator's flag byte; under `PROT S` / `PROT P` the connection stays TLS
//! (Globus's "SSL-compatible" mode, no flag byte). Handshake records are read one at a time
//! with exact lengths, so not a byte of the clear data behind them is taken.
//!
//! This side accepts with OpenSSL, not rustls: Globus clients put the expected peer's common
//! name in the TLS server-name extension (`Jane Doe` under `DCAU A`), which rustls refuses as
//! an illegal host name, ending the handshake. OpenSSL ignores it, as Globus's own servers
//! do. OpenSSL only carries the TLS: the peer's chain is checked by haul-gsi, as everywhere.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;

use haul_gsi::{Context, Credential, PeerPolicy};
use openssl::pkey::PKey;
use openssl::ssl::{
    SslContext, SslContextBuilder, SslMethod, SslSessionCacheMode, SslStream, SslVerifyMode,
    SslVersion,
};
use openssl::x509::X509;
use rustls::pki_types::PrivateKeyDer;
use rustls::{ClientConfig, Connection, StreamOwned};

use crate::{Conn, Cutter, DataStream};

/// Largest TLS record accepted in a handshake (RFC 5246: 2^14 plus expansion).
const MAX_RECORD: usize = (1 << 14) + 2048;

/// Who the peer of a data connection must be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expect {
    /// This identity (one-line subject of the end-entity certificate behind any proxies).
    Identity(String),
    /// This subject: the peer's identity or its leaf's subject (`DCAU S`).
    Subject(String),
}

/// The GSI settings of a session's data connections.
#[derive(Clone)]
pub struct DataGsi {
    /// This side as acceptor (connections it accepted).
    pub acceptor: SslContext,
    /// This side as initiator (connections it opened).
    pub initiator: Arc<ClientConfig>,
    /// How peer chains are checked.
    pub policy: PeerPolicy,
    /// Who the peer must be.
    pub expect: Expect,
    /// `PROT S` or `P`: the connection stays TLS.
    pub protect: bool,
}

impl std::fmt::Debug for DataGsi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataGsi")
            .field("expect", &self.expect)
            .field("protect", &self.protect)
            .finish_non_exhaustive()
    }
}

/// Reads exactly one TLS record.
fn read_record(tcp: &mut TcpStream) -> io::Result<Vec<u8>> {
    let mut first = [0u8; 1];
    tcp.read_exact(&mut first)?;
    read_record_after(tcp, first[0])
}

/// Reads the rest of a TLS record whose first byte was `first`.
fn read_record_after(tcp: &mut TcpStream, first: u8) -> io::Result<Vec<u8>> {
    let mut head = [first, 0, 0, 0, 0];
    tcp.read_exact(&mut head[1..])?;
    if !(20..=24).contains(&head[0]) || head[1] != 3 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "GSI data channel: expected a TLS record, got bytes {:02x} {:02x} (is the peer using DCAU N?)",
                head[0], head[1]
            ),
        ));
    }
    let len = usize::from(u16::from_be_bytes([head[3], head[4]]));
    if len > MAX_RECORD {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("GSI data channel: TLS record of {len} bytes"),
        ));
    }
    let mut rec = head.to_vec();
    rec.resize(5 + len, 0);
    tcp.read_exact(&mut rec[5..])?;
    Ok(rec)
}

fn gss_err(e: haul_gsi::ContextError) -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!("data channel: {e}"),
    )
}

fn ssl_err(e: impl std::fmt::Display) -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!("data channel: GSI: {e}"),
    )
}

/// The OpenSSL acceptor presenting `cred` (TLS 1.2, a client certificate required, any
/// chain let through to be checked by haul-gsi afterwards, no session cache).
pub fn acceptor_context(cred: &Credential) -> io::Result<SslContext> {
    let mut b = SslContextBuilder::new(SslMethod::tls_server()).map_err(ssl_err)?;
    b.set_max_proto_version(Some(SslVersion::TLS1_2))
        .map_err(ssl_err)?;
    let mut certs = cred.chain.iter().map(|c| X509::from_der(c.as_ref()));
    let leaf = certs
        .next()
        .ok_or_else(|| ssl_err("empty credential"))?
        .map_err(ssl_err)?;
    b.set_certificate(&leaf).map_err(ssl_err)?;
    for c in certs {
        b.add_extra_chain_cert(c.map_err(ssl_err)?)
            .map_err(ssl_err)?;
    }
    let key = match &cred.key {
        PrivateKeyDer::Pkcs1(k) => {
            openssl::rsa::Rsa::private_key_from_der(k.secret_pkcs1_der()).and_then(PKey::from_rsa)
        }
        PrivateKeyDer::Sec1(k) => openssl::ec::EcKey::private_key_from_der(k.secret_sec1_der())
            .and_then(PKey::from_ec_key),
        PrivateKeyDer::Pkcs8(k) => PKey::private_key_from_pkcs8(k.secret_pkcs8_der()),
        _ => return Err(ssl_err("unsupported private key format")),
    }
    .map_err(ssl_err)?;
    b.set_private_key(&key).map_err(ssl_err)?;
    b.check_private_key().map_err(ssl_err)?;
    b.set_verify_callback(
        SslVerifyMode::PEER | SslVerifyMode::FAIL_IF_NO_PEER_CERT,
        |_, _| true,
    );
    b.set_session_cache_mode(SslSessionCacheMode::OFF);
    Ok(b.build())
}

/// A reader that never reads past the end of the TLS record it is in, so that OpenSSL leaves
/// the clear data behind the handshake on the socket.
#[derive(Debug)]
struct Records {
    tcp: TcpStream,
    /// Bytes of the current record (header included) not yet handed out.
    pending: Vec<u8>,
}

impl Read for Records {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.pending.is_empty() {
            // A close between records is the end of the stream: Globus clients end a
            // stream-mode upload under PROT S/P by closing, without a close_notify. A close
            // inside a record stays an error.
            let mut first = [0u8; 1];
            if self.tcp.read(&mut first)? == 0 {
                return Ok(0);
            }
            self.pending = read_record_after(&mut self.tcp, first[0])?;
        }
        let n = buf.len().min(self.pending.len());
        buf[..n].copy_from_slice(&self.pending[..n]);
        self.pending.drain(..n);
        Ok(n)
    }
}

impl Write for Records {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.tcp.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.tcp.flush()
    }
}

/// A data connection kept under TLS (`PROT S`/`P`) that this side accepted. Its records are
/// still read one at a time (two reads per 16 KiB record).
struct Accepted(SslStream<Records>);

impl Read for Accepted {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.0.ssl_read(buf) {
            Ok(n) => Ok(n),
            Err(e) if e.code() == openssl::ssl::ErrorCode::ZERO_RETURN => Ok(0),
            // The peer closed between records without a close_notify (see `Records`).
            Err(e) if e.code() == openssl::ssl::ErrorCode::SYSCALL && e.io_error().is_none() => {
                Ok(0)
            }
            Err(e) => Err(e
                .into_io_error()
                .unwrap_or_else(|e| io::Error::other(e.to_string()))),
        }
    }
}

impl Write for Accepted {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

impl DataStream for Accepted {
    fn shutdown_write(&mut self) -> io::Result<()> {
        let _ = self.0.shutdown();
        self.0.get_ref().tcp.shutdown(std::net::Shutdown::Write)
    }

    fn set_read_timeout(&self, t: Option<std::time::Duration>) -> io::Result<()> {
        self.0.get_ref().tcp.set_read_timeout(t)
    }

    fn cutter(&self) -> io::Result<Cutter> {
        self.0.get_ref().tcp.try_clone().map(Cutter::Tcp)
    }
}

impl DataGsi {
    /// Authenticates the data connection `tcp`; `accepted` says this side accepted it (and is
    /// the acceptor). Gives the stream the data then flow on.
    pub fn handshake(&self, tcp: TcpStream, accepted: bool) -> io::Result<Conn> {
        if accepted {
            return self.accept(tcp);
        }
        self.initiate(tcp)
    }

    /// Checks the peer `peer` is who is expected.
    fn check(&self, peer: &haul_gsi::Peer) -> io::Result<()> {
        let ok = match &self.expect {
            Expect::Identity(id) => haul_gsi::name::same_subject(&peer.identity, id),
            Expect::Subject(s) => {
                haul_gsi::name::same_subject(&peer.identity, s)
                    || haul_gsi::name::same_subject(&peer.subject, s)
            }
        };
        if !ok {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "data connection authenticated as {}, expected {:?}",
                    peer.identity, self.expect
                ),
            ));
        }
        Ok(())
    }

    /// The acceptor's side, over OpenSSL.
    fn accept(&self, tcp: TcpStream) -> io::Result<Conn> {
        let plain = tcp.try_clone()?;
        let ssl = openssl::ssl::Ssl::new(&self.acceptor).map_err(ssl_err)?;
        let records = Records {
            tcp,
            pending: Vec::new(),
        };
        let mut s = ssl.accept(records).map_err(ssl_err)?;
        let mut chain: Vec<Vec<u8>> = Vec::new();
        if let Some(leaf) = s.ssl().peer_certificate() {
            chain.push(leaf.to_der().map_err(ssl_err)?);
        }
        if let Some(rest) = s.ssl().peer_cert_chain() {
            for c in rest {
                let der = c.to_der().map_err(ssl_err)?;
                if chain.first() != Some(&der) {
                    chain.push(der);
                }
            }
        }
        let slices: Vec<&[u8]> = chain.iter().map(Vec::as_slice).collect();
        let peer = self.policy.verify(&slices).map_err(ssl_err)?;
        self.check(&peer)?;
        if self.protect {
            return Ok(Box::new(Accepted(s)));
        }
        let mut flag = [0u8; 1];
        s.read_exact(&mut flag)?;
        if flag[0] != b'0' {
            return Err(ssl_err(format!(
                "delegation flag {:#04x} on a data channel",
                flag[0]
            )));
        }
        Ok(Box::new(plain))
    }

    /// The initiator's side, over haul-gsi's context.
    fn initiate(&self, mut tcp: TcpStream) -> io::Result<Conn> {
        let (mut ctx, first) = Context::initiate(
            self.initiator.clone(),
            self.policy.clone(),
            self.protect,
            None,
        )
        .map_err(gss_err)?;
        tcp.write_all(&first)?;
        while !ctx.is_done() {
            let rec = read_record(&mut tcp)?;
            let step = ctx.step(&rec).map_err(gss_err)?;
            tcp.write_all(&step.token)?;
        }
        let peer = ctx
            .peer()
            .ok_or_else(|| gss_err(haul_gsi::ContextError::State("no peer")))?;
        self.check(peer)?;
        if !self.protect {
            return Ok(Box::new(tcp));
        }
        let (conn, plain) = ctx.into_parts();
        if !plain.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "GSI data channel: data inside the handshake",
            ));
        }
        Ok(match conn {
            Connection::Server(c) => Box::new(StreamOwned::new(c, tcp)),
            Connection::Client(c) => Box::new(StreamOwned::new(c, tcp)),
        })
    }
}
