//! A client's control connection: connect, log in, send commands, read replies (including
//! 111/112 markers that arrive while a transfer runs). Blocking; one per session.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

use haul_proto::{Command, Reply, ReplyParser};
use haul_transport::Conn;

use crate::error::XferError;
use crate::url::RemoteUrl;

/// What a server said it supports in its FEAT reply.
#[derive(Debug, Clone, Default)]
pub struct Features {
    /// The server speaks haul's own dialect (`HAUL` feature line).
    pub haul: bool,
    /// The server offers data-connection tokens (`DTOK`).
    pub dtok: bool,
    /// CKSM algorithms offered, upper-cased.
    pub cksm: Vec<String>,
    /// AUTH TLS is offered.
    pub auth_tls: bool,
    /// PLUT data channels are offered (`PLUT 1`).
    pub plut: bool,
}

impl Features {
    /// Reads a `211` FEAT reply: one feature per line, the CKSM line listing algorithms.
    pub fn parse(r: &Reply) -> Features {
        let mut f = Features::default();
        for l in &r.lines {
            let l = l.trim();
            let (name, rest) = l.split_once(' ').unwrap_or((l, ""));
            match name.to_ascii_uppercase().as_str() {
                "HAUL" => f.haul = true,
                "PLUT" => f.plut = true,
                "DTOK" => f.dtok = true,
                "CKSM" => {
                    f.cksm = rest
                        .split([';', ','])
                        .filter_map(|a| a.split(':').next())
                        .map(|a| a.trim().to_ascii_uppercase())
                        .filter(|a| !a.is_empty())
                        .collect()
                }
                "AUTH" if rest.to_ascii_uppercase().contains("TLS") => f.auth_tls = true,
                _ => {}
            }
        }
        f
    }

    /// True when the server computes `alg` for CKSM.
    pub fn has_cksm(&self, alg: &str) -> bool {
        self.cksm.iter().any(|a| a.eq_ignore_ascii_case(alg))
    }
}

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
    /// `host:port` as the user named it, for messages.
    pub name: String,
}

impl Control {
    /// Connects, reads the greeting, optionally upgrades to TLS, logs in and reads FEAT.
    pub fn connect(
        url: &RemoteUrl,
        tls: Option<&crate::tls::ClientTls>,
        timeout: Duration,
    ) -> Result<Control, XferError> {
        let name = url.host_port();
        let addrs: Vec<SocketAddr> = (url.host.as_str(), url.port)
            .to_socket_addrs()
            .map_err(|e| XferError::Connect {
                host: name.clone(),
                reason: format!("cannot resolve: {e}"),
            })?
            .collect();
        let mut last = None;
        let mut tcp = None;
        for a in &addrs {
            match TcpStream::connect_timeout(a, timeout) {
                Ok(s) => {
                    tcp = Some(s);
                    break;
                }
                Err(e) => last = Some(e),
            }
        }
        let tcp = tcp.ok_or_else(|| XferError::Connect {
            host: name.clone(),
            reason: last.map_or_else(|| "no address".into(), |e| e.to_string()),
        })?;
        tcp.set_nodelay(true).ok();
        tcp.set_read_timeout(Some(Duration::from_secs(600))).ok();
        let peer = tcp.peer_addr().map_err(|e| XferError::Connect {
            host: name.clone(),
            reason: e.to_string(),
        })?;
        let local = tcp.local_addr().map_err(|e| XferError::Connect {
            host: name.clone(),
            reason: e.to_string(),
        })?;
        let mut c = Control {
            stream: Box::new(tcp.try_clone().map_err(|e| XferError::io(&name, e))?),
            parser: ReplyParser::new(),
            peer,
            local,
            features: Features::default(),
            name,
        };
        let greet = c.reply()?;
        if greet.code != 220 {
            return Err(XferError::Protocol {
                host: c.name.clone(),
                reply: greet.to_string(),
            });
        }
        if let Some(t) = tls {
            c.expect(&Command::Auth("TLS".into()), 234)?;
            c.stream = t.wrap_control(tcp, &url.host).map_err(|e| XferError::Tls {
                host: c.name.clone(),
                reason: e.to_string(),
            })?;
            c.expect(&Command::Pbsz(0), 200)?;
            c.expect(&Command::Prot(haul_proto::command::ProtLevel::Private), 200)?;
        }
        let user = url.user.clone().unwrap_or_else(|| "anonymous".into());
        let pass = url.pass.clone().unwrap_or_else(|| "haul@".into());
        c.send(&Command::User(user.clone()))?;
        let r = c.reply()?;
        let r = if r.code == 331 {
            c.send(&Command::Pass(pass))?;
            c.reply()?
        } else {
            r
        };
        if r.code != 230 && r.code != 202 {
            return Err(if r.code == 530 {
                XferError::Auth {
                    host: c.name.clone(),
                    user,
                    reply: r.to_string(),
                }
            } else {
                XferError::Protocol {
                    host: c.name.clone(),
                    reply: r.to_string(),
                }
            });
        }
        c.send(&Command::Feat)?;
        let f = c.reply()?;
        if f.code == 211 {
            c.features = Features::parse(&f);
        }
        c.expect(
            &Command::Type(haul_proto::command::TransferType::Image),
            200,
        )?;
        Ok(c)
    }

    /// Writes one command.
    pub fn send(&mut self, cmd: &Command) -> Result<(), XferError> {
        let line = format!("{cmd}\r\n");
        tracing::debug!(host = %self.name, "> {}", if matches!(cmd, Command::Pass(_)) { "PASS ****" } else { line.trim_end() });
        self.stream
            .write_all(line.as_bytes())
            .map_err(|e| XferError::io(&self.name, e))?;
        self.stream
            .flush()
            .map_err(|e| XferError::io(&self.name, e))
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
