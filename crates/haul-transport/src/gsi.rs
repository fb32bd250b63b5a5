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

use std::ffi::{c_int, c_void};
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::ptr::null_mut;
use std::sync::{Arc, Mutex, OnceLock};

use haul_gsi::{Context, Credential, PeerPolicy};
use openssl::pkey::{PKey, Private};
use openssl::ssl::{
    Ssl, SslContext, SslContextBuilder, SslMethod, SslSessionCacheMode, SslStream, SslVerifyMode,
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
    /// What this side presents, accepting or initiating.
    pub cred: DataCredential,
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

extern "C" {
    // libssl's, not bound by openssl-sys.
    fn SSL_CTX_set_cert_verify_callback(
        ctx: *mut openssl_sys::SSL_CTX,
        cb: Option<unsafe extern "C" fn(*mut openssl_sys::X509_STORE_CTX, *mut c_void) -> c_int>,
        arg: *mut c_void,
    );
}

/// OpenSSL's chain verification, replaced: every chain passes here, as haul-gsi checks it after
/// the handshake (OpenSSL knows neither the trust store nor proxies). The handshake itself
/// still proves the peer holds the leaf's key. Running OpenSSL's check too only to ignore its
/// verdict cost as much as haul-gsi's own check, on every data connection.
unsafe extern "C" fn chain_checked_later(
    _: *mut openssl_sys::X509_STORE_CTX,
    _: *mut c_void,
) -> c_int {
    1
}

/// OpenSSL's TLS 1.2 server context for accepted data connections, one per process: making
/// one costs milliseconds under OpenSSL 3, so each connection sets its credential on its own
/// `Ssl` instead. A client certificate is required; any chain is let through, to be checked
/// by haul-gsi afterwards; no session cache.
fn acceptor_base() -> io::Result<&'static SslContext> {
    static BASE: OnceLock<Result<SslContext, String>> = OnceLock::new();
    let made = BASE.get_or_init(|| {
        let mut b = SslContextBuilder::new(SslMethod::tls_server()).map_err(|e| e.to_string())?;
        b.set_max_proto_version(Some(SslVersion::TLS1_2))
            .map_err(|e| e.to_string())?;
        b.set_verify(SslVerifyMode::PEER | SslVerifyMode::FAIL_IF_NO_PEER_CERT);
        // SAFETY: `b` owns a live SSL_CTX; the callback takes no argument and keeps nothing.
        unsafe {
            SSL_CTX_set_cert_verify_callback(b.as_ptr(), Some(chain_checked_later), null_mut())
        };
        b.set_session_cache_mode(SslSessionCacheMode::OFF);
        Ok(b.build())
    });
    made.as_ref().map_err(ssl_err)
}

/// A credential as OpenSSL holds it, parsed once.
struct Presented {
    leaf: X509,
    chain: Vec<X509>,
    key: PKey<Private>,
}

impl Presented {
    fn parse(cred: &Credential) -> io::Result<Presented> {
        let mut certs = cred.chain.iter().map(|c| X509::from_der(c.as_ref()));
        let leaf = certs
            .next()
            .ok_or_else(|| ssl_err("empty credential"))?
            .map_err(ssl_err)?;
        let chain = certs.collect::<Result<Vec<_>, _>>().map_err(ssl_err)?;
        let key = match &cred.key {
            PrivateKeyDer::Pkcs1(k) => {
                openssl::rsa::Rsa::private_key_from_der(k.secret_pkcs1_der())
                    .and_then(PKey::from_rsa)
            }
            PrivateKeyDer::Sec1(k) => openssl::ec::EcKey::private_key_from_der(k.secret_sec1_der())
                .and_then(PKey::from_ec_key),
            PrivateKeyDer::Pkcs8(k) => PKey::private_key_from_pkcs8(k.secret_pkcs8_der()),
            _ => return Err(ssl_err("unsupported private key format")),
        }
        .map_err(ssl_err)?;
        if !leaf.public_key().map_err(ssl_err)?.public_eq(&key) {
            return Err(ssl_err("the private key does not match the certificate"));
        }
        Ok(Presented { leaf, chain, key })
    }

    /// An acceptor's `Ssl` presenting this credential.
    fn ssl(&self) -> io::Result<Ssl> {
        let mut ssl = Ssl::new(acceptor_base()?).map_err(ssl_err)?;
        ssl.set_certificate(&self.leaf).map_err(ssl_err)?;
        ssl.set_private_key(&self.key).map_err(ssl_err)?;
        for c in &self.chain {
            ssl.add_chain_cert(c.clone()).map_err(ssl_err)?;
        }
        Ok(ssl)
    }
}

/// What a side presents on its data connections, in both roles.
struct Prepared {
    acceptor: Presented,
    initiator: Arc<ClientConfig>,
}

/// The credential a session's data connections present, made ready for OpenSSL (accepting)
/// and rustls (initiating). [`DataCredential::spawn`] does that work on a thread of its own,
/// so that it overlaps the control connection's login; the first data connection waits for it.
#[derive(Clone)]
pub struct DataCredential(Arc<Background>);

struct Background {
    done: OnceLock<Result<Prepared, String>>,
    job: Mutex<Option<std::thread::JoinHandle<Result<Prepared, String>>>>,
}

impl DataCredential {
    fn prepare(cred: &Credential, peers: &PeerPolicy) -> Result<Prepared, String> {
        acceptor_base().map_err(|e| e.to_string())?;
        Ok(Prepared {
            acceptor: Presented::parse(cred).map_err(|e| e.to_string())?,
            initiator: haul_gsi::tls::initiator_config(Some(cred), peers)
                .map_err(|e| format!("data channel: GSI: {e}"))?,
        })
    }

    /// `cred`, made ready now; data connections this side opens check their peer under `peers`.
    pub fn new(cred: &Credential, peers: &PeerPolicy) -> io::Result<DataCredential> {
        let ready = Self::prepare(cred, peers).map_err(ssl_err)?;
        Ok(DataCredential(Arc::new(Background {
            done: OnceLock::from(Ok(ready)),
            job: Mutex::new(None),
        })))
    }

    /// The credential `make` gives, made ready on a thread of its own.
    pub fn spawn(
        make: impl FnOnce() -> Result<Credential, String> + Send + 'static,
        peers: PeerPolicy,
    ) -> DataCredential {
        let job = std::thread::Builder::new()
            .name("gsi-data-cred".into())
            .spawn(move || Self::prepare(&make()?, &peers));
        let (done, job) = match job {
            Ok(h) => (OnceLock::new(), Some(h)),
            Err(e) => (OnceLock::from(Err(format!("data channel: GSI: {e}"))), None),
        };
        DataCredential(Arc::new(Background {
            done,
            job: Mutex::new(job),
        }))
    }

    fn get(&self) -> io::Result<&Prepared> {
        let b = &*self.0;
        b.done
            .get_or_init(|| {
                let job = b.job.lock().unwrap_or_else(|p| p.into_inner()).take();
                match job.map(std::thread::JoinHandle::join) {
                    Some(Ok(made)) => made,
                    Some(Err(_)) => Err("preparing the data-channel credential panicked".into()),
                    None => Err("the data-channel credential was never made".into()),
                }
            })
            .as_ref()
            .map_err(ssl_err)
    }
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
        let t0 = std::time::Instant::now();
        let conn = if accepted {
            self.accept(tcp)
        } else {
            self.initiate(tcp)
        };
        tracing::debug!(
            accepted,
            ok = conn.is_ok(),
            us = t0.elapsed().as_micros() as u64,
            "GSI data channel handshake"
        );
        conn
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
                    "data connection authenticated as {}, expected {}",
                    peer.identity,
                    match &self.expect {
                        Expect::Identity(id) => format!("the session's own identity {id} (DCAU A)"),
                        Expect::Subject(s) => format!("the subject {s} (DCAU S)"),
                    }
                ),
            ));
        }
        Ok(())
    }

    /// The acceptor's side, over OpenSSL.
    fn accept(&self, tcp: TcpStream) -> io::Result<Conn> {
        let plain = tcp.try_clone()?;
        let ssl = self.cred.get()?.acceptor.ssl()?;
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
            self.cred.get()?.initiator.clone(),
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn a_credential_that_could_not_be_made_fails_each_connection_with_the_reason() {
        let policy = PeerPolicy::new(haul_gsi::TrustStore::default(), 10);
        let g = DataGsi {
            cred: DataCredential::spawn(|| Err("no proxy here".into()), policy.clone()),
            policy,
            expect: Expect::Identity("/CN=nobody".into()),
            protect: false,
        };
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let _c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        for accepted in [true, false, true] {
            let Err(e) = g.handshake(s.try_clone().unwrap(), accepted) else {
                panic!("a handshake without a credential succeeded");
            };
            assert!(e.to_string().contains("no proxy here"), "{e}");
        }
    }
}
