//! One control session: login, then commands processed strictly in order (pipelined lines
//! wait in the line buffer while a transfer runs), with replies that name the cause of every
//! failure. Data-channel commands live in `transfer`.

use std::collections::HashMap;
use std::fs;
use std::io;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use haul_proto::command::{ProtLevel, RetrOptions, TransferMode};
use haul_proto::{Command, CommandError, Reply};
use haul_transport::checksum::{checksum, Algorithm};
use haul_transport::io::{Source, Zero};

use crate::auth::{is_anonymous, Access, Users};
use crate::config::ServerConfig;
use crate::control::{Control, Input};
use crate::datachan::DataState;
use crate::listing;
use crate::transfer::WriteKind;
use crate::vfs::{is_part_name, Parent, Root, Target};

/// Most bytes of `/dev/zero` a `CKSM` hashes (1 GiB): enough to check a memory-to-memory
/// digest path, not enough to pin a core.
const MAX_ZERO_CKSM: u64 = 1 << 30;

/// A source that fails once the session's client has left, so the work it feeds (a `CKSM` of a
/// large file) stops with it. Reads are of at most a few MiB, so the check costs nothing.
struct WhileClientStays<'a> {
    src: &'a dyn Source,
    watch: crate::control::ClientWatch,
}

impl Source for WhileClientStays<'_> {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        if self.watch.gone(Duration::ZERO) {
            return Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "the client left",
            ));
        }
        self.src.read_at(buf, offset)
    }
}

/// Failed logins after which the session is closed.
const MAX_LOGIN_FAILURES: u32 = 3;

/// State shared by every session of a server.
pub struct Shared {
    /// The configuration.
    pub cfg: ServerConfig,
    /// The served root.
    pub vfs: Root,
    /// Named users (none without a users file).
    pub users: Users,
    /// TLS configuration, if AUTH TLS is offered.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// The files being uploaded, one writer each.
    pub writers: crate::upload::Writers,
    /// Recent failed logins by address.
    pub failures: Failures,
    /// Logged-in sessions by named user.
    pub per_user: Mutex<HashMap<String, usize>>,
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
    user: Option<String>,
    pub(crate) access: Option<Access>,
    anonymous: bool,
    failures: u32,
    pub(crate) cwd: String,
    pub(crate) mode: TransferMode,
    pub(crate) data: DataState,
    pub(crate) rest: Option<haul_proto::command::Restart>,
    rename_from: Option<String>,
    pub(crate) prot_private: bool,
    pub(crate) plut: crate::plut_transfer::PlutState,
    /// The digest of the file just sent or received, computed from the bytes as they went by,
    /// for the `CKSM` the client pipelined after its `RETR` or `STOR`.
    pub(crate) known_digest: Option<KnownDigest>,
    /// The client's address.
    peer: IpAddr,
    /// When the client must be logged in by.
    login_by: Instant,
    /// The data-connection token, once the client asked for one (`DTOK`).
    pub(crate) data_token: Option<haul_transport::token::DataToken>,
    /// A named user's place among its sessions, held while logged in.
    user_slot: Option<UserSlot<'a>>,
}

/// One session of a named user, counted against `max_sessions_per_user` until dropped.
struct UserSlot<'a> {
    shared: &'a Shared,
    name: String,
}

impl Drop for UserSlot<'_> {
    fn drop(&mut self) {
        let mut m = self
            .shared
            .per_user
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(n) = m.get_mut(&self.name) {
            *n -= 1;
            if *n == 0 {
                m.remove(&self.name);
            }
        }
    }
}

/// Failed logins per client address, for the back-off: (count, time of the last).
pub type Failures = Mutex<HashMap<IpAddr, (u32, Instant)>>;

/// Failures older than this are forgotten.
const FAILURE_MEMORY: Duration = Duration::from_secs(600);

/// The wait before answering a failed login: 250 ms, doubling with each recent failure from the
/// same address, at most 8 s.
fn backoff(failures: u32) -> Duration {
    Duration::from_millis(250u64 << failures.saturating_sub(1).min(5))
}

/// A digest computed while a whole file was sent or received (see `Session::known_digest`).
pub struct KnownDigest {
    /// The file's virtual path.
    pub virt: String,
    /// The algorithm.
    pub alg: Algorithm,
    /// The file as it was opened; the digest stands only while the file still looks the same.
    pub id: FileId,
    /// Lowercase hex.
    pub hex: String,
}

/// What identifies a file's content for [`KnownDigest`]: device, inode, size, and the
/// modification and change times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileId {
    dev: u64,
    ino: u64,
    /// Bytes.
    pub size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

/// A file modified this recently may still be modified within the same timestamp tick
/// (jiffy-granular timestamps on older kernels, writes through a shared mapping that set mtime
/// only at writeback), so its timestamps cannot vouch that the content is the one hashed:
/// git's "racily clean" rule.
const RACY: Duration = Duration::from_secs(2);

impl FileId {
    /// The identity of a file from its metadata.
    pub fn of(m: &fs::Metadata) -> FileId {
        use std::os::unix::fs::MetadataExt;
        FileId {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        }
    }

    /// True if the content was last modified more than [`RACY`] ago, so an unchanged
    /// identity means unchanged content. (A write moves mtime and ctime together; ctime alone
    /// also moves on metadata changes, which do not touch the content.)
    pub fn settled(&self) -> bool {
        let Ok(now) = SystemTime::now().duration_since(UNIX_EPOCH) else {
            return false;
        };
        let (s, ns) = self.mtime;
        u64::try_from(s)
            .is_ok_and(|s| Duration::new(s, ns.clamp(0, 999_999_999) as u32) + RACY <= now)
    }
}

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
    /// A new session on an accepted control connection.
    pub fn new(shared: &'a Shared, ctl: Control) -> io::Result<Session<'a>> {
        let peer = ctl.peer_ip()?;
        Ok(Session {
            shared,
            ctl,
            user: None,
            access: None,
            anonymous: false,
            failures: 0,
            cwd: "/".to_string(),
            mode: TransferMode::Stream,
            data: DataState::default(),
            rest: None,
            rename_from: None,
            prot_private: false,
            plut: Default::default(),
            known_digest: None,
            peer,
            login_by: Instant::now() + shared.cfg.login_timeout,
            data_token: None,
            user_slot: None,
        })
    }

    /// Greets the client and serves commands until QUIT, close, idle timeout or a fatal error;
    /// gives back the control connection for the caller to close.
    pub fn run(mut self) -> io::Result<Control> {
        self.ctl.reply(
            220,
            format!("haul GridFTP server {} ready.", env!("CARGO_PKG_VERSION")),
        )?;
        let cfg = &self.shared.cfg;
        let login_by = self.login_by;
        loop {
            let idle_by = Instant::now() + cfg.idle_timeout;
            let deadline = if self.access.is_none() {
                idle_by.min(login_by)
            } else {
                idle_by
            };
            let line = match self.ctl.next_line(deadline)? {
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
        Ok(self.ctl)
    }

    fn dispatch(&mut self, cmd: Command) -> io::Result<Flow> {
        let pre_login = matches!(
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
        // Replies deferred by the previous command go out now, unless this command answers
        // at once anyway (RETR: 125 / 150; CKSM: flushes itself unless its digest is ready).
        if !matches!(
            cmd,
            Command::Retr(_) | Command::Eret { .. } | Command::Cksm { .. }
        ) {
            self.ctl.flush()?;
        }
        if self.access.is_none() && !pre_login {
            self.ctl.reply(530, "Please login with USER and PASS.")?;
            return Ok(Flow::Continue);
        }
        if self.shared.cfg.require_tls
            && !self.ctl.is_tls()
            && matches!(cmd, Command::User(_) | Command::Pass(_))
        {
            self.ctl.reply(
                530,
                "This server requires TLS: send AUTH TLS before logging in.",
            )?;
            return Ok(Flow::Continue);
        }
        match cmd {
            Command::User(name) => self.cmd_user(name)?,
            Command::Pass(pw) => return self.cmd_pass(&pw),
            Command::Quit => {
                self.ctl.reply(221, "Goodbye.")?;
                return Ok(Flow::Close);
            }
            Command::Auth(mech) => return self.cmd_auth(&mech),
            Command::Pbsz(_) => self.ctl.reply(200, "PBSZ=0")?,
            Command::Prot(level) => self.cmd_prot(level)?,
            Command::Feat => self.cmd_feat()?,
            Command::Syst => self.ctl.reply(215, "UNIX Type: L8")?,
            Command::Noop => self.ctl.reply(200, "NOOP command successful.")?,
            Command::Help(_) => self.help(214)?,
            Command::Opts { command, options } => self.cmd_opts(&command, &options)?,
            Command::Site(text) => self.cmd_site(&text)?,
            Command::Type(_) => self.ctl.reply(200, "Type set.")?,
            Command::Stru(_) => self.ctl.reply(200, "Structure set to F.")?,
            Command::Mode(m) => {
                if m != self.mode {
                    self.data.drop_cached();
                }
                self.mode = m;
                let c = if m == TransferMode::Extended {
                    'E'
                } else {
                    'S'
                };
                self.ctl.reply(200, format!("Mode set to {c}."))?;
            }
            Command::Allo(_) => self.ctl.reply(200, "ALLO command successful.")?,
            Command::Sbuf(n) => self.cmd_sbuf(n)?,
            Command::Dcau(m) => {
                if m.eq_ignore_ascii_case("N") {
                    self.ctl.reply(200, "DCAU N.")?;
                } else {
                    self.ctl.reply(
                        504,
                        format!("DCAU {m} not supported: haul protects data channels with PROT P."),
                    )?;
                }
            }
            Command::Rest(r) => {
                self.rest = Some(r);
                self.ctl.reply(
                    350,
                    "Restart Marker OK. Send STORE or RETR to initiate transfer.",
                )?;
            }
            Command::Pwd => {
                let cwd = self.cwd.replace('"', "\"\"");
                self.ctl
                    .reply(257, format!("\"{cwd}\" is current directory."))?;
            }
            Command::Cwd(p) => self.cmd_cwd(&p)?,
            Command::Cdup => self.cmd_cwd("..")?,
            Command::Size(p) => self.cmd_size(&p)?,
            Command::Mdtm(p) => self.cmd_mdtm(&p)?,
            Command::Mlst(p) => self.cmd_mlst(p.as_deref())?,
            Command::Stat(p) => self.cmd_stat(p.as_deref())?,
            Command::Cksm {
                algorithm,
                offset,
                length,
                path,
            } => self.cmd_cksm(&algorithm, offset, length, &path)?,
            Command::Mkd(p) => self.cmd_mkd(&p)?,
            Command::Rmd(p) => self.cmd_remove(&p, true)?,
            Command::Dele(p) => self.cmd_remove(&p, false)?,
            Command::Rnfr(p) => self.cmd_rnfr(&p)?,
            Command::Rnto(p) => self.cmd_rnto(&p)?,
            Command::Abor => self
                .ctl
                .reply(226, "ABOR command successful; no transfer in progress.")?,
            Command::Port(a) => self.cmd_port(vec![a], "PORT")?,
            Command::Eprt(a) => self.cmd_port(vec![a], "EPRT")?,
            Command::Spor(addrs) => self.cmd_port(addrs, "SPOR")?,
            Command::Pasv => self.cmd_passive(crate::transfer::Passive::Pasv)?,
            Command::Epsv => self.cmd_passive(crate::transfer::Passive::Epsv)?,
            Command::Spas => self.cmd_passive(crate::transfer::Passive::Spas)?,
            Command::Retr(p) if self.plut.enabled() => self.plut_retr(&p, None)?,
            Command::Eret {
                offset,
                length,
                path,
            } if self.plut.enabled() => self.plut_retr(&path, Some((offset, length)))?,
            Command::Stor(p) if self.plut.enabled() => self.plut_stor(&p)?,
            Command::Unknown { verb, arg } if verb == "PLUT" => self.cmd_plut(&arg)?,
            Command::Unknown { verb, .. } if verb == "DTOK" => self.cmd_dtok()?,
            Command::Retr(p) => self.cmd_retr(&p, None)?,
            Command::Eret {
                offset,
                length,
                path,
            } => self.cmd_retr(&path, Some((offset, length)))?,
            Command::Stor(p) => self.cmd_stor(&p, WriteKind::Stor)?,
            Command::Appe(p) => self.cmd_stor(&p, WriteKind::Appe)?,
            Command::Esto { offset, path } => self.cmd_stor(&path, WriteKind::Esto(offset))?,
            Command::List(p) => self.cmd_listing(p.as_deref(), crate::transfer::ListKind::List)?,
            Command::Nlst(p) => self.cmd_listing(p.as_deref(), crate::transfer::ListKind::Nlst)?,
            Command::Mlsd(p) => self.cmd_listing(p.as_deref(), crate::transfer::ListKind::Mlsd)?,
            Command::Acct(_) => self.ctl.reply(202, "ACCT not needed.")?,
            Command::Rein => self
                .ctl
                .reply(502, "REIN not implemented; reconnect instead.")?,
            Command::Unknown { verb, .. } => {
                self.ctl.reply(500, format!("Unknown command {verb}."))?
            }
        }
        Ok(Flow::Continue)
    }

    fn cmd_user(&mut self, name: String) -> io::Result<()> {
        if self.access.is_some() {
            return self.ctl.reply(503, "Already logged in.");
        }
        self.ctl
            .reply(331, format!("Password required for {name}."))?;
        self.user = Some(name);
        Ok(())
    }

    fn cmd_pass(&mut self, pw: &str) -> io::Result<Flow> {
        if self.access.is_some() {
            self.ctl.reply(503, "Already logged in.")?;
            return Ok(Flow::Continue);
        }
        let Some(name) = self.user.take() else {
            self.ctl.reply(503, "Login with USER first.")?;
            return Ok(Flow::Continue);
        };
        let cfg = &self.shared.cfg;
        let access = if is_anonymous(&name) {
            cfg.anonymous.then_some(Access {
                write: cfg.anonymous_write,
                third_party: false,
            })
        } else {
            self.shared.users.verify(&name, pw)
        };
        let Some(a) = access else {
            return self.login_failed(&name);
        };
        if !is_anonymous(&name) {
            let max = cfg.max_sessions_per_user;
            let mut m = self
                .shared
                .per_user
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            let n = m.entry(name.clone()).or_insert(0);
            if *n >= max {
                drop(m);
                tracing::warn!(user = %name, max, "session limit per user reached");
                self.ctl.reply(
                    421,
                    format!("Too many sessions for {name} (limit {max}); try again later."),
                )?;
                return Ok(Flow::Close);
            }
            *n += 1;
            drop(m);
            self.user_slot = Some(UserSlot {
                shared: self.shared,
                name: name.clone(),
            });
        }
        self.shared
            .failures
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.peer);
        self.anonymous = is_anonymous(&name);
        self.access = Some(a);
        tracing::info!(user = %name, write = a.write, third_party = a.third_party, "login");
        self.ctl.reply(230, format!("User {name} logged in."))?;
        Ok(Flow::Continue)
    }

    /// A failed login: waits the back-off for this address's recent failures, answers `530`, and
    /// closes the session after [`MAX_LOGIN_FAILURES`].
    fn login_failed(&mut self, name: &str) -> io::Result<Flow> {
        self.failures += 1;
        let recent = {
            let mut m = self
                .shared
                .failures
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            let now = Instant::now();
            if m.len() > 65_536 {
                m.retain(|_, (_, last)| now.duration_since(*last) < FAILURE_MEMORY);
            }
            let e = m.entry(self.peer).or_insert((0, now));
            if now.duration_since(e.1) >= FAILURE_MEMORY {
                e.0 = 0;
            }
            *e = (e.0 + 1, now);
            e.0
        };
        tracing::warn!(user = %name, peer = %self.peer, failures = self.failures, recent, "login failed");
        self.ctl.flush()?;
        // Never past the login deadline, which then closes the session.
        std::thread::sleep(
            backoff(recent).min(self.login_by.saturating_duration_since(Instant::now())),
        );
        self.ctl.reply(530, "Login incorrect.")?;
        if self.failures >= MAX_LOGIN_FAILURES {
            self.ctl
                .reply(421, "Too many failed logins; closing control connection.")?;
            return Ok(Flow::Close);
        }
        Ok(Flow::Continue)
    }

    fn cmd_auth(&mut self, mech: &str) -> io::Result<Flow> {
        let Some(cfg) = self.shared.tls.clone() else {
            self.ctl.reply(
                502,
                "AUTH not available: this server has no TLS certificate.",
            )?;
            return Ok(Flow::Continue);
        };
        if mech != "TLS" && mech != "TLS-C" && mech != "SSL" {
            self.ctl
                .reply(504, format!("AUTH {mech} not supported; use AUTH TLS."))?;
            return Ok(Flow::Continue);
        }
        if self.ctl.is_tls() {
            self.ctl
                .reply(503, "Control connection already protected by TLS.")?;
            return Ok(Flow::Continue);
        }
        self.ctl.reply(234, "AUTH TLS successful.")?;
        if let Err(e) = self.ctl.upgrade(cfg) {
            tracing::warn!(error = %e, "TLS upgrade of the control connection failed");
            return Ok(Flow::Close);
        }
        Ok(Flow::Continue)
    }

    fn cmd_prot(&mut self, level: ProtLevel) -> io::Result<()> {
        match level {
            ProtLevel::Clear => {
                self.prot_private = false;
                self.ctl.reply(200, "Protection level set to C.")
            }
            ProtLevel::Private if self.ctl.is_tls() => {
                self.prot_private = true;
                self.ctl.reply(200, "Protection level set to P.")
            }
            ProtLevel::Private => self.ctl.reply(503, "PROT P needs AUTH TLS first."),
            _ => self.ctl.reply(536, "Only PROT C and PROT P are supported."),
        }
    }

    fn cmd_feat(&mut self) -> io::Result<()> {
        let algs: String = Algorithm::ALL
            .iter()
            .map(|a| format!("{};", a.name()))
            .collect();
        let mut lines = vec!["Extensions supported".to_string()];
        let mut feats = vec![
            "UTF8".to_string(),
            "PARALLEL".to_string(),
            "ERET".to_string(),
            "ESTO".to_string(),
            "SPAS".to_string(),
            "SPOR".to_string(),
            "SBUF".to_string(),
            "DCAU".to_string(),
            "SIZE".to_string(),
            "MDTM".to_string(),
            "REST STREAM".to_string(),
            "MLST Type*;Size*;Modify*;Perm*;UNIX.mode*;UNIX.uid*;UNIX.gid*;".to_string(),
            "MLSD".to_string(),
            format!("CKSM {algs}"),
            "HAUL 1".to_string(),
            "PLUT 1".to_string(),
            "DTOK".to_string(),
        ];
        if self.shared.tls.is_some() {
            feats.extend([
                "AUTH TLS".to_string(),
                "PBSZ".to_string(),
                "PROT".to_string(),
            ]);
        }
        lines.extend(feats.into_iter().map(|f| format!(" {f}")));
        lines.push("End.".to_string());
        self.ctl.send(&Reply::multi(211, lines))
    }

    /// `DTOK`: from now on every data connection of this session carries this token first
    /// (haul extension, docs/protocol.md). Cached connections predate it and are dropped.
    fn cmd_dtok(&mut self) -> io::Result<()> {
        let t = match self.data_token {
            Some(t) => t,
            None => match haul_transport::token::DataToken::random() {
                Ok(t) => t,
                Err(e) => return self.ctl.reply(451, format!("DTOK: no random bytes: {e}")),
            },
        };
        self.data.drop_cached();
        self.data_token = Some(t);
        self.ctl.reply(200, format!("DTOK {}", t.to_hex()))
    }

    fn help(&mut self, code: u16) -> io::Result<()> {
        let lines = vec![
            "The following commands are recognized:".to_string(),
            "    ABOR    ALLO    APPE    AUTH    CDUP    CKSM    CWD     DCAU".to_string(),
            "    DELE    EPRT    EPSV    ERET    ESTO    FEAT    HELP    LIST".to_string(),
            "    MDTM    MKD     MLSD    MLST    MODE    NLST    NOOP    OPTS".to_string(),
            "    PASS    PASV    PBSZ    PORT    PROT    PWD     QUIT    REST".to_string(),
            "    RETR    RMD     RNFR    RNTO    SBUF    SITE    SIZE    SPAS".to_string(),
            "    SPOR    STAT    STOR    STRU    SYST    TYPE    USER".to_string(),
            "End".to_string(),
        ];
        self.ctl.send(&Reply::multi(code, lines))
    }

    fn cmd_site(&mut self, text: &str) -> io::Result<()> {
        let (sub, _) = text.split_once(' ').unwrap_or((text, ""));
        match sub.to_ascii_uppercase().as_str() {
            "HELP" => self.help(214),
            "CLIENTINFO" => self.ctl.reply(250, "OK."),
            _ => self.ctl.reply(500, format!("SITE {sub} not understood.")),
        }
    }

    fn cmd_opts(&mut self, command: &str, options: &str) -> io::Result<()> {
        match command {
            "RETR" => match RetrOptions::parse(options) {
                Ok(o) => {
                    let max = self.shared.cfg.max_parallelism;
                    match o.parallelism {
                        Some(p) if p as usize > max => {
                            return self.ctl.reply(
                                501,
                                format!(
                                    "Parallelism={p} is over this server's limit of {max} streams."
                                ),
                            )
                        }
                        Some(p) => self.data.parallelism = p as usize,
                        None => {}
                    }
                    self.ctl.reply(200, "OPTS Command Successful.")
                }
                Err(e) => self.ctl.reply(501, format!("{e}.")),
            },
            "UTF8" => self.ctl.reply(200, "UTF8 mode is always on."),
            "HAUL" => self.plut_opts(options),
            _ => self
                .ctl
                .reply(501, format!("OPTS {command} not understood.")),
        }
    }

    fn cmd_sbuf(&mut self, n: u64) -> io::Result<()> {
        if !(4096..=(1 << 30)).contains(&n) {
            return self
                .ctl
                .reply(501, format!("SBUF {n} out of range 4096..=1073741824."));
        }
        self.data.sbuf = Some(n as usize);
        self.ctl.reply(200, "SBUF Command Successful.")
    }

    /// What a path argument names.
    pub(crate) fn resolve(&self, arg: &str) -> Target {
        Root::target(&self.cwd, arg)
    }

    /// The virtual path of an argument that must be a real file or directory (not a virtual
    /// device); replies 550 otherwise.
    pub(crate) fn resolve_real(&mut self, arg: &str) -> io::Result<Option<String>> {
        match self.resolve(arg) {
            Target::Path(virt) => Ok(Some(virt)),
            _ => {
                self.ctl.reply(
                    550,
                    format!("{arg}: not a regular file or directory (virtual device)"),
                )?;
                Ok(None)
            }
        }
    }

    /// The parent handle of `virt` for a change to its name; replies 550 when it cannot be had,
    /// or when the name is reserved for upload part files and `reserved` is refused.
    pub(crate) fn parent_of(
        &mut self,
        virt: &str,
        refuse_part: bool,
    ) -> io::Result<Option<Parent>> {
        if refuse_part && virt.rsplit('/').next().is_some_and(is_part_name) {
            self.ctl.reply(553, format!("{virt}: names of the form .NAME.haul-part are reserved for uploads in progress"))?;
            return Ok(None);
        }
        match self.shared.vfs.parent(virt) {
            Ok(p) => Ok(Some(p)),
            Err(e) => {
                tracing::warn!(path = virt, error = %e, "path refused");
                self.ctl.reply(550, fs_error(virt, &e))?;
                Ok(None)
            }
        }
    }

    /// Replies 550 and returns false unless the user may write.
    pub(crate) fn check_write(&mut self) -> io::Result<bool> {
        if self.access.is_some_and(|a| a.write) {
            return Ok(true);
        }
        let why = if self.anonymous {
            "anonymous is read-only"
        } else {
            "read-only user"
        };
        self.ctl.reply(550, format!("Permission denied ({why})."))?;
        Ok(false)
    }

    fn cmd_cwd(&mut self, arg: &str) -> io::Result<()> {
        let Some(virt) = self.resolve_real(arg)? else {
            return Ok(());
        };
        match self.shared.vfs.stat(&virt) {
            Ok(m) if m.is_dir() => {
                self.cwd = virt;
                self.ctl.reply(250, "CWD command successful.")
            }
            Ok(_) => self.ctl.reply(550, format!("{virt}: Not a directory")),
            Err(e) => self.ctl.reply(550, fs_error(&virt, &e)),
        }
    }

    fn cmd_size(&mut self, arg: &str) -> io::Result<()> {
        let Some(virt) = self.resolve_real(arg)? else {
            return Ok(());
        };
        match self.shared.vfs.stat(&virt) {
            Ok(m) if m.is_file() => self.ctl.reply(213, m.len().to_string()),
            Ok(_) => self.ctl.reply(550, format!("{virt}: not a regular file")),
            Err(e) => self.ctl.reply(550, fs_error(&virt, &e)),
        }
    }

    fn cmd_mdtm(&mut self, arg: &str) -> io::Result<()> {
        let Some(virt) = self.resolve_real(arg)? else {
            return Ok(());
        };
        match self.shared.vfs.stat(&virt) {
            Ok(m) => self.ctl.reply(213, listing::mdtm(&m)),
            Err(e) => self.ctl.reply(550, fs_error(&virt, &e)),
        }
    }

    fn cmd_mlst(&mut self, arg: Option<&str>) -> io::Result<()> {
        let arg = arg.unwrap_or(".").to_string();
        let Some(virt) = self.resolve_real(&arg)? else {
            return Ok(());
        };
        let write = self.access.is_some_and(|a| a.write);
        match self.shared.vfs.stat(&virt) {
            Ok(m) => {
                let line = format!(" {}{virt}", listing::facts(&m, None, write));
                self.ctl.send(&Reply::multi(
                    250,
                    vec![format!("Listing {virt}"), line, "End.".into()],
                ))
            }
            Err(e) => self.ctl.reply(550, fs_error(&virt, &e)),
        }
    }

    fn cmd_stat(&mut self, arg: Option<&str>) -> io::Result<()> {
        let Some(arg) = arg else {
            let user = if self.anonymous {
                "anonymous"
            } else {
                "a named user"
            };
            let lines = vec![
                "haul GridFTP server status:".into(),
                format!("    Logged in as {user}"),
                "End.".into(),
            ];
            return self.ctl.send(&Reply::multi(211, lines));
        };
        let Some(virt) = self.resolve_real(arg)? else {
            return Ok(());
        };
        match listing::list(&self.shared.vfs, &virt, true) {
            Ok(body) => {
                let mut lines = vec![format!("status of {virt}")];
                lines.extend(
                    String::from_utf8_lossy(&body)
                        .lines()
                        .map(|l| format!(" {l}")),
                );
                lines.push("End.".into());
                self.ctl.send(&Reply::multi(213, lines))
            }
            Err(e) => self.ctl.reply(550, fs_error(&virt, &e)),
        }
    }

    fn cmd_cksm(
        &mut self,
        alg: &str,
        offset: u64,
        length: Option<u64>,
        arg: &str,
    ) -> io::Result<()> {
        let alg: Algorithm = match alg.parse() {
            Ok(a) => a,
            Err(e) => return self.ctl.reply(504, format!("{e}.")),
        };
        if let Some(d) = self.known_digest.take() {
            // The file just sent or received, still the same file: its digest is known.
            let whole = offset == 0 && length.unwrap_or(d.id.size) == d.id.size;
            if whole
                && d.alg == alg
                && d.virt == Root::normalize(&self.cwd, arg)
                && self
                    .shared
                    .vfs
                    .stat(&d.virt)
                    .is_ok_and(|m| FileId::of(&m) == d.id)
            {
                self.ctl.defer_reply(213, d.hex);
                return Ok(());
            }
        }
        // Hashing may take a while: the client should have the replies it is waiting for.
        self.ctl.flush()?;
        let watch = self.ctl.watcher();
        let result = match self.resolve(arg) {
            Target::Zero => match length {
                Some(n) if n > MAX_ZERO_CKSM => {
                    return self.ctl.reply(
                        501,
                        format!("/dev/zero: CKSM is limited to {MAX_ZERO_CKSM} bytes of zeros."),
                    )
                }
                Some(_) => checksum(&Zero, alg, offset, length),
                None => {
                    return self
                        .ctl
                        .reply(550, "/dev/zero: endless; give CKSM a length.")
                }
            },
            Target::Null => checksum(&Zero, alg, 0, Some(0)),
            Target::Path(virt) => match self.shared.vfs.open_read(&virt) {
                Ok((_, m)) if m.is_dir() => {
                    return self.ctl.reply(550, format!("{virt}: Is a directory"))
                }
                Ok((_, m)) if !m.is_file() => {
                    return self.ctl.reply(550, format!("{virt}: not a regular file"))
                }
                Ok((f, _)) => checksum(&WhileClientStays { src: &f, watch }, alg, offset, length),
                Err(e) => return self.ctl.reply(550, fs_error(&virt, &e)),
            },
        };
        match result {
            Ok(hex) => self.ctl.reply(213, hex),
            Err(e) => self.ctl.reply(550, format!("{arg}: checksum failed: {e}")),
        }
    }

    fn cmd_mkd(&mut self, arg: &str) -> io::Result<()> {
        if !self.check_write()? {
            return Ok(());
        }
        let Some(virt) = self.resolve_real(arg)? else {
            return Ok(());
        };
        let Some(parent) = self.parent_of(&virt, true)? else {
            return Ok(());
        };
        match parent.mkdir() {
            Ok(()) => self
                .ctl
                .reply(257, format!("\"{virt}\" directory created.")),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                self.ctl.reply(553, fs_error(&virt, &e))
            }
            Err(e) => self.ctl.reply(550, fs_error(&virt, &e)),
        }
    }

    fn cmd_remove(&mut self, arg: &str, dir: bool) -> io::Result<()> {
        if !self.check_write()? {
            return Ok(());
        }
        let Some(virt) = self.resolve_real(arg)? else {
            return Ok(());
        };
        if virt == "/" {
            return self.ctl.reply(
                550,
                "/: Permission denied (the served root cannot be removed)",
            );
        }
        let Some(parent) = self.parent_of(&virt, false)? else {
            return Ok(());
        };
        match parent.remove(dir) {
            Ok(()) => self.ctl.reply(
                250,
                format!("{} command successful.", if dir { "RMD" } else { "DELE" }),
            ),
            Err(e) => self.ctl.reply(550, fs_error(&virt, &e)),
        }
    }

    fn cmd_rnfr(&mut self, arg: &str) -> io::Result<()> {
        if !self.check_write()? {
            return Ok(());
        }
        let Some(virt) = self.resolve_real(arg)? else {
            return Ok(());
        };
        if virt == "/" {
            return self.ctl.reply(
                550,
                "/: Permission denied (the served root cannot be renamed)",
            );
        }
        let Some(parent) = self.parent_of(&virt, true)? else {
            return Ok(());
        };
        match parent.lstat() {
            Ok(Some(_)) => {
                self.rename_from = Some(virt);
                self.ctl
                    .reply(350, "File exists, ready for destination name.")
            }
            Ok(None) => self
                .ctl
                .reply(550, format!("{virt}: No such file or directory")),
            Err(e) => self.ctl.reply(550, fs_error(&virt, &e)),
        }
    }

    fn cmd_rnto(&mut self, arg: &str) -> io::Result<()> {
        let Some(from) = self.rename_from.take() else {
            return self.ctl.reply(503, "RNTO needs RNFR first.");
        };
        if !self.check_write()? {
            return Ok(());
        }
        let Some(virt) = self.resolve_real(arg)? else {
            return Ok(());
        };
        let Some(to) = self.parent_of(&virt, true)? else {
            return Ok(());
        };
        let Some(from_parent) = self.parent_of(&from, true)? else {
            return Ok(());
        };
        match from_parent.rename_to(&to) {
            Ok(()) => self.ctl.reply(250, "Rename successful."),
            Err(e) => self.ctl.reply(550, fs_error(&virt, &e)),
        }
    }
}

#[cfg(test)]
mod file_id_tests {
    use super::*;

    #[test]
    fn a_file_written_just_now_is_not_settled() {
        let f = tempfile::NamedTempFile::new().expect("temp file");
        fs::write(f.path(), b"x").expect("write");
        assert!(!FileId::of(&fs::metadata(f.path()).expect("stat")).settled());
        let old = SystemTime::now() - Duration::from_secs(10);
        f.as_file().set_modified(old).expect("set mtime");
        assert!(FileId::of(&fs::metadata(f.path()).expect("stat")).settled());
    }
}
