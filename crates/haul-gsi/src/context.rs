//! The GSSAPI security context as the Globus GSI mechanism runs it, sans-IO: tokens in, tokens
//! out. The tokens are TLS records. After the TLS handshake, unless the context is
//! "SSL-compatible" (Globus data channels under `PROT S` / `PROT P`), the initiator sends one
//! byte through TLS: `0` for no delegation, `D` to delegate, which the acceptor answers with a
//! certificate request and the initiator with the signed proxy (`delegation`). When the
//! acceptor finishes its handshake with nothing to send, it sends a zero byte to keep the
//! exchange going (as Globus does). Afterwards `wrap` and `unwrap` protect messages: each
//! wrapped message is TLS application-data records.
//!
//! The exchange is bounded: a context holds at most [`MAX_PENDING`] bytes of received
//! plaintext it has not handed out.

use std::io::{Read, Write};
use std::sync::Arc;

use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, Connection, ServerConfig, ServerConnection};

use crate::chain::Peer;
use crate::cred::Credential;
use crate::delegation::{self, DelegationError, Pending};
use crate::tls::PeerPolicy;

/// Most received plaintext held before it is read.
pub const MAX_PENDING: usize = 1 << 20;

/// How long a proxy this side delegates is valid (cut to its own credential's end).
pub const DELEGATED_LIFETIME: i64 = 12 * 3600;

/// The context failed; it cannot be used further.
#[derive(Debug, thiserror::Error)]
pub enum ContextError {
    /// TLS failed (handshake, bad record, refused certificate).
    #[error("GSI: {0}")]
    Tls(#[from] rustls::Error),
    /// The peer's chain did not check out after the handshake.
    #[error("GSI: {0}")]
    Chain(#[from] crate::chain::ChainError),
    /// Delegation failed.
    #[error("GSI: {0}")]
    Delegation(#[from] DelegationError),
    /// The peer broke the GSI exchange.
    #[error("GSI protocol violation: {0}")]
    Protocol(String),
    /// Called in the wrong state.
    #[error("GSI: {0}")]
    State(&'static str),
}

/// A TLS error, with a refused chain's own reason brought out.
fn tls_error(e: rustls::Error) -> ContextError {
    if let rustls::Error::InvalidCertificate(rustls::CertificateError::Other(o)) = &e {
        if let Some(c) = o.0.downcast_ref::<crate::chain::ChainError>() {
            return ContextError::Chain(c.clone());
        }
    }
    ContextError::Tls(e)
}

/// Which side of the exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Sends the first token (`gss_init_sec_context`).
    Initiator,
    /// Answers it (`gss_accept_sec_context`).
    Acceptor,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Handshake,
    /// Acceptor: waits for `0` or `D`.
    Flags,
    /// Acceptor: waits for the delegated certificate.
    Cert,
    /// Initiator: waits for the certificate request.
    Req,
    Done,
}

/// The outcome of one step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// The token to send (may be empty).
    pub token: Vec<u8>,
    /// True once the context is established on this side.
    pub done: bool,
}

/// One GSS context.
pub struct Context {
    conn: Connection,
    role: Role,
    state: State,
    peers: PeerPolicy,
    peer: Option<Peer>,
    /// No flag byte after the handshake.
    ssl_compatible: bool,
    /// Initiator: ask to delegate, signing with this credential.
    delegate: Option<Credential>,
    pending: Option<Pending>,
    delegated: Option<Credential>,
    plain: Vec<u8>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("role", &self.role)
            .field("state", &self.state)
            .field("peer", &self.peer)
            .finish_non_exhaustive()
    }
}

impl Context {
    fn new(conn: Connection, role: Role, peers: PeerPolicy, ssl_compatible: bool) -> Context {
        Context {
            conn,
            role,
            state: State::Handshake,
            peers,
            peer: None,
            ssl_compatible,
            delegate: None,
            pending: None,
            delegated: None,
            plain: Vec::new(),
        }
    }

    /// An acceptor. `ssl_compatible`: no flag byte after the handshake (data channels under
    /// `PROT S`/`P`).
    pub fn accept(
        cfg: Arc<ServerConfig>,
        peers: PeerPolicy,
        ssl_compatible: bool,
    ) -> Result<Context, ContextError> {
        let conn = ServerConnection::new(cfg)?;
        Ok(Context::new(
            conn.into(),
            Role::Acceptor,
            peers,
            ssl_compatible,
        ))
    }

    /// An initiator and its first token. `delegate`: the credential to sign a delegated proxy
    /// with, if the initiator delegates (never with `ssl_compatible`).
    pub fn initiate(
        cfg: Arc<ClientConfig>,
        peers: PeerPolicy,
        ssl_compatible: bool,
        delegate: Option<Credential>,
    ) -> Result<(Context, Vec<u8>), ContextError> {
        // No SNI is sent, so the name only has to be well-formed.
        let name = ServerName::try_from("gsi.invalid").map_err(|_| ContextError::State("name"))?;
        let conn = ClientConnection::new(cfg, name)?;
        let mut ctx = Context::new(conn.into(), Role::Initiator, peers, ssl_compatible);
        ctx.delegate = delegate.filter(|_| !ssl_compatible);
        let token = ctx.drain();
        Ok((ctx, token))
    }

    /// Which side this is.
    pub fn role(&self) -> Role {
        self.role
    }

    /// True once established.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// The authenticated peer, once the handshake is over.
    pub fn peer(&self) -> Option<&Peer> {
        self.peer.as_ref()
    }

    /// The credential the initiator delegated, on an acceptor, once done (taken once).
    pub fn take_delegated(&mut self) -> Option<Credential> {
        self.delegated.take()
    }

    /// The TLS records waiting to be sent.
    fn drain(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        while self.conn.wants_write() {
            if self.conn.write_tls(&mut out).is_err() {
                break;
            }
        }
        out
    }

    /// Feeds received records and collects any plaintext they carried.
    fn feed(&mut self, mut token: &[u8]) -> Result<(), ContextError> {
        while !token.is_empty() {
            let n = self
                .conn
                .read_tls(&mut token)
                .map_err(|e| ContextError::Protocol(format!("reading a token: {e}")))?;
            if n == 0 {
                break;
            }
            let state = self.conn.process_new_packets().map_err(tls_error)?;
            let avail = state.plaintext_bytes_to_read();
            if self.plain.len() + avail > MAX_PENDING {
                return Err(ContextError::Protocol(format!(
                    "more than {MAX_PENDING} bytes of unread plaintext"
                )));
            }
            let start = self.plain.len();
            self.plain.resize(start + avail, 0);
            self.conn
                .reader()
                .read_exact(&mut self.plain[start..])
                .map_err(|e| ContextError::Protocol(format!("reading plaintext: {e}")))?;
        }
        Ok(())
    }

    fn write_plain(&mut self, data: &[u8]) -> Result<(), ContextError> {
        self.conn
            .writer()
            .write_all(data)
            .map_err(|e| ContextError::Protocol(format!("writing: {e}")))
    }

    /// The handshake just ended: check the peer, and take the next state.
    fn handshake_over(&mut self) -> Result<(), ContextError> {
        let chain: Vec<CertificateDer<'static>> = self
            .conn
            .peer_certificates()
            .map(|c| c.to_vec())
            .unwrap_or_default();
        let slices: Vec<&[u8]> = chain.iter().map(|c| c.as_ref()).collect();
        self.peer = Some(self.peers.verify(&slices)?);
        if self.ssl_compatible {
            self.state = State::Done;
            return Ok(());
        }
        match self.role {
            Role::Acceptor => {
                if !self.conn.wants_write() {
                    self.write_plain(b"\0")?;
                }
                self.state = State::Flags;
            }
            Role::Initiator => {
                if self.delegate.is_some() {
                    self.write_plain(b"D")?;
                    self.state = State::Req;
                } else {
                    self.write_plain(b"0")?;
                    self.state = State::Done;
                }
            }
        }
        Ok(())
    }

    /// Takes one step with the peer's `token`; gives the token to send back.
    pub fn step(&mut self, token: &[u8]) -> Result<Step, ContextError> {
        if self.state == State::Done {
            return Err(ContextError::State("context already established"));
        }
        self.feed(token)?;
        loop {
            match self.state {
                State::Handshake if self.conn.is_handshaking() => break,
                State::Handshake => self.handshake_over()?,
                State::Flags => {
                    let Some(&flag) = self.plain.first() else {
                        break;
                    };
                    self.plain.remove(0);
                    match flag {
                        b'0' => self.state = State::Done,
                        b'D' => {
                            let (pending, csr) = delegation::request()?;
                            self.write_plain(&csr)?;
                            self.pending = Some(pending);
                            self.state = State::Cert;
                        }
                        other => {
                            return Err(ContextError::Protocol(format!(
                                "delegation flag {other:#04x}, expected '0' or 'D'"
                            )))
                        }
                    }
                }
                State::Cert => {
                    if self.plain.is_empty() {
                        break;
                    }
                    let reply = std::mem::take(&mut self.plain);
                    let chain: Vec<CertificateDer<'static>> = self
                        .conn
                        .peer_certificates()
                        .map(|c| c.to_vec())
                        .unwrap_or_default();
                    let pending = self
                        .pending
                        .take()
                        .ok_or(ContextError::State("no request"))?;
                    self.delegated = Some(pending.assemble(&reply, &chain, &self.peers)?);
                    self.state = State::Done;
                }
                State::Req => {
                    // The request is complete once it parses as one whole DER value.
                    let whole =
                        crate::der::split_sequences(&self.plain).is_some_and(|v| v.len() == 1);
                    if !whole {
                        break;
                    }
                    let csr = std::mem::take(&mut self.plain);
                    let cred = self
                        .delegate
                        .as_ref()
                        .ok_or(ContextError::State("no credential"))?;
                    let cert = crate::proxy::sign_request(
                        &csr,
                        cred.chain[0].as_ref(),
                        &cred.key,
                        DELEGATED_LIFETIME,
                    )
                    .map_err(|e| ContextError::Protocol(e.to_string()))?;
                    self.write_plain(&cert)?;
                    self.state = State::Done;
                }
                State::Done => break,
            }
        }
        Ok(Step {
            token: self.drain(),
            done: self.state == State::Done,
        })
    }

    /// Protects `message` (`gss_wrap`): TLS application-data records.
    pub fn wrap(&mut self, message: &[u8]) -> Result<Vec<u8>, ContextError> {
        if self.state != State::Done {
            return Err(ContextError::State(
                "wrap before the context is established",
            ));
        }
        self.write_plain(message)?;
        Ok(self.drain())
    }

    /// Opens a protected message (`gss_unwrap`).
    pub fn unwrap(&mut self, token: &[u8]) -> Result<Vec<u8>, ContextError> {
        if self.state != State::Done {
            return Err(ContextError::State(
                "unwrap before the context is established",
            ));
        }
        self.feed(token)?;
        Ok(std::mem::take(&mut self.plain))
    }

    /// Gives up the TLS connection once established (data channels under `PROT S`/`P` keep
    /// using it as a stream). Any plaintext already received comes with it.
    pub fn into_parts(self) -> (Connection, Vec<u8>) {
        (self.conn, self.plain)
    }
}
