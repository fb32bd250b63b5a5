//! A client's control connection: connect, log in, send commands, read replies (including
//! 111/112 markers that arrive while a transfer runs). Blocking; one per session. The login's
//! protocol is haul-proto's sans-IO [`Login`]; this file only moves its bytes and wraps TLS.

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

use haul_proto::client::{FileEvent, TransferError, Transfers};
use haul_proto::{Action, Command, Login, LoginError, Pipeline, PipelineError, Reply, ReplyParser};
use haul_transport::Conn;

use crate::error::XferError;
use crate::gsi::{ClientGsi, Protected};
use crate::url::RemoteUrl;

/// What a server said it supports in its FEAT reply; read by haul-proto.
pub use haul_proto::Features;

/// A logged-in control connection.
pub struct Control {
    stream: Conn,
    parser: ReplyParser,
    /// The server's address (data connections go to the same host).
    pub peer: SocketAddr,
    /// Our address on the control connection (PORT advertises it).
    pub local: SocketAddr,
    /// What the server supports.
    pub features: Features,
    /// The server's `211` reply to the login's `FEAT`, as it came.
    pub feat_reply: Option<Reply>,
    /// `host:port` as the user named it, for messages.
    pub name: String,
    /// After login: the commands sent and not yet finally answered, which every reply is
    /// matched to; a reply read while none is outstanding is a protocol error.
    pending: Option<Pipeline<String>>,
    /// A command written with the login (see [`Control::connect_asking`]) whose reply is still
    /// to be read, as its line.
    ahead: Option<String>,
}

impl Control {
    /// Connects, reads the greeting, optionally upgrades to TLS, logs in and reads FEAT.
    pub fn connect(
        url: &RemoteUrl,
        tls: Option<&crate::tls::ClientTls>,
        timeout: Duration,
    ) -> Result<Control, XferError> {
        let addrs = resolve(url)?;
        Self::connect_to(url, &addrs, tls, timeout)
    }

    /// As [`Control::connect`], and when the server takes the whole login in one write (a haul
    /// server), `ahead` goes out in that same write: a session opened for one question
    /// (`SITE BTC`) gets its answer in the login's round trip. Whether it went is
    /// [`Control::take_ahead`]'s to say; to any other server it is not sent.
    pub fn connect_asking(
        url: &RemoteUrl,
        tls: Option<&crate::tls::ClientTls>,
        timeout: Duration,
        ahead: Command,
    ) -> Result<Control, XferError> {
        let addrs = resolve(url)?;
        Self::login(url, &addrs, tls, timeout, Some(ahead))
    }

    /// Whether `cmd` went out with the login and its reply is the next to read; true once.
    pub fn take_ahead(&mut self, cmd: &Command) -> bool {
        let sent = self.ahead.as_deref() == Some(cmd.to_string().as_str());
        if sent {
            self.ahead = None;
        }
        sent
    }

    /// As [`Control::connect`], to one of `addrs` (already resolved and checked: a relay
    /// connects only where its allow-list lets it, and never resolves the name twice).
    pub fn connect_to(
        url: &RemoteUrl,
        addrs: &[SocketAddr],
        tls: Option<&crate::tls::ClientTls>,
        timeout: Duration,
    ) -> Result<Control, XferError> {
        Self::login(url, addrs, tls, timeout, None)
    }

    fn login(
        url: &RemoteUrl,
        addrs: &[SocketAddr],
        tls: Option<&crate::tls::ClientTls>,
        timeout: Duration,
        mut ahead: Option<Command>,
    ) -> Result<Control, XferError> {
        let name = url.host_port();
        let tcp = dial(addrs, &name, timeout)?;
        let conn_err = |e: std::io::Error| XferError::Connect {
            host: name.clone(),
            reason: e.to_string(),
        };
        let peer = tcp.peer_addr().map_err(conn_err)?;
        let local = tcp.local_addr().map_err(conn_err)?;
        let mut c = Control {
            stream: Box::new(tcp.try_clone().map_err(|e| XferError::io(&name, e))?),
            parser: ReplyParser::new(),
            peer,
            local,
            features: Features::default(),
            feat_reply: None,
            name,
            pending: None,
            ahead: None,
        };
        let sec = tls.and_then(|t| t.for_url(url));
        let mut login = if url.gsi {
            Login::gsi(url.user.clone(), url.pass.clone())
        } else {
            let user = url.user.clone().unwrap_or_else(|| "anonymous".into());
            let pass = url.pass.clone().unwrap_or_else(|| "haul@".into());
            Login::new(user, pass, sec.as_ref().is_some_and(|t| t.is_tls()))
        };
        let mut tcp = Some(tcp);
        let mut gss = None;
        let mut sent_ahead: Option<(String, String)> = None;
        loop {
            if let Some(a) = login.poll_action() {
                match a {
                    Action::StartTls => {
                        c.start_tls(sec.as_ref(), tcp.take(), &url.host)?;
                        login.tls_established();
                    }
                    Action::StartGss => {
                        let (ctx, first) =
                            c.gsi(sec.as_ref())?.start().map_err(|e| c.gss_err(e))?;
                        gss = Some(ctx);
                        login.adat(haul_gsi::ftp::encode(&first));
                    }
                    Action::Adat(t) => {
                        let ctx = gss.as_mut().ok_or_else(|| c.gss_err("ADAT before AUTH"))?;
                        let next = crate::gsi::step(ctx, &t).map_err(|e| c.gss_err(e))?;
                        login.adat(next);
                    }
                    Action::GssDone(t) => {
                        let ctx = gss.take().ok_or_else(|| c.gss_err("235 before AUTH"))?;
                        c.protect(ctx, t, tcp.take(), &url.host)?;
                        login.gss_established();
                    }
                }
            } else if let Some(first) = login.poll_transmit() {
                // All that is due in one write: a haul server gets the whole login at once.
                let mut due: Vec<Command> = std::iter::once(first)
                    .chain(std::iter::from_fn(|| login.poll_transmit()))
                    .collect();
                // After the burst's last command (under TLS, AUTH TLS goes out alone first).
                let ends_burst = login.is_burst() && due.iter().any(|c| c.verb() == "TYPE");
                let with_login = ends_burst.then(|| ahead.take()).flatten();
                due.extend(with_login.iter().cloned());
                c.send_all(&due)?;
                sent_ahead = with_login.map(|a| (a.verb().to_string(), a.to_string()));
            } else if login.is_done() {
                c.logged_in(&login, sent_ahead);
                // Under GSI, data channels are authenticated other than by the default
                // (DCAU N or S) and stay TLS when asked (globus-url-copy -dcsafe, -dcpriv;
                // Globus sends PBSZ first).
                let gsi = sec.as_ref().and_then(|t| t.gsi());
                if let Some(dcau) = gsi.and_then(|g| g.dcau_command()) {
                    c.ok(&dcau)?;
                }
                if let Some(level) = gsi.and_then(|g| g.prot()) {
                    c.ok(&Command::Pbsz(1 << 20))?;
                    c.ok(&Command::Prot(level))?;
                }
                return Ok(c);
            } else {
                let r = c.reply()?;
                login
                    .handle_reply(r)
                    .map_err(|e| c.login_error(e, login.user()))?;
            }
        }
    }

    /// Takes what the finished `login` learnt; `ahead` (verb, line) went out with it.
    fn logged_in(&mut self, login: &Login, ahead: Option<(String, String)>) {
        self.features = login.features().clone();
        self.feat_reply = login.feat_reply().cloned();
        let mut p = Pipeline::new();
        if let Some((verb, line)) = ahead {
            p.push(verb);
            self.ahead = Some(line);
        }
        self.pending = Some(p);
    }

    /// Performs the TLS handshake [`Action::StartTls`] asks for, on the plain TCP stream.
    fn start_tls(
        &mut self,
        tls: Option<&crate::tls::ClientTls>,
        tcp: Option<TcpStream>,
        host: &str,
    ) -> Result<(), XferError> {
        let (Some(t), Some(tcp)) = (tls, tcp) else {
            return Err(XferError::Internal(
                "TLS asked for twice or without a config".into(),
            ));
        };
        if !self.parser.is_idle() {
            // Bytes after the 234 came before the handshake: plaintext a third party may have
            // injected into what would be read as the protected session.
            return Err(XferError::Protocol {
                host: self.name.clone(),
                reply: "plaintext after 234 to AUTH TLS, before the TLS handshake".into(),
            });
        }
        self.stream = t.wrap_control(tcp, host).map_err(|e| XferError::Tls {
            host: self.name.clone(),
            reason: e.to_string(),
        })?;
        Ok(())
    }

    /// The GSI credential a `gsiftp://` session needs.
    fn gsi<'a>(&self, sec: Option<&'a crate::tls::ClientTls>) -> Result<&'a ClientGsi, XferError> {
        sec.and_then(|t| t.gsi()).ok_or_else(|| {
            self.gss_err(format!(
                "no GSI credential loaded (the proxy is looked for at {})",
                haul_gsi::Credential::proxy_path().display()
            ))
        })
    }

    fn gss_err(&self, reason: impl std::fmt::Display) -> XferError {
        XferError::Gsi {
            host: self.name.clone(),
            reason: reason.to_string(),
        }
    }

    /// Ends the `ADAT` exchange the server ended with 235 (taking its last token, if any),
    /// checks the server's certificate names `host`, and protects the control connection.
    fn protect(
        &mut self,
        mut ctx: haul_gsi::Context,
        last: Option<String>,
        tcp: Option<TcpStream>,
        host: &str,
    ) -> Result<(), XferError> {
        if let Some(t) = last.filter(|t| !t.is_empty() && !ctx.is_done()) {
            crate::gsi::step(&mut ctx, &t).map_err(|e| self.gss_err(e))?;
        }
        if !ctx.is_done() {
            return Err(self.gss_err("the server ended ADAT before the context was established"));
        }
        crate::gsi::check_server(&ctx, host).map_err(|e| self.gss_err(e))?;
        let Some(tcp) = tcp else {
            return Err(XferError::Internal("GSI set up twice".into()));
        };
        if !self.parser.is_idle() {
            return Err(XferError::Protocol {
                host: self.name.clone(),
                reply: "unprotected bytes after 235 to ADAT".into(),
            });
        }
        self.stream = Box::new(Protected::new(tcp, ctx));
        Ok(())
    }

    /// The error a failed login is reported as (the exit code follows from its kind).
    fn login_error(&self, e: LoginError, user: &str) -> XferError {
        match e {
            LoginError::Auth(r) => XferError::Auth {
                host: self.name.clone(),
                user: user.to_string(),
                reply: r.to_string(),
            },
            LoginError::Refused { command, reply } => {
                XferError::from_reply(&self.name, &command, &reply)
            }
            LoginError::Greeting(r) | LoginError::Unexpected(r) => XferError::Protocol {
                host: self.name.clone(),
                reply: r.to_string(),
            },
        }
    }

    /// Writes one command.
    pub fn send(&mut self, cmd: &Command) -> Result<(), XferError> {
        self.send_all([cmd])
    }

    /// Writes `cmds` in one write, so a server that looks ahead at what is queued (a `CKSM`
    /// right after the `RETR` it follows lets a haul server hash the file as it sends it)
    /// finds them all there.
    pub fn send_all<'c>(
        &mut self,
        cmds: impl IntoIterator<Item = &'c Command>,
    ) -> Result<(), XferError> {
        if self.ahead.take().is_some() {
            // Nobody asked for the reply to what went with the login: read it past.
            self.final_reply(&mut |_| {})?;
        }
        let mut lines = String::new();
        let mut verbs = Vec::new();
        for cmd in cmds {
            let at = lines.len();
            let _ = write!(lines, "{cmd}\r\n");
            tracing::debug!(host = %self.name, "> {}", if matches!(cmd, Command::Pass(_)) { "PASS ****" } else { lines[at..].trim_end() });
            verbs.push(cmd.verb());
        }
        self.stream
            .write_all(lines.as_bytes())
            .map_err(|e| XferError::io(&self.name, e))?;
        self.stream
            .flush()
            .map_err(|e| XferError::io(&self.name, e))?;
        if let Some(p) = &mut self.pending {
            for v in verbs {
                p.push(v.to_string());
            }
        }
        Ok(())
    }

    /// Reads the next reply of any kind.
    pub fn reply(&mut self) -> Result<Reply, XferError> {
        let mut buf = [0u8; 4096];
        loop {
            if let Some(r) = self.parser.next_reply().map_err(|e| XferError::Protocol {
                host: self.name.clone(),
                reply: e.to_string(),
            })? {
                tracing::debug!(host = %self.name, "< {r}");
                if let Some(p) = &mut self.pending {
                    if let Err(PipelineError::Unsolicited(r)) = p.handle_reply(r.clone()) {
                        return Err(XferError::Protocol {
                            host: self.name.clone(),
                            reply: format!("{r} (a reply to no command sent)"),
                        });
                    }
                }
                return Ok(r);
            }
            let n = self
                .stream
                .read(&mut buf)
                .map_err(|e| XferError::io(&self.name, e))?;
            if n == 0 {
                return Err(XferError::Connect {
                    host: self.name.clone(),
                    reason: "server closed the control connection".into(),
                });
            }
            self.parser.extend(&buf[..n]);
        }
    }

    /// Reads replies until one that is not a 111/112 marker, passing markers to `on_marker`.
    pub fn final_reply(&mut self, on_marker: &mut dyn FnMut(&Reply)) -> Result<Reply, XferError> {
        loop {
            let r = self.reply()?;
            if r.code == 111 || r.code == 112 {
                on_marker(&r);
                continue;
            }
            return Ok(r);
        }
    }

    /// Sends a command and requires the given final reply code.
    pub fn expect(&mut self, cmd: &Command, code: u16) -> Result<Reply, XferError> {
        self.send(cmd)?;
        let r = self.final_reply(&mut |_| {})?;
        if r.code != code {
            return Err(XferError::from_reply(&self.name, cmd, &r));
        }
        Ok(r)
    }

    /// Sends `cmds` back to back, then reads their replies in order: one round trip for all of
    /// them. Each reply must have the code given with its command, or be any 2yz where none is
    /// given (as [`Control::expect`] and [`Control::ok`]); the first that does not is the
    /// error, once all were read (so the next command's reply cannot be mistaken for one of
    /// these).
    pub fn batch(&mut self, cmds: &[(Command, Option<u16>)]) -> Result<Vec<Reply>, XferError> {
        self.send_all(cmds.iter().map(|(c, _)| c))?;
        let mut replies = Vec::with_capacity(cmds.len());
        let mut refused = None;
        for (c, code) in cmds {
            let r = self.final_reply(&mut |_| {})?;
            let good = code.map_or(r.is_success(), |code| r.code == code);
            if !good && refused.is_none() {
                refused = Some(XferError::from_reply(&self.name, c, &r));
            }
            replies.push(r);
        }
        refused.map_or(Ok(replies), Err)
    }

    /// Sends a command and requires any 2yz reply.
    pub fn ok(&mut self, cmd: &Command) -> Result<Reply, XferError> {
        self.send(cmd)?;
        let r = self.final_reply(&mut |_| {})?;
        if !r.is_success() {
            return Err(XferError::from_reply(&self.name, cmd, &r));
        }
        Ok(r)
    }
}

/// Pipelined file transfers: the sans-IO [`Transfers`] decides what to write and what each
/// reply means; these move its commands and replies.
impl Control {
    /// Writes every command `t` has due now (its window allows).
    pub fn send_due(&mut self, t: &mut Transfers) -> Result<(), XferError> {
        let due: Vec<Command> = std::iter::from_fn(|| t.poll_command()).collect();
        if due.is_empty() {
            return Ok(());
        }
        self.send_all(&due)
    }

    /// The next event of `t`: one a reply already left, else what the replies read next mean.
    /// A reply out of sequence fails as the refusal of the command it answers.
    pub fn transfer_event(&mut self, t: &mut Transfers) -> Result<FileEvent, XferError> {
        loop {
            if let Some(ev) = t.poll_event() {
                return Ok(ev);
            }
            if t.outstanding() == 0 {
                return Err(XferError::Internal(
                    "waited for a transfer event with no command outstanding".into(),
                ));
            }
            let r = self.reply()?;
            match t.handle_reply(r) {
                Ok(Some(ev)) => return Ok(ev),
                Ok(None) => {}
                Err(TransferError::Unexpected { command, reply, .. }) => {
                    return Err(XferError::from_reply(&self.name, &command, &reply));
                }
                Err(TransferError::Unsolicited(r)) => {
                    return Err(XferError::Protocol {
                        host: self.name.clone(),
                        reply: format!("{r} (a reply to no command sent)"),
                    });
                }
            }
        }
    }
}

/// Resolves the URL's host and opens the TCP connection, trying each address in turn.
/// The addresses `url`'s host resolves to.
pub fn resolve(url: &RemoteUrl) -> Result<Vec<SocketAddr>, XferError> {
    let addrs = (url.host.as_str(), url.port)
        .to_socket_addrs()
        .map_err(|e| XferError::Connect {
            host: url.host_port(),
            reason: format!("cannot resolve: {e}"),
        })?;
    Ok(addrs.collect())
}

fn dial(addrs: &[SocketAddr], name: &str, timeout: Duration) -> Result<TcpStream, XferError> {
    let mut last = None;
    for a in addrs {
        match TcpStream::connect_timeout(a, timeout) {
            Ok(tcp) => {
                tcp.set_nodelay(true).ok();
                tcp.set_read_timeout(Some(Duration::from_secs(600))).ok();
                return Ok(tcp);
            }
            Err(e) => last = Some(e),
        }
    }
    Err(XferError::Connect {
        host: name.to_string(),
        reason: last.map_or_else(|| "no address".into(), |e| e.to_string()),
    })
}

#[cfg(test)]
mod tests;
