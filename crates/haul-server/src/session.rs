//! One control session: login, then commands processed strictly in order (pipelined lines
//! wait in the line buffer while a transfer runs), with replies that name the cause of every
//! failure. `dispatch` hands each command to haul-proto's `server::Session` machine, which
//! answers the login family (USER, PASS, AUTH, PBSZ, PROT, QUIT), refuses what needs a login
//! first, and answers the data-transfer family (the settings of the next transfer, PORT / PASV
//! and their kin, and each transfer's reply sequence, ABOR included). `login` performs its
//! actions (the TLS upgrade, the password check with its back-off), `data` its data-channel
//! actions (listeners, transfers, which run in `transfer` and `upload`), and `route` sends what it
//! forwards to its family: `feat` (FEAT, OPTS, SITE, HELP and the other commands about the
//! server), `fs` (the file-system commands, with `cksm` for CKSM and `attrs` for MFMT and the
//! `SITE` commands that change a file's attributes) and PLUT's transfers (`plut_transfer`),
//! which it runs itself.

mod attrs;
mod cksm;
mod data;
mod feat;
mod fs;
mod login;
mod relay;

use std::collections::HashMap;
use std::io;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Instant;

use haul_proto::server::{DataConfig, LoginConfig};
use haul_proto::{Command, CommandError};

use crate::auth::{Access, Users};
use crate::config::ServerConfig;
use crate::control::{Control, Input};
use crate::datachan::DataState;
use crate::ops::Live;
use crate::vfs::Root;

pub use cksm::{FileId, KnownChunks, KnownDigest};

/// State shared by every session of a server.
pub struct Shared {
    /// The configuration.
    pub cfg: ServerConfig,
    /// The served root.
    pub vfs: Root,
    /// What `SIGHUP` reloads (users, TLS); each session reads it afresh when it needs it, so a
    /// reload changes later logins and handshakes and no running session.
    pub live: std::sync::RwLock<Arc<Live>>,
    /// Set when the server drains: sessions close after their running transfer.
    pub draining: std::sync::atomic::AtomicBool,
    /// Where the next data port of `--data-ports` is looked for.
    pub next_port: std::sync::atomic::AtomicU32,
    /// The files being uploaded, one writer each.
    pub writers: crate::upload::Writers,
    /// Recent failed logins by address.
    pub failures: Failures,
    /// Logged-in sessions by named user.
    pub per_user: Mutex<HashMap<String, usize>>,
}

impl Shared {
    /// The reloadable parts in force now.
    pub fn live(&self) -> Arc<Live> {
        self.live.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The named users in force now.
    pub fn users(&self) -> Arc<Users> {
        self.live().users.clone()
    }

    /// The TLS configuration in force now, if AUTH TLS is offered.
    pub fn tls(&self) -> Option<Arc<rustls::ServerConfig>> {
        self.live().tls.clone()
    }

    /// The GSI material in force now, if AUTH GSSAPI is offered.
    pub fn gsi(&self) -> Option<Arc<crate::gsi::GsiServer>> {
        self.live().gsi.clone()
    }

    /// Tells the configured log (the metrics) of `e`.
    pub fn event(&self, e: crate::journal::ServerEvent) {
        if let Some(j) = &self.cfg.journal {
            j.event(e);
        }
    }

    /// Whether the server is draining.
    pub fn draining(&self) -> bool {
        self.draining.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// Whether the session goes on after a command.
#[derive(PartialEq, Eq)]
pub enum Flow {
    /// Read the next command.
    Continue,
    /// Close the session.
    Close,
}

/// One control session's state.
pub struct Session<'a> {
    pub(crate) shared: &'a Shared,
    pub(crate) ctl: Control,
    /// The session machine: greeting, login family, refusals before the login, the settings
    /// and reply sequence of transfers.
    pub(crate) machine: haul_proto::server::Session,
    pub(crate) access: Option<Access>,
    anonymous: bool,
    pub(crate) cwd: String,
    pub(crate) data: DataState,
    rename_from: Option<String>,
    pub(crate) plut: crate::plut_transfer::PlutState,
    /// The digest of the file just sent or received, computed from the bytes as they went by,
    /// for the `CKSM` the client pipelined after its `RETR` or `STOR`.
    pub(crate) known_digest: Option<KnownDigest>,
    /// The XXHC chunk digests of the file last sent or received whole, for `CKSM XXHC-LIST`
    /// after a mismatch.
    pub(crate) known_chunks: Option<KnownChunks>,
    /// The client's address.
    peer: IpAddr,
    /// When the client must be logged in by.
    login_by: Instant,
    /// The data-connection token, once the client asked for one (`DTOK`).
    pub(crate) data_token: Option<haul_transport::token::DataToken>,
    /// A named user's place among its sessions, held while logged in.
    user_slot: Option<login::UserSlot<'a>>,
    /// The login name, once logged in.
    pub(crate) user_name: String,
    /// The next hop of the commands on nested URLs, kept for the next one (relays only).
    pub(crate) hop: Option<Box<dyn crate::relay::Hop>>,
    /// What the running transfer moved, for its record.
    pub(crate) meter: data::Meter,
    /// The next leg's settings the client asked for (`OPTS RELAY`), relays only.
    pub(crate) next_leg: haul_proto::nested::NextLeg,
    /// GSI: the context of an `AUTH GSSAPI` exchange under way, the client it authenticated,
    /// and its data connections' TLS configurations (with the delegated credential).
    pub(crate) gsi: login::GsiState,
}

/// How often a session waiting for a command looks whether the server drains.
const DRAIN_POLL: std::time::Duration = std::time::Duration::from_millis(250);

/// While the server drains, how long a session may wait for its client's next command.
const DRAIN_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// The reply that closes a session of a draining server.
const DRAINING: &str =
    "Server shutting down; reconnect later (transfers resume from restart markers).";

/// Whether `cmd` starts a transfer, which a draining server refuses.
fn starts_transfer(cmd: &Command) -> bool {
    matches!(
        cmd,
        Command::Retr(_)
            | Command::Eret { .. }
            | Command::Stor(_)
            | Command::Esto { .. }
            | Command::Appe(_)
            | Command::List(_)
            | Command::Nlst(_)
            | Command::Mlsd(_)
    )
}

/// Failed logins per client address, for the back-off: (count, time of the last).
pub type Failures = Mutex<HashMap<IpAddr, (u32, Instant)>>;

/// `virt: cause` for a failed file-system operation, in the words of `strerror`, and the
/// confinement's own words for what it refused.
pub fn fs_error(virt: &str, e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::EXDEV) => return format!("{virt}: outside the served root"),
        Some(libc::ELOOP) => {
            return format!("{virt}: a symbolic link (never written through or replaced)")
        }
        _ => {}
    }
    match e.kind() {
        io::ErrorKind::NotFound => format!("{virt}: No such file or directory"),
        io::ErrorKind::PermissionDenied => format!("{virt}: Permission denied"),
        io::ErrorKind::AlreadyExists => format!("{virt}: File exists"),
        _ => format!("{virt}: {e}"),
    }
}

impl<'a> Session<'a> {
    /// Whether `PROT P` is in force (the login machine keeps it).
    pub(crate) fn prot_private(&self) -> bool {
        self.machine.login_state().prot_private()
    }

    /// A new session on an accepted control connection.
    pub fn new(shared: &'a Shared, ctl: Control) -> io::Result<Session<'a>> {
        let peer = ctl.peer_ip()?;
        let login = LoginConfig {
            require_tls: shared.cfg.require_tls,
            tls_available: shared.tls().is_some(),
            gsi_available: shared.gsi().is_some(),
            max_failures: haul_proto::server::MAX_LOGIN_FAILURES,
        };
        let data = DataConfig {
            max_parallelism: shared.cfg.max_parallelism,
            require_tls: shared.cfg.require_tls,
        };
        let machine = haul_proto::server::Session::new(login, data, peer);
        Ok(Session {
            shared,
            ctl,
            machine,
            access: None,
            anonymous: false,
            cwd: "/".to_string(),
            data: DataState::default(),
            rename_from: None,
            plut: Default::default(),
            known_digest: None,
            known_chunks: None,
            peer,
            login_by: Instant::now() + shared.cfg.login_timeout,
            data_token: None,
            user_slot: None,
            user_name: String::new(),
            hop: None,
            meter: Default::default(),
            next_leg: Default::default(),
            gsi: Default::default(),
        })
    }

    /// Greets the client and serves commands until QUIT, close, idle timeout or a fatal error;
    /// gives back the control connection for the caller to close.
    pub fn run(mut self) -> io::Result<Control> {
        // The greeting.
        if self.perform()? == Flow::Close {
            return Ok(self.ctl);
        }
        let cfg = &self.shared.cfg;
        let login_by = self.login_by;
        loop {
            let idle_by = Instant::now() + cfg.idle_timeout;
            let deadline = if self.access.is_none() {
                idle_by.min(login_by)
            } else {
                idle_by
            };
            let Some(input) = self.next_input(deadline)? else {
                let _ = self.ctl.reply(421, DRAINING);
                break;
            };
            let line = match input {
                Input::Line(l) => l,
                Input::Closed => break,
                Input::Idle if self.access.is_none() && Instant::now() >= login_by => {
                    let secs = cfg.login_timeout.as_secs();
                    tracing::warn!(peer = %self.peer, "login timeout");
                    let _ = self.ctl.reply(
                        421,
                        format!("Login timeout ({secs} s): closing control connection."),
                    );
                    break;
                }
                Input::Idle => {
                    let secs = cfg.idle_timeout.as_secs();
                    let _ = self.ctl.reply(
                        421,
                        format!("Idle timeout ({secs} s): closing control connection."),
                    );
                    break;
                }
                Input::TooLong => {
                    let max = haul_proto::MAX_LINE;
                    let _ = self.ctl.reply(
                        500,
                        format!("Command line too long (limit {max} bytes); closing."),
                    );
                    break;
                }
                Input::NotUtf8 => {
                    self.ctl.reply(500, "Command line is not valid UTF-8.")?;
                    continue;
                }
                Input::Unprotected => {
                    self.ctl.reply(
                        533,
                        "Command protection level denied: send commands as ENC or MIC under GSSAPI.",
                    )?;
                    continue;
                }
                Input::BadToken(why) => {
                    tracing::warn!(peer = %self.peer, error = %why, "protected command refused");
                    let _ = self
                        .ctl
                        .reply(535, format!("Protected command refused ({why}); closing."));
                    break;
                }
            };
            // Bytes, not `&line[..5]`: byte 5 may fall inside a character.
            let shown = if line
                .as_bytes()
                .get(..5)
                .is_some_and(|p| p.eq_ignore_ascii_case(b"PASS "))
            {
                "PASS ****"
            } else {
                &line
            };
            tracing::debug!(command = shown, "control command");
            let flow = match Command::parse(&line) {
                Ok(cmd) if self.shared.draining() && starts_transfer(&cmd) => {
                    let _ = self.ctl.reply(421, DRAINING);
                    break;
                }
                Ok(cmd) => self.dispatch(cmd)?,
                Err(e) => {
                    let code = match e {
                        CommandError::Empty | CommandError::BadVerb(_) => 500,
                        _ => 501,
                    };
                    self.ctl.reply(code, format!("{e}."))?;
                    Flow::Continue
                }
            };
            if flow == Flow::Close {
                break;
            }
        }
        self.data.drop_all();
        self.hop = None;
        Ok(self.ctl)
    }

    /// The next input by `deadline`, or None when the server drains and the client sent no
    /// command for [`DRAIN_GRACE`] (a transfer running when the drain began finishes first).
    fn next_input(&mut self, mut deadline: Instant) -> io::Result<Option<Input>> {
        let mut draining = false;
        loop {
            if !draining && self.shared.draining() {
                // Commands that finish a transfer (its CKSM) may follow it; silence may not.
                draining = true;
                deadline = deadline.min(Instant::now() + DRAIN_GRACE);
            }
            let wake = if draining {
                deadline
            } else {
                deadline.min(Instant::now() + DRAIN_POLL)
            };
            match self.ctl.next_line(wake)? {
                Input::Idle if draining => return Ok(None),
                Input::Idle if Instant::now() < deadline => {}
                input => return Ok(Some(input)),
            }
        }
    }

    /// Answers one command: first sends the replies the previous command deferred, then hands
    /// the command to the login machine and performs what it asks for.
    fn dispatch(&mut self, cmd: Command) -> io::Result<Flow> {
        // Replies deferred by the previous command go out now, unless this command answers
        // at once anyway (RETR: 125 / 150; CKSM: flushes itself unless its digest is ready).
        if !matches!(
            cmd,
            Command::Retr(_) | Command::Eret { .. } | Command::Cksm { .. }
        ) {
            self.ctl.flush()?;
        }
        self.machine.handle_command(cmd);
        self.perform()
    }

    /// Answers a command the session machine forwarded (it may run now) by routing it to its
    /// family.
    fn route(&mut self, cmd: Command) -> io::Result<()> {
        if self.relay_command(&cmd)? {
            return Ok(());
        }
        match cmd {
            Command::Feat
            | Command::Opts { .. }
            | Command::Site(_)
            | Command::Help(_)
            | Command::Syst
            | Command::Noop
            | Command::Acct(_)
            | Command::Rein
            | Command::Unknown { .. } => self.feature_command(cmd),
            Command::Pwd
            | Command::Cwd(_)
            | Command::Cdup
            | Command::Size(_)
            | Command::Mdtm(_)
            | Command::Mlst(_)
            | Command::Stat(_)
            | Command::Cksm { .. }
            | Command::Mkd(_)
            | Command::Rmd(_)
            | Command::Dele(_)
            | Command::Rnfr(_)
            | Command::Rnto(_) => self.fs_command(cmd),
            Command::Mfmt { time, path } => self.cmd_mfmt(time, &path),
            Command::Retr(_) | Command::Eret { .. } | Command::Stor(_) if self.plut.enabled() => {
                self.plut_command(cmd)
            }
            // The login family and the data-transfer family: the session machine answers these
            // itself; should it ever forward one, the client gets a refusal rather than the
            // session a panic.
            other => {
                tracing::warn!(
                    verb = other.verb(),
                    "command forwarded by the session machine"
                );
                self.ctl.reply(503, "Bad sequence of commands.")
            }
        }
    }
}
