//! Who a session's data connections go to and come from: after `PASV`, the control
//! connection's peer (unless PASV addresses are trusted); on a download's listener, only
//! connections from that peer.

use std::net::{IpAddr, SocketAddr};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use haul_proto::command::TransferMode;
use haul_proto::{hostport, Command, Reply};
use haul_transport::mode_e::{Acceptor, Progress};
use haul_transport::net::{DataListener, RawConn};
use haul_transport::token::DataToken;
use haul_transport::Conn;

use super::early::EarlyAccept;
use super::Session;
use crate::error::XferError;
use crate::tls::ClientTls;

/// Where a session opens its data connections after `PASV` (uploads, listings, and the address
/// a server-to-server transfer hands the source).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PasvAddress {
    /// The control connection's peer, with the port from the reply (what curl's
    /// `--ftp-skip-pasv-ip` does): a server cannot point the client at a third host.
    #[default]
    ControlPeer,
    /// The address the reply names (`--trust-pasv-address`), for servers whose data interface
    /// differs from their control address.
    Trusted,
}

/// Accepts the server's data connections on our listener, from the control connection's peer
/// only: anyone else who connects (to inject data into a download) is closed, logged and
/// ignored, and the wait goes on for the server's own connection. The wait has a deadline: when
/// neither a connection nor a byte has arrived for `timeout`, the receive fails.
pub(super) struct ListenAcceptor<'a> {
    listener: &'a DataListener,
    /// Under GSI, the connections the background acceptor readied (it owns the listener).
    early: Option<&'a EarlyAccept>,
    tls: Option<(&'a ClientTls, &'a str)>,
    peer: IpAddr,
    /// The session's data-connection token, which the server's connections must carry first.
    token: Option<DataToken>,
    progress: &'a Progress,
    timeout: Duration,
    /// When something last happened, and the byte count then.
    last: Mutex<(Instant, u64)>,
}

impl<'a> ListenAcceptor<'a> {
    /// Accepts from `peer` on `listener` for a receive counting its bytes in `progress`.
    pub(super) fn new(
        listener: &'a DataListener,
        early: Option<&'a EarlyAccept>,
        tls: Option<(&'a ClientTls, &'a str)>,
        peer: IpAddr,
        token: Option<DataToken>,
        progress: &'a Progress,
        timeout: Duration,
    ) -> Self {
        let last = Mutex::new((Instant::now(), progress.bytes()));
        ListenAcceptor {
            listener,
            early,
            tls,
            peer,
            token,
            progress,
            timeout,
            last,
        }
    }

    /// Fails once neither a connection nor a byte arrived for the timeout.
    fn check_stall(&self, accepted: bool) -> std::io::Result<()> {
        let mut last = self
            .last
            .lock()
            .map_err(|_| std::io::Error::other("acceptor state poisoned"))?;
        let bytes = self.progress.bytes();
        if accepted || bytes != last.1 {
            *last = (Instant::now(), bytes);
        } else if last.0.elapsed() > self.timeout {
            let secs = self.timeout.as_secs_f64();
            let e = format!(
                "no data connection and no data from {} for {secs} s (--data-timeout)",
                self.peer
            );
            return Err(std::io::Error::new(std::io::ErrorKind::TimedOut, e));
        }
        Ok(())
    }
}

impl Session {
    /// The session's data-connection token, asked for (`DTOK`) the first time a data connection
    /// of this client's own is set up, if the server offers tokens. Server-to-server transfers,
    /// whose data connections run between the two servers, never ask.
    pub(super) fn data_token(&mut self) -> Result<Option<DataToken>, XferError> {
        if let Some(cmd) = self.token_command() {
            let r = self.ctl.expect(&cmd, 200)?;
            self.take_token(&r)?;
        }
        Ok(self.token)
    }

    /// Sets a data channel up in one round trip: `MODE E` unless the session is in it, `DTOK`
    /// when the session has no token yet, then `cmds` (each with the reply code it needs, or
    /// `None` for any 2yz). Returns the reply to the last of `cmds`.
    pub(super) fn ready_data(
        &mut self,
        cmds: Vec<(Command, Option<u16>)>,
    ) -> Result<Reply, XferError> {
        let mut all = Vec::with_capacity(cmds.len() + 2);
        if !self.mode_e {
            all.push((Command::Mode(TransferMode::Extended), Some(200)));
        }
        let token = self.token_command().map(|c| {
            all.push((c, Some(200)));
            all.len() - 1
        });
        all.extend(cmds);
        let mut replies = self.ctl.batch(&all)?;
        self.mode_e = true;
        if let Some(i) = token {
            self.take_token(&replies[i])?;
        }
        replies
            .pop()
            .ok_or_else(|| XferError::Usage("a data channel set up with no command".into()))
    }

    /// The `DTOK` to send when the session has no token yet and the server offers them.
    fn token_command(&self) -> Option<Command> {
        (self.token.is_none() && self.ctl.features.dtok).then(|| Command::Unknown {
            verb: "DTOK".into(),
            arg: String::new(),
        })
    }

    /// Keeps the token a `DTOK` reply carries.
    fn take_token(&mut self, r: &Reply) -> Result<(), XferError> {
        let text = r.text();
        let hex = text.trim().strip_prefix("DTOK ").unwrap_or_default();
        let t = DataToken::from_hex(hex).ok_or_else(|| XferError::Protocol {
            host: self.ctl.name.clone(),
            reply: r.to_string(),
        })?;
        self.token = Some(t);
        Ok(())
    }
}

/// Sends the session's token, if it has one, on a data connection this client opened.
pub(super) fn present(conn: &mut Conn, token: Option<DataToken>) -> std::io::Result<()> {
    token.map_or(Ok(()), |t| t.present(conn))
}

/// Sets a data connection's read and write deadlines (a peer silent for that long fails the
/// transfer) and secures it (TLS, or GSI's `DCAU`) when the session is; `accepted` says this
/// side accepted the connection.
pub(super) fn prepare(
    raw: RawConn,
    tls: Option<(&ClientTls, &str)>,
    accepted: bool,
    timeout: Duration,
) -> std::io::Result<Conn> {
    raw.set_timeouts(Some(timeout), Some(timeout))?;
    match tls {
        Some((t, host)) => t.wrap_data(raw.into_tcp()?, host, accepted),
        None => Ok(raw.into_conn()),
    }
}

impl Acceptor for ListenAcceptor<'_> {
    fn accept(&self, wait: Duration) -> std::io::Result<Option<Conn>> {
        if let Some(early) = self.early {
            let got = early.next(wait)?;
            self.check_stall(got.is_some())?;
            return Ok(got);
        }
        let deadline = Instant::now() + wait;
        loop {
            match self
                .listener
                .accept_timeout(deadline.saturating_duration_since(Instant::now()))
            {
                Ok((c, from)) if from.ip() == self.peer => {
                    self.check_stall(true)?;
                    let mut conn = prepare(c, self.tls, true, self.timeout)?;
                    match self.token.map(|t| t.check(&mut conn, self.timeout)) {
                        Some(Err(e)) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                            tracing::warn!("closed a data connection from {from}: {e}");
                        }
                        Some(Err(e)) => return Err(e),
                        Some(Ok(())) | None => return Ok(Some(conn)),
                    }
                }
                Ok((c, from)) => {
                    tracing::warn!(
                        "closed a data connection from {from}: only the server {} may connect",
                        self.peer
                    );
                    drop(c);
                }
                Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {
                    self.check_stall(false)?;
                    return Ok(None);
                }
                Err(e) => return Err(e),
            }
        }
    }
}

impl Session {
    /// Sends `PASV` and returns where to connect: see [`Session::data_addr`].
    pub(crate) fn pasv(&mut self) -> Result<SocketAddr, XferError> {
        let r = self.ctl.expect(&Command::Pasv, 227)?;
        self.pasv_reply(&r)
    }

    /// Where a `227` reply to `PASV` says to connect.
    pub(crate) fn pasv_reply(&self, r: &Reply) -> Result<SocketAddr, XferError> {
        let a = hostport::find_in_reply(&r.text()).ok_or_else(|| XferError::Protocol {
            host: self.ctl.name.clone(),
            reply: r.to_string(),
        })?;
        Ok(self.data_addr(a))
    }

    /// Where to open a data connection the server offered at `offered`: the control peer with
    /// the offered port, unless PASV addresses are trusted (and even then not an unspecified
    /// address).
    pub(crate) fn data_addr(&self, offered: SocketAddr) -> SocketAddr {
        let peer = self.ctl.peer.ip();
        if self.pasv_address == PasvAddress::Trusted && !offered.ip().is_unspecified() {
            return offered;
        }
        if offered.ip() != peer && !offered.ip().is_unspecified() {
            tracing::debug!(host = %self.ctl.name, "PASV named {offered}; connecting to the control peer {peer} instead");
        }
        SocketAddr::new(peer, offered.port())
    }
}
