//! [`Login`]: the client's session set-up, from the server's greeting to `TYPE I`.

use std::fmt;

use thiserror::Error;

use crate::command::{ProtLevel, TransferType};
use crate::{Command, Features, Reply};

/// How a haul server's greeting starts (`server::login::GREETING`).
const HAUL_GREETING: &str = "haul GridFTP server ";

/// A burst's steps in the order they go out: from `PBSZ` under TLS, from `USER` otherwise.
const BURST: [Step; 6] = [
    Step::Pbsz,
    Step::Prot,
    Step::User,
    Step::Pass,
    Step::Feat,
    Step::Type,
];

/// Something the driver must do outside the command / reply flow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// The server accepted `AUTH TLS` (234): perform the TLS handshake on the control
    /// connection, then call [`Login::tls_established`]. Bytes the driver read but has not yet
    /// handed over as replies must not exist at this point (they would be plaintext injected
    /// before the handshake).
    StartTls,
    /// The server accepted `AUTH GSSAPI` (334): start a GSS context as its initiator and hand
    /// its first token (base64) to [`Login::adat`].
    StartGss,
    /// The server answered an `ADAT` with 335 and this token (base64, possibly empty): step
    /// the context with it and hand the token it gives to [`Login::adat`].
    Adat(String),
    /// The server answered an `ADAT` with 235: the context is established on its side. Step
    /// the context with the final token (base64) if there is one, check that it is
    /// established on this side too, protect the control connection from here on (every
    /// command wrapped, every reply unwrapped), then call [`Login::gss_established`].
    GssDone(Option<String>),
}

/// Why a login failed. Each carries the server's reply.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum LoginError {
    /// The greeting was not 220 (nor 120 followed by 220): for example 421, service unavailable.
    #[error("unexpected greeting: {0}")]
    Greeting(Reply),
    /// The server rejected the credentials: 530 after `USER` or `PASS`.
    #[error("authentication failed: {0}")]
    Auth(Reply),
    /// A set-up command (`AUTH TLS`, `PBSZ`, `PROT`, `TYPE`) got a reply other than the one it
    /// needs.
    #[error("`{command}` refused: {reply}")]
    Refused {
        /// The command the server answered.
        command: Command,
        /// Its reply.
        reply: Reply,
    },
    /// A reply out of protocol: to `USER` / `PASS` something other than 230, 202, 331 or 530,
    /// or a reply when no command was outstanding (before the TLS handshake, after the login
    /// ended).
    #[error("unexpected reply: {0}")]
    Unexpected(Reply),
}

impl LoginError {
    /// The server's reply this error carries.
    pub fn reply(&self) -> &Reply {
        match self {
            LoginError::Greeting(r) | LoginError::Auth(r) | LoginError::Unexpected(r) => r,
            LoginError::Refused { reply, .. } => reply,
        }
    }
}

/// Where the login is: which reply it waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Greeting,
    AuthTls,
    AuthGss,
    /// Waiting for the driver's next `ADAT` token.
    GssToken,
    /// An `ADAT` is outstanding.
    Adat,
    /// 235 received: waiting for the driver to protect the control connection.
    GssProtect,
    /// 234 received: waiting for the driver's TLS handshake.
    Handshake,
    Pbsz,
    Prot,
    User,
    Pass,
    /// `USER` was answered 230 or 202 while the `PASS` sent with it is still to be answered.
    PassAfterLogin,
    Feat,
    Type,
    Done,
    Failed,
}

/// The client's session set-up machine.
///
/// In: the replies the driver reads ([`Login::handle_reply`]) and the end of the TLS
/// handshake ([`Login::tls_established`]). Out: the next command to write
/// ([`Login::poll_transmit`]), actions ([`Login::poll_action`]), and at the end the server's
/// [`Features`]. One command is outstanding at a time, but for `TYPE I`, which goes out with
/// `FEAT` (any server takes both once logged in, and it saves a round trip); 111 / 112 markers
/// are skipped after the greeting. A haul server (known by its greeting) gets the whole login
/// at once, `PBSZ` / `PROT` (TLS), `USER`, `PASS`, `FEAT` and `TYPE I` in one write: it queues
/// commands while it checks a password, so the login takes one round trip after the greeting
/// or the TLS handshake instead of three (five under TLS). GSI logins and other servers keep
/// the exchange above.
pub struct Login {
    user: String,
    pass: String,
    security: Security,
    step: Step,
    /// Commands due to be written, in order (`FEAT` and `TYPE I` go together).
    transmit: std::collections::VecDeque<Command>,
    /// Commands written whose final replies have not been read yet.
    in_flight: usize,
    /// The server is a haul server: the login goes out in one burst ([`Login`]).
    burst: bool,
    /// Steps whose commands went out ahead, with the burst: entering them sends nothing.
    sent_ahead: Vec<Step>,
    action: Option<Action>,
    features: Features,
    /// The server's `211` answer to `FEAT`, as it came.
    feat_reply: Option<Reply>,
}

impl fmt::Debug for Login {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Login")
            .field("user", &self.user)
            .field("security", &self.security)
            .field("step", &self.step)
            .field("features", &self.features)
            .finish_non_exhaustive()
    }
}

/// How the control connection is secured before the login.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Security {
    Plain,
    /// RFC 4217: `AUTH TLS`, `PBSZ 0`, `PROT P`.
    Tls,
    /// RFC 2228 with Globus's GSSAPI (`gsiftp://`): `AUTH GSSAPI`, `ADAT` until 235.
    Gsi,
}

impl Login {
    /// A login as `user` / `pass`, upgrading the control connection to TLS first when `tls`.
    pub fn new(user: impl Into<String>, pass: impl Into<String>, tls: bool) -> Login {
        let security = if tls { Security::Tls } else { Security::Plain };
        Login::with(user.into(), pass.into(), security)
    }

    /// A `gsiftp://` login: `AUTH GSSAPI` and the `ADAT` exchange (the driver runs the GSS
    /// context, see [`Action::StartGss`]), then `USER` / `PASS` on the protected connection.
    /// Globus clients send `:globus-mapping:` as the user when none is named, letting the
    /// server pick the account the grid-mapfile gives the certificate's identity.
    pub fn gsi(user: Option<String>, pass: Option<String>) -> Login {
        let user = user.unwrap_or_else(|| ":globus-mapping:".into());
        Login::with(user, pass.unwrap_or_else(|| "dummy".into()), Security::Gsi)
    }

    fn with(user: String, pass: String, security: Security) -> Login {
        Login {
            user,
            pass,
            security,
            step: Step::Greeting,
            transmit: Default::default(),
            in_flight: 0,
            burst: false,
            sent_ahead: Vec::new(),
            action: None,
            features: Features::default(),
            feat_reply: None,
        }
    }

    /// The next command to write, if one is due.
    pub fn poll_transmit(&mut self) -> Option<Command> {
        let c = self.transmit.pop_front();
        self.in_flight += usize::from(c.is_some());
        c
    }

    /// The next action for the driver, if one is due.
    pub fn poll_action(&mut self) -> Option<Action> {
        self.action.take()
    }

    /// The driver finished the TLS handshake that [`Action::StartTls`] asked for. Ignored at any
    /// other time.
    pub fn tls_established(&mut self) {
        if self.step == Step::Handshake && self.action.is_none() {
            self.enter(Step::Pbsz);
        }
    }

    /// The driver's next GSS token (base64) for the server: the first after
    /// [`Action::StartGss`], then one after each [`Action::Adat`]. Ignored at any other time.
    pub fn adat(&mut self, token: String) {
        if self.step == Step::GssToken && self.action.is_none() {
            self.step = Step::Adat;
            self.transmit.push_back(Command::Adat(token));
        }
    }

    /// The driver protects the control connection as [`Action::GssDone`] asked. Ignored at
    /// any other time.
    pub fn gss_established(&mut self) {
        if self.step == Step::GssProtect && self.action.is_none() {
            self.enter(Step::User);
        }
    }

    /// Whether the server is a haul server, which takes the whole login in one write (and
    /// reads whatever follows it in that write once the login is done).
    pub fn is_burst(&self) -> bool {
        self.burst
    }

    /// True once `TYPE I` was accepted: the session is ready.
    pub fn is_done(&self) -> bool {
        self.step == Step::Done
    }

    /// True once the login failed; it sends nothing more.
    pub fn is_failed(&self) -> bool {
        self.step == Step::Failed
    }

    /// What the server's FEAT reply offered (empty until FEAT was answered, or when it was not
    /// answered with 211).
    pub fn features(&self) -> &Features {
        &self.features
    }

    /// The server's `211` reply to the login's `FEAT`, for a relay to pass on as it came.
    pub fn feat_reply(&self) -> Option<&Reply> {
        self.feat_reply.as_ref()
    }

    /// The user name this login sends.
    pub fn user(&self) -> &str {
        &self.user
    }

    /// Feeds one reply read from the server. An error ends the login.
    pub fn handle_reply(&mut self, r: Reply) -> Result<(), LoginError> {
        let res = self.step_on(r);
        if res.is_err() {
            self.step = Step::Failed;
            self.transmit.clear();
            self.action = None;
        }
        res
    }

    fn step_on(&mut self, r: Reply) -> Result<(), LoginError> {
        // A reply to a command not yet written, or during the TLS handshake, answers nothing.
        let waiting = (self.step == Step::Greeting || self.in_flight > 0) && self.action.is_none();
        let answers_a_command =
            self.command_of(self.step).is_some() || self.step == Step::PassAfterLogin;
        if waiting && answers_a_command && matches!(r.code, 111 | 112) {
            return Ok(());
        }
        if waiting && self.step != Step::Greeting && r.code >= 200 {
            self.in_flight -= 1;
        }
        match self.step {
            _ if !waiting => Err(LoginError::Unexpected(r)),
            Step::Greeting => match r.code {
                120 => Ok(()),
                220 => {
                    self.burst =
                        self.security != Security::Gsi && r.text().starts_with(HAUL_GREETING);
                    self.enter(match self.security {
                        Security::Plain => Step::User,
                        Security::Tls => Step::AuthTls,
                        Security::Gsi => Step::AuthGss,
                    });
                    Ok(())
                }
                _ => Err(LoginError::Greeting(r)),
            },
            Step::AuthTls => self.expect(r, 234, Step::Handshake),
            Step::AuthGss => self.expect(r, 334, Step::GssToken),
            Step::Adat => {
                let token = adat_token(&r);
                match r.code {
                    335 => {
                        self.step = Step::GssToken;
                        self.action = Some(Action::Adat(token.unwrap_or_default()));
                        Ok(())
                    }
                    235 => {
                        self.step = Step::GssProtect;
                        self.action = Some(Action::GssDone(token));
                        Ok(())
                    }
                    _ => Err(LoginError::Refused {
                        command: Command::Adat("…".into()),
                        reply: r,
                    }),
                }
            }
            Step::Pbsz => self.expect(r, 200, Step::Prot),
            Step::Prot => self.expect(r, 200, Step::User),
            Step::User | Step::Pass => match r.code {
                331 if self.step == Step::User => {
                    self.enter(Step::Pass);
                    Ok(())
                }
                // The `PASS` sent with the burst is still to be answered.
                230 | 202 if self.step == Step::User && self.sent_ahead.contains(&Step::Pass) => {
                    self.step = Step::PassAfterLogin;
                    Ok(())
                }
                230 | 202 => {
                    self.enter(Step::Feat);
                    Ok(())
                }
                530 => Err(LoginError::Auth(r)),
                _ => Err(LoginError::Unexpected(r)),
            },
            // Logged in already: a `PASS` too many is answered 503, or 230 again.
            Step::PassAfterLogin => match r.code {
                200..=299 | 503 => {
                    self.enter(Step::Feat);
                    Ok(())
                }
                _ => Err(LoginError::Unexpected(r)),
            },
            Step::Feat => {
                // Any answer but 211 means no features; the login goes on.
                if r.code == 211 {
                    self.features = Features::parse(&r);
                    self.feat_reply = Some(r);
                }
                // `TYPE I` went out with `FEAT` (queued by `enter`): one round trip for both.
                self.step = Step::Type;
                Ok(())
            }
            Step::Type => self.expect(r, 200, Step::Done),
            Step::Handshake | Step::GssToken | Step::GssProtect | Step::Done | Step::Failed => {
                Err(LoginError::Unexpected(r))
            }
        }
    }

    /// Moves to `next` on reply `code`, else fails with the command of the current step.
    fn expect(&mut self, r: Reply, code: u16, next: Step) -> Result<(), LoginError> {
        if r.code != code {
            let command = self.command_of(self.step).unwrap_or(Command::Noop);
            return Err(LoginError::Refused { command, reply: r });
        }
        self.enter(next);
        Ok(())
    }

    /// Enters `step`, queueing its command or action (none when it went out with the burst).
    fn enter(&mut self, step: Step) {
        self.step = step;
        if self.sent_ahead.contains(&step) {
            return;
        }
        if self.burst && matches!(step, Step::Pbsz | Step::User) {
            let from = BURST.iter().position(|s| *s == step).unwrap_or(0);
            let steps = &BURST[from..];
            let burst: Vec<Command> = steps.iter().filter_map(|s| self.command_of(*s)).collect();
            self.transmit.extend(burst);
            self.sent_ahead = steps[1..].to_vec();
            return;
        }
        self.transmit.extend(self.command_of(step));
        if step == Step::Feat {
            self.transmit.extend(self.command_of(Step::Type));
        }
        if step == Step::Handshake {
            self.action = Some(Action::StartTls);
        }
        if step == Step::GssToken {
            self.action = Some(Action::StartGss);
        }
    }

    /// The command a step sends.
    fn command_of(&self, step: Step) -> Option<Command> {
        Some(match step {
            Step::AuthTls => Command::Auth("TLS".into()),
            Step::AuthGss => Command::Auth("GSSAPI".into()),
            Step::Adat => Command::Adat("…".into()),
            Step::Pbsz => Command::Pbsz(0),
            Step::Prot => Command::Prot(ProtLevel::Private),
            Step::User => Command::User(self.user.clone()),
            Step::Pass => Command::Pass(self.pass.clone()),
            Step::Feat => Command::Feat,
            Step::Type => Command::Type(TransferType::Image),
            Step::Greeting
            | Step::PassAfterLogin
            | Step::Handshake
            | Step::GssToken
            | Step::GssProtect
            | Step::Done
            | Step::Failed => return None,
        })
    }
}

/// The token of a 335 / 235 reply to `ADAT`: the text after `ADAT=` (RFC 2228), if any.
fn adat_token(r: &Reply) -> Option<String> {
    let text = r.text();
    let at = text.find("ADAT=")?;
    let token: String = text[at + 5..]
        .chars()
        .take_while(|c| !c.is_whitespace())
        .collect();
    Some(token)
}
