//! [`Login`]: the server's session set-up, from the greeting to `230`, and the login family of
//! commands (`USER`, `PASS`, `AUTH`, `PBSZ`, `PROT`, `QUIT`) for the rest of the session.

use std::collections::VecDeque;
use std::fmt;

use crate::command::ProtLevel;
use crate::{Command, Reply};

/// The server's greeting (code 220).
pub const GREETING: &str = concat!("haul GridFTP server ", env!("CARGO_PKG_VERSION"), " ready.");

/// Failed logins after which the session is closed, by default.
pub const MAX_LOGIN_FAILURES: u32 = 3;

/// What the login machine needs to know about the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoginConfig {
    /// Refuse `USER` and `PASS` on a control connection that is not protected by TLS.
    pub require_tls: bool,
    /// The server has a certificate, so `AUTH TLS` is offered.
    pub tls_available: bool,
    /// The server has a GSI host credential, so `AUTH GSSAPI` is offered.
    pub gsi_available: bool,
    /// Failed logins after which the session is closed (`421`, then [`ServerAction::Close`]).
    pub max_failures: u32,
}

impl Default for LoginConfig {
    /// No TLS, and the session closed after [`MAX_LOGIN_FAILURES`] failed logins.
    fn default() -> LoginConfig {
        LoginConfig {
            require_tls: false,
            tls_available: false,
            gsi_available: false,
            max_failures: MAX_LOGIN_FAILURES,
        }
    }
}

/// Something the driver must do.
#[derive(Clone, PartialEq, Eq)]
pub enum ServerAction {
    /// Write this reply.
    Reply(Reply),
    /// The `234` to `AUTH TLS` has been queued before this: write it, then perform the TLS
    /// handshake on the control connection and call [`Login::tls_established`] (or
    /// [`Login::tls_failed`]). Clear-text commands the client pipelined after `AUTH TLS` must not
    /// be handed over as commands; one handed over before the handshake ends closes the session.
    StartTls,
    /// The `334` to `AUTH GSSAPI` has been queued before this: start a new GSS acceptor
    /// context (dropping any half-done one). Its tokens come as [`ServerAction::Adat`].
    StartGss,
    /// Step the GSS context with this base64 token (from `ADAT`), then call
    /// [`Login::adat_result`]. Commands handed over meanwhile wait in the machine.
    Adat(String),
    /// The `235` ending the GSS exchange has been queued before this: write it in clear, then
    /// protect the control connection with the context (every later command and reply is
    /// wrapped, RFC 2228).
    ProtectControl,
    /// Check these credentials (possibly slowly, possibly off-thread; anonymous names and the
    /// back-off after a failure are the driver's policy), then call [`Login::handle_verified`].
    /// Commands handed over meanwhile wait in the machine.
    Verify {
        /// The name from `USER`.
        user: String,
        /// The password from `PASS`.
        pass: String,
    },
    /// A command outside the login family that may run now (before the login: `FEAT`, `SYST`,
    /// `NOOP`, `HELP`, `OPTS`; after it: every such command): the driver answers it.
    Forward(Command),
    /// Write this reply, which may wait in the output buffer until the next command is read or
    /// another reply written: a transfer's `226`, which then shares a packet with what follows.
    Defer(Reply),
    /// Drop the cached MODE E data connections (the mode changed); keep the set-up.
    DropCached,
    /// Drop every data connection and the `PORT` / `PASV` set-up (a refused `PORT`).
    DropData,
    /// Drop every data connection and set-up; the next transfers connect to these addresses
    /// (`PORT`, `EPRT`, `SPOR`, already checked against [`super::Peers`]).
    Active(Vec<std::net::SocketAddr>),
    /// Drop every data connection and set-up, listen for new ones, and report the address with
    /// [`super::Transfers::listening`] (`PASV`, `EPSV`, `SPAS`).
    Listen(super::Passive),
    /// Run this transfer: refuse it ([`super::Outcome::Refused`]) or call
    /// [`super::Transfers::transfer_opening`] before any data moves, then report its end with
    /// [`super::Transfers::transfer_done`]. Commands other than `ABOR` wait meanwhile.
    Transfer(super::Transfer),
    /// The client sent `ABOR`: cut the running transfer short (its outcome still follows).
    Abort,
    /// End the session (after `QUIT`'s `221`, the failed-login limit, a refused session or a
    /// failed TLS handshake). Nothing follows.
    Close,
}

impl fmt::Debug for ServerAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServerAction::Reply(r) => f.debug_tuple("Reply").field(r).finish(),
            ServerAction::StartTls => f.write_str("StartTls"),
            ServerAction::StartGss => f.write_str("StartGss"),
            ServerAction::Adat(_) => f.write_str("Adat(..)"),
            ServerAction::ProtectControl => f.write_str("ProtectControl"),
            ServerAction::Verify { user, .. } => f
                .debug_struct("Verify")
                .field("user", user)
                .field("pass", &"****")
                .finish(),
            ServerAction::Forward(c) => f.debug_tuple("Forward").field(c).finish(),
            ServerAction::Defer(r) => f.debug_tuple("Defer").field(r).finish(),
            ServerAction::DropCached => f.write_str("DropCached"),
            ServerAction::DropData => f.write_str("DropData"),
            ServerAction::Active(a) => f.debug_tuple("Active").field(a).finish(),
            ServerAction::Listen(k) => f.debug_tuple("Listen").field(k).finish(),
            ServerAction::Transfer(t) => f.debug_tuple("Transfer").field(t).finish(),
            ServerAction::Abort => f.write_str("Abort"),
            ServerAction::Close => f.write_str("Close"),
        }
    }
}

/// The driver's answer to [`ServerAction::Verify`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The credentials are good: `230`, the session is logged in.
    Accepted,
    /// Good credentials for this account (a GSI identity mapped to it): `230`, logged in as it.
    AcceptedAs(String),
    /// They are not: `530`, one more failure (at the limit also `421` and close). The driver
    /// waits its back-off before giving this verdict.
    Rejected,
    /// Good credentials, but the session may not go on (for example a per-user session limit):
    /// this reply, then close.
    Refused(Reply),
}

/// The driver's answer to [`ServerAction::Adat`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdatReply {
    /// More tokens are needed: `335 ADAT=<token>`.
    Continue(String),
    /// The context is established: `235`, with the last token if there is one.
    Done(Option<String>),
    /// The exchange failed: `535` with the reason; the client may start again with `AUTH`.
    Failed(String),
}

/// What the machine waits for before it handles the next command.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Wait {
    Nothing,
    Verdict(String),
    Handshake,
    Adat,
    Closed,
}

/// The server's login machine.
///
/// In: the commands the driver read ([`Login::handle_command`]), the end of the TLS handshake
/// ([`Login::tls_established`], [`Login::tls_failed`]) and the credential check's outcome
/// ([`Login::handle_verified`]). Out: [`ServerAction`]s ([`Login::poll_action`]), first the
/// `220` greeting. Every command handed over gets exactly one reply, `Verify` (whose verdict
/// gets the reply) or `Forward`, unless the session closed first.
pub struct Login {
    cfg: LoginConfig,
    actions: VecDeque<ServerAction>,
    /// Commands handed over while waiting for a verdict.
    queued: VecDeque<Command>,
    wait: Wait,
    /// The name of the last `USER`, until `PASS` takes it.
    pending_user: Option<String>,
    user: Option<String>,
    tls: bool,
    /// `AUTH GSSAPI` answered, ADAT tokens expected.
    gss_started: bool,
    /// The control connection is protected by a GSS context.
    gsi: bool,
    prot_private: bool,
    failures: u32,
}

impl fmt::Debug for Login {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Login")
            .field("cfg", &self.cfg)
            .field("wait", &self.wait)
            .field("user", &self.user)
            .field("tls", &self.tls)
            .field("failures", &self.failures)
            .finish_non_exhaustive()
    }
}

impl Login {
    /// A new session; the greeting is the first action.
    pub fn new(cfg: LoginConfig) -> Login {
        Login {
            cfg,
            actions: VecDeque::from([ServerAction::Reply(Reply::new(220, GREETING))]),
            queued: VecDeque::new(),
            wait: Wait::Nothing,
            pending_user: None,
            user: None,
            tls: false,
            gss_started: false,
            gsi: false,
            prot_private: false,
            failures: 0,
        }
    }

    /// The next action for the driver, if one is due.
    pub fn poll_action(&mut self) -> Option<ServerAction> {
        self.actions.pop_front()
    }

    /// The logged-in user's name, once logged in.
    pub fn user(&self) -> Option<&str> {
        self.user.as_deref()
    }

    /// True once a login was accepted.
    pub fn is_logged_in(&self) -> bool {
        self.user.is_some()
    }

    /// True once the control connection is protected by TLS.
    pub fn is_tls(&self) -> bool {
        self.tls
    }

    /// True once the control connection is protected by a GSS context (GSI).
    pub fn is_gsi(&self) -> bool {
        self.gsi
    }

    /// True after `PROT P` (data connections protected by TLS), false after `PROT C`.
    pub fn prot_private(&self) -> bool {
        self.prot_private
    }

    /// Failed logins in this session so far (the driver's back-off may count them).
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// True once the session closed: no more actions come.
    pub fn is_closed(&self) -> bool {
        self.wait == Wait::Closed
    }

    /// True while a [`ServerAction::Verify`] or [`ServerAction::Adat`] waits for its answer.
    pub fn is_verifying(&self) -> bool {
        matches!(self.wait, Wait::Verdict(_) | Wait::Adat)
    }

    /// Feeds one command the client sent. Ignored once closed.
    pub fn handle_command(&mut self, cmd: Command) {
        match self.wait {
            Wait::Nothing => self.command(cmd),
            Wait::Verdict(_) | Wait::Adat => self.queued.push_back(cmd),
            // Clear text pipelined after AUTH TLS: the session ends, as the real server does.
            Wait::Handshake => self.close(),
            Wait::Closed => {}
        }
    }

    /// The TLS handshake asked for by [`ServerAction::StartTls`] succeeded. Ignored at any other
    /// time.
    pub fn tls_established(&mut self) {
        if self.wait == Wait::Handshake {
            self.tls = true;
            self.wait = Wait::Nothing;
        }
    }

    /// The TLS handshake failed: the session closes, without a reply. Ignored at any other time.
    pub fn tls_failed(&mut self) {
        if self.wait == Wait::Handshake {
            self.close();
        }
    }

    /// The outcome of the last [`ServerAction::Adat`]; then the commands that waited for it are
    /// handled. Ignored at any other time.
    pub fn adat_result(&mut self, r: AdatReply) {
        if self.wait != Wait::Adat {
            return;
        }
        self.wait = Wait::Nothing;
        match r {
            AdatReply::Continue(t) => self.reply(335, format!("ADAT={t}")),
            AdatReply::Done(t) => {
                match t {
                    Some(t) => self.reply(235, format!("ADAT={t}")),
                    None => self.reply(235, "GSSAPI Authentication successful."),
                }
                self.gss_started = false;
                self.gsi = true;
                self.actions.push_back(ServerAction::ProtectControl);
            }
            AdatReply::Failed(why) => {
                self.gss_started = false;
                self.failures += 1;
                self.reply(535, format!("GSSAPI authentication failed: {why}"));
                if self.failures >= self.cfg.max_failures {
                    self.reply(421, "Too many failed logins; closing control connection.");
                    self.close();
                }
            }
        }
        self.run_queued();
    }

    fn run_queued(&mut self) {
        while self.wait == Wait::Nothing {
            let Some(cmd) = self.queued.pop_front() else {
                break;
            };
            self.command(cmd);
        }
    }

    /// The verdict on the credentials of the last [`ServerAction::Verify`]; then the commands
    /// that waited for it are handled. Ignored at any other time.
    pub fn handle_verified(&mut self, verdict: Verdict) {
        let Wait::Verdict(name) = &self.wait else {
            return;
        };
        let name = name.clone();
        self.wait = Wait::Nothing;
        match verdict {
            Verdict::Accepted | Verdict::AcceptedAs(_) => {
                let name = match verdict {
                    Verdict::AcceptedAs(account) => account,
                    _ => name,
                };
                self.reply(230, format!("User {name} logged in."));
                self.user = Some(name);
            }
            Verdict::Rejected => {
                self.failures += 1;
                self.reply(530, "Login incorrect.");
                if self.failures >= self.cfg.max_failures {
                    self.reply(421, "Too many failed logins; closing control connection.");
                    self.close();
                }
            }
            Verdict::Refused(r) => {
                self.actions.push_back(ServerAction::Reply(r));
                self.close();
            }
        }
        self.run_queued();
    }

    fn reply(&mut self, code: u16, text: impl Into<String>) {
        self.actions
            .push_back(ServerAction::Reply(Reply::new(code, text)));
    }

    fn close(&mut self) {
        self.wait = Wait::Closed;
        self.queued.clear();
        self.actions.push_back(ServerAction::Close);
    }

    /// Handles one command with nothing to wait for.
    fn command(&mut self, cmd: Command) {
        let logged_in = self.user.is_some();
        let before_login = matches!(
            cmd,
            Command::User(_)
                | Command::Pass(_)
                | Command::Auth(_)
                | Command::Adat(_)
                | Command::Pbsz(_)
                | Command::Prot(_)
                | Command::Feat
                | Command::Syst
                | Command::Noop
                | Command::Quit
                | Command::Help(_)
                | Command::Opts { .. }
        );
        if !logged_in && !before_login {
            return self.reply(530, "Please login with USER and PASS.");
        }
        if self.cfg.require_tls
            && !self.tls
            && !self.gsi
            && matches!(cmd, Command::User(_) | Command::Pass(_))
        {
            return self.reply(
                530,
                "This server requires TLS: send AUTH TLS before logging in.",
            );
        }
        match cmd {
            Command::User(_) | Command::Pass(_) if logged_in => {
                self.reply(503, "Already logged in.")
            }
            Command::User(name) => {
                self.reply(331, format!("Password required for {name}."));
                self.pending_user = Some(name);
            }
            Command::Pass(pass) => match self.pending_user.take() {
                None => self.reply(503, "Login with USER first."),
                Some(user) => {
                    self.wait = Wait::Verdict(user.clone());
                    self.actions.push_back(ServerAction::Verify { user, pass });
                }
            },
            Command::Quit => {
                self.reply(221, "Goodbye.");
                self.close();
            }
            Command::Auth(mech) if mech == "GSSAPI" => self.auth_gssapi(),
            Command::Auth(mech) => self.auth(&mech),
            Command::Adat(token) if self.gss_started => {
                self.wait = Wait::Adat;
                self.actions.push_back(ServerAction::Adat(token));
            }
            Command::Adat(_) => self.reply(503, "ADAT needs AUTH GSSAPI first."),
            // Under GSI the buffer size bounds wrapped data blocks; haul takes any.
            Command::Pbsz(n) if self.gsi => self.reply(200, format!("PBSZ={n}")),
            Command::Pbsz(_) => self.reply(200, "PBSZ=0"),
            Command::Prot(level) => self.prot(level),
            other => self.actions.push_back(ServerAction::Forward(other)),
        }
    }

    /// `AUTH GSSAPI` (RFC 2228 with Globus's GSI mechanism).
    fn auth_gssapi(&mut self) {
        if !self.cfg.gsi_available {
            self.reply(
                504,
                "AUTH GSSAPI not available: this server has no GSI host credential.",
            );
        } else if self.gsi || self.tls {
            self.reply(503, "Control connection already protected.");
        } else {
            self.reply(334, "Using authentication type GSSAPI; ADAT must follow.");
            self.gss_started = true;
            self.actions.push_back(ServerAction::StartGss);
        }
    }

    fn auth(&mut self, mech: &str) {
        if !self.cfg.tls_available {
            self.reply(
                502,
                "AUTH not available: this server has no TLS certificate.",
            );
        } else if mech != "TLS" && mech != "TLS-C" && mech != "SSL" {
            self.reply(504, format!("AUTH {mech} not supported; use AUTH TLS."));
        } else if self.tls || self.gsi {
            self.reply(503, "Control connection already protected.");
        } else if !self.queued.is_empty() {
            // Commands the client pipelined after AUTH TLS, still in clear text.
            self.reply(234, "AUTH TLS successful.");
            self.close();
        } else {
            self.reply(234, "AUTH TLS successful.");
            self.actions.push_back(ServerAction::StartTls);
            self.wait = Wait::Handshake;
        }
    }

    fn prot(&mut self, level: ProtLevel) {
        match level {
            ProtLevel::Clear => {
                self.prot_private = false;
                self.reply(200, "Protection level set to C.");
            }
            ProtLevel::Private if self.tls || self.gsi => {
                self.prot_private = true;
                self.reply(200, "Protection level set to P.");
            }
            // Globus protects both S and P data with TLS records.
            ProtLevel::Safe if self.gsi => {
                self.prot_private = true;
                self.reply(200, "Protection level set to S.");
            }
            ProtLevel::Private => self.reply(503, "PROT P needs AUTH TLS or GSSAPI first."),
            ProtLevel::Safe => self.reply(536, "PROT S needs GSSAPI (gsiftp)."),
            _ => self.reply(536, "Only PROT C, S (GSI) and P are supported."),
        }
    }
}
