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
    /// Failed logins after which the session is closed (`421`, then [`ServerAction::Close`]).
    pub max_failures: u32,
}

impl Default for LoginConfig {
    /// No TLS, and the session closed after [`MAX_LOGIN_FAILURES`] failed logins.
    fn default() -> LoginConfig {
        LoginConfig {
            require_tls: false,
            tls_available: false,
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
    /// They are not: `530`, one more failure (at the limit also `421` and close). The driver
    /// waits its back-off before giving this verdict.
    Rejected,
    /// Good credentials, but the session may not go on (for example a per-user session limit):
    /// this reply, then close.
    Refused(Reply),
}

/// What the machine waits for before it handles the next command.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Wait {
    Nothing,
    Verdict(String),
    Handshake,
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

    /// True while a [`ServerAction::Verify`] waits for its verdict.
    pub fn is_verifying(&self) -> bool {
        matches!(self.wait, Wait::Verdict(_))
    }

    /// Feeds one command the client sent. Ignored once closed.
    pub fn handle_command(&mut self, cmd: Command) {
        match self.wait {
            Wait::Nothing => self.command(cmd),
            Wait::Verdict(_) => self.queued.push_back(cmd),
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

    /// The verdict on the credentials of the last [`ServerAction::Verify`]; then the commands
    /// that waited for it are handled. Ignored at any other time.
    pub fn handle_verified(&mut self, verdict: Verdict) {
        let Wait::Verdict(name) = &self.wait else {
            return;
        };
        let name = name.clone();
        self.wait = Wait::Nothing;
        match verdict {
            Verdict::Accepted => {
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
        while self.wait == Wait::Nothing {
            let Some(cmd) = self.queued.pop_front() else {
                break;
            };
            self.command(cmd);
        }
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
        if self.cfg.require_tls && !self.tls && matches!(cmd, Command::User(_) | Command::Pass(_)) {
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
            Command::Auth(mech) => self.auth(&mech),
            Command::Pbsz(_) => self.reply(200, "PBSZ=0"),
            Command::Prot(level) => self.prot(level),
            other => self.actions.push_back(ServerAction::Forward(other)),
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
        } else if self.tls {
            self.reply(503, "Control connection already protected by TLS.");
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
            ProtLevel::Private if self.tls => {
                self.prot_private = true;
                self.reply(200, "Protection level set to P.");
            }
            ProtLevel::Private => self.reply(503, "PROT P needs AUTH TLS first."),
            _ => self.reply(536, "Only PROT C and PROT P are supported."),
        }
    }
}
