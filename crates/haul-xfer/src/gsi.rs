//! The client's GSI (`gsiftp://`), found as the Globus tools find it: the user's proxy at
//! `X509_USER_PROXY` or `/tmp/x509up_u<uid>`, the trusted CAs at `X509_CERT_DIR` or
//! `/etc/grid-security/certificates`. The control connection's GSS context is established
//! through `ADAT` (haul-proto's [`Login`](haul_proto::Login) drives the exchange, haul-gsi's
//! [`Context`] makes the tokens), delegating a proxy to the server so that it can act for the
//! user on data channels and onward; the server's certificate must name the host connected
//! to. From then on [`Protected`] carries the control connection: each command line goes out
//! as `ENC <token>`, each `63x` reply line is unwrapped. Data connections authenticate with
//! the same identity under `DCAU A` (the server presents the proxy it was delegated), carried
//! by haul-transport's [`DataGsi`]. This side presents a session proxy there: a proxy of the
//! user's proxy with an ECDSA key, made once per command, so that a connection's handshake
//! signs with ECDSA instead of the user's RSA key (a millisecond or more each). It is made,
//! with the OpenSSL and rustls set-ups, on a thread of its own while the control connection
//! logs in.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::Arc;

use haul_gsi::{ftp, Context, Credential, PeerPolicy, TrustStore};
pub use haul_proto::command::Dcau;
use haul_transport::gsi::{DataCredential, DataGsi, Expect};
use haul_transport::{Cutter, DataStream};

use crate::error::XferError;

/// How long a session proxy is valid (cut to the user's proxy's own end).
const SESSION_PROXY_SECS: i64 = 12 * 3600;

/// Longest raw reply line accepted under GSI (a base64 token of [`ftp::MAX_TOKEN`] bytes).
const MAX_LINE: usize = ftp::MAX_TOKEN / 3 * 4 + 16;

/// How `gsiftp://` data channels are protected once authenticated (`PROT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protection {
    /// `PROT C`: in clear after the DCAU handshake (Globus's default).
    #[default]
    Clear,
    /// `PROT S`: TLS records, integrity.
    Safe,
    /// `PROT P`: TLS records, integrity and confidentiality.
    Private,
}

/// A user's GSI credential and trust, loaded once per command.
pub struct ClientGsi {
    protection: Protection,
    dcau: Dcau,
    cred: Credential,
    policy: PeerPolicy,
    control: Arc<rustls::ClientConfig>,
    data: DataGsi,
    identity: String,
}

impl std::fmt::Debug for ClientGsi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientGsi")
            .field("identity", &self.identity)
            .finish_non_exhaustive()
    }
}

fn gsi_err(what: &Path, reason: impl std::fmt::Display) -> XferError {
    XferError::Gsi {
        host: what.display().to_string(),
        reason: reason.to_string(),
    }
}

impl ClientGsi {
    /// The proxy and the CAs where the Globus tools look for them.
    pub fn from_environment() -> Result<ClientGsi, XferError> {
        Self::load(&Credential::proxy_path(), &TrustStore::default_dir())
    }

    /// The proxy file `proxy` (certificates and key in one file, as `grid-proxy-init` writes
    /// it), trusting the CAs of `cert_dir`. The proxy must be valid now under those CAs.
    pub fn load(proxy: &Path, cert_dir: &Path) -> Result<ClientGsi, XferError> {
        let cred = Credential::load_proxy(proxy).map_err(|e| {
            gsi_err(
                proxy,
                format!("{e} (make a proxy with grid-proxy-init, or set X509_USER_PROXY)"),
            )
        })?;
        let trust = TrustStore::load_dir(cert_dir).map_err(|e| gsi_err(cert_dir, e))?;
        let policy = PeerPolicy::new(trust, haul_gsi::chain::DEFAULT_MAX_PROXIES);
        Self::from_credential(cred, policy).map_err(|e| gsi_err(proxy, e))
    }

    /// A credential already held (a relay's: the one its client delegated), checked under
    /// `policy`, which also checks the servers it connects to.
    pub fn from_credential(cred: Credential, policy: PeerPolicy) -> Result<ClientGsi, String> {
        let me = policy
            .verify(&cred.chain_slices())
            .map_err(|e| format!("the proxy does not verify: {e}"))?;
        let control =
            haul_gsi::tls::initiator_config(Some(&cred), &policy).map_err(|e| e.to_string())?;
        let session = {
            let (cred, deeper) = (cred.clone(), policy.delegated());
            // A proxy that may not have one beneath it (a path-length limit) is presented itself.
            move || {
                Ok(cred
                    .session_proxy(SESSION_PROXY_SECS)
                    .ok()
                    .filter(|s| deeper.verify(&s.chain_slices()).is_ok())
                    .unwrap_or(cred))
            }
        };
        let data = DataGsi {
            cred: DataCredential::spawn(session, policy.clone()),
            policy: policy.clone(),
            expect: Expect::Identity(me.identity.clone()),
            protect: false,
        };
        Ok(ClientGsi {
            protection: Protection::Clear,
            dcau: Dcau::SelfId,
            cred,
            policy,
            control,
            data,
            identity: me.identity,
        })
    }

    /// Protects data channels at `level` (sent as `PBSZ` and `PROT` after the login).
    pub fn with_protection(mut self, level: Protection) -> ClientGsi {
        self.protection = level;
        self.data.protect = level != Protection::Clear;
        self
    }

    /// Authenticates data connections as `dcau` says (sent as `DCAU` after the login).
    pub fn with_dcau(mut self, dcau: Dcau) -> ClientGsi {
        self.data.expect = match &dcau {
            Dcau::Subject(s) => Expect::Subject(s.clone()),
            _ => Expect::Identity(self.identity.clone()),
        };
        self.dcau = dcau;
        self
    }

    /// The `DCAU` command a session sends after its login, if not the default `A`.
    pub fn dcau_command(&self) -> Option<haul_proto::Command> {
        match &self.dcau {
            Dcau::SelfId => None,
            Dcau::None => Some(haul_proto::Command::Dcau("N".into())),
            Dcau::Subject(s) => Some(haul_proto::Command::Dcau(format!("S {s}"))),
        }
    }

    /// Whether data connections start with a GSI handshake (not under `DCAU N`).
    pub fn authenticates_data(&self) -> bool {
        self.dcau != Dcau::None
    }

    /// The `PROT` level a session asks for after its login, if not the default `C`.
    pub fn prot(&self) -> Option<haul_proto::command::ProtLevel> {
        match self.protection {
            Protection::Clear => None,
            Protection::Safe => Some(haul_proto::command::ProtLevel::Safe),
            Protection::Private => Some(haul_proto::command::ProtLevel::Private),
        }
    }

    /// The identity behind the proxy (its end-entity subject).
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// Data connections' settings: the peer `DCAU` asks for (by default this same identity),
    /// at the protection level asked for.
    pub fn data(&self) -> &DataGsi {
        &self.data
    }

    /// A control connection's context as initiator, delegating, and its first token.
    pub(crate) fn start(&self) -> Result<(Context, Vec<u8>), haul_gsi::ContextError> {
        Context::initiate(
            self.control.clone(),
            self.policy.clone(),
            false,
            Some(self.cred.clone()),
        )
    }
}

/// Steps `ctx` with a base64 token from the server; gives the base64 token to send back.
pub(crate) fn step(ctx: &mut Context, token: &str) -> Result<String, String> {
    let raw = ftp::decode(token).map_err(|e| e.to_string())?;
    let out = ctx.step(&raw).map_err(|e| e.to_string())?;
    if out.token.is_empty() && !out.done {
        return Err("the context stalled: no token to send and not established".into());
    }
    Ok(ftp::encode(&out.token))
}

/// Checks that the server `ctx` authenticated may be `host`.
pub(crate) fn check_server(ctx: &Context, host: &str) -> Result<(), String> {
    let peer = ctx.peer().ok_or("no server certificate")?;
    if !haul_gsi::name::host_matches(&peer.host_names, host) {
        return Err(format!(
            "the server's certificate ({}) names {:?}, not {host}",
            peer.subject, peer.host_names
        ));
    }
    Ok(())
}

/// The control connection under GSI, after the context is established.
pub(crate) struct Protected {
    tcp: TcpStream,
    ctx: Context,
    /// Command bytes written and not yet a whole line.
    out: Vec<u8>,
    /// Raw reply bytes read and not yet a whole line.
    raw: Vec<u8>,
    /// Unwrapped reply bytes not yet read.
    plain: Vec<u8>,
}

impl Protected {
    pub(crate) fn new(tcp: TcpStream, ctx: Context) -> Protected {
        Protected {
            tcp,
            ctx,
            out: Vec::new(),
            raw: Vec::new(),
            plain: Vec::new(),
        }
    }

    /// Unwraps every whole raw line into `plain`.
    fn unwrap_lines(&mut self) -> io::Result<()> {
        while let Some(end) = self.raw.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.raw.drain(..=end).collect();
            let text = String::from_utf8_lossy(&line);
            let text = text.trim_end_matches(['\r', '\n']);
            let Some((token, _last)) = ftp::protected_reply(text) else {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("an unprotected reply on a GSI control connection: {text:?}"),
                ));
            };
            let mut plain = ftp::decode(token)
                .and_then(|t| self.ctx.unwrap(&t).map_err(Into::into))
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
            while plain.last() == Some(&0) {
                plain.pop();
            }
            if !plain.ends_with(b"\n") {
                plain.extend_from_slice(b"\r\n");
            }
            self.plain.extend_from_slice(&plain);
        }
        if self.raw.len() > MAX_LINE {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("a reply line longer than {MAX_LINE} bytes"),
            ));
        }
        Ok(())
    }
}

impl Read for Protected {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.plain.is_empty() {
            let mut chunk = [0u8; 8192];
            let n = self.tcp.read(&mut chunk)?;
            if n == 0 {
                return Ok(0);
            }
            self.raw.extend_from_slice(&chunk[..n]);
            self.unwrap_lines()?;
        }
        let n = buf.len().min(self.plain.len());
        buf[..n].copy_from_slice(&self.plain[..n]);
        self.plain.drain(..n);
        Ok(n)
    }
}

impl Write for Protected {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.out.extend_from_slice(buf);
        // Each line is wrapped on its own; the lines of one write go out in one write, so a
        // batch of commands reaches the server together, as it does in the clear.
        let mut wrapped = String::new();
        while let Some(end) = self.out.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.out.drain(..=end).collect();
            let token = self
                .ctx
                .wrap(&line)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
            wrapped.push_str(&format!("ENC {}\r\n", ftp::encode(&token)));
        }
        if !wrapped.is_empty() {
            self.tcp.write_all(wrapped.as_bytes())?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.tcp.flush()
    }
}

impl DataStream for Protected {
    fn shutdown_write(&mut self) -> io::Result<()> {
        self.tcp.shutdown(std::net::Shutdown::Write)
    }

    fn set_read_timeout(&self, t: Option<std::time::Duration>) -> io::Result<()> {
        self.tcp.set_read_timeout(t)
    }

    fn cutter(&self) -> io::Result<Cutter> {
        self.tcp.try_clone().map(Cutter::Tcp)
    }
}
