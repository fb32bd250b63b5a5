//! [`Transfers`]: the data-transfer family of a logged-in session. The settings of the next
//! transfer (`TYPE`, `STRU`, `MODE`, `ALLO`, `SBUF`, `DCAU`, `REST`), the data-channel set-up
//! (`PORT`, `EPRT`, `SPOR`, `PASV`, `EPSV`, `SPAS`), and the reply sequence of every transfer
//! (`RETR`, `ERET`, `STOR`, `APPE`, `ESTO`, `LIST`, `NLST`, `MLSD`, `MLSR`): the checks before it, its
//! `150` or `125`, and its final reply, with `ABOR` during a transfer (RFC 959 §4.1.3: `426` for
//! the transfer, then `226` for the `ABOR`). The driver opens files, sockets and listeners and
//! moves the data; the machine decides what is answered and when.

use std::collections::VecDeque;
use std::net::SocketAddr;

use super::{Peers, ServerAction};
use crate::command::{Dcau, Restart, TransferMode};
use crate::hostport::format_port;
use crate::{Command, Reply};

/// Smallest `SBUF` accepted, in bytes.
pub const MIN_SBUF: u64 = 4096;
/// Largest `SBUF` accepted, in bytes.
pub const MAX_SBUF: u64 = 1 << 30;

/// What the data-transfer machine needs to know about the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataConfig {
    /// Most data connections one transfer may open or accept, and most `SPOR` addresses.
    pub max_parallelism: usize,
    /// Data connections must be protected by TLS (`PROT P`).
    pub require_tls: bool,
}

/// Which passive command was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Passive {
    /// PASV (RFC 959).
    Pasv,
    /// EPSV (RFC 2428).
    Epsv,
    /// SPAS (GFD.020 striped passive).
    Spas,
}

/// Which listing command was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListKind {
    /// LIST: `ls -l` lines.
    List,
    /// NLST: names.
    Nlst,
    /// MLSD: RFC 3659 facts.
    Mlsd,
    /// MLSR: RFC 3659 facts of a whole tree, each entry's path relative to the listed directory.
    Mlsr,
}

/// How an upload writes its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteKind {
    /// STOR: replace the file.
    Stor,
    /// APPE: append to the file.
    Appe,
    /// ESTO A offset: write in place at offset + block offset (GFD.020).
    Esto(u64),
}

/// What a transfer moves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransferOp {
    /// `RETR` (`range` None) or `ERET P offset length` (`range` Some): send a file.
    Send {
        /// The path as the client gave it.
        path: String,
        /// ERET's offset and length.
        range: Option<(u64, u64)>,
    },
    /// `STOR`, `APPE` or `ESTO`: receive a file.
    Receive {
        /// The path as the client gave it.
        path: String,
        /// How the file is written.
        kind: WriteKind,
    },
    /// `LIST`, `NLST`, `MLSD` or `MLSR`: send a listing.
    List {
        /// The path as the client gave it, if it gave one.
        path: Option<String>,
        /// Which listing.
        kind: ListKind,
    },
}

/// A transfer for the driver to run ([`ServerAction::Transfer`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transfer {
    /// What moves.
    pub op: TransferOp,
    /// The `REST` that preceded it, which it consumes (ignored by `ERET`, `ESTO` and listings).
    pub restart: Option<Restart>,
    /// The size an `ALLO` before it announced, which it consumes: what an upload expects to
    /// receive (Globus clients and haul's send it before every `STOR`). Advisory: the data
    /// decides the file's length.
    pub allocate: Option<u64>,
    /// The transfer mode.
    pub mode: TransferMode,
}

/// How a transfer ended, as the driver reports it ([`Transfers::transfer_done`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Refused, before it began (no such file, no permission) or after (a full disk, a
    /// failed rename): this reply.
    Refused(Reply),
    /// No data connection could be had (after the `150`): `425`.
    NoConnection(String),
    /// Every byte moved and was stored: `226` (deferred, [`ServerAction::Defer`]). MODE E
    /// connections the driver kept serve the next transfer.
    Complete,
    /// The transfer failed once it began: `426`.
    Failed(String),
}

/// The data-channel set-up in force.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Setup {
    None,
    Active,
    Passive,
}

/// What the machine waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wait {
    Nothing,
    /// A listener for this passive command.
    Listen(Passive),
    /// The end of a transfer; whether its data channel was checked, whether its `150` went
    /// out, how many `ABOR`s came (each gets its reply after the transfer's).
    Transfer {
        checked: bool,
        opened: bool,
        aborts: u32,
    },
}

/// The data-transfer machine of one session.
///
/// In: data-transfer commands ([`Transfers::handle_command`], only while not busy), `ABOR`
/// during a transfer ([`Transfers::abort`]), and what the driver did with the actions
/// ([`Transfers::listening`], [`Transfers::transfer_opening`], [`Transfers::transfer_done`]).
/// Out: [`ServerAction`]s. Every command gets exactly one final reply.
#[derive(Debug)]
pub struct Transfers {
    cfg: DataConfig,
    peers: Peers,
    prot_private: bool,
    /// The control connection is protected by GSI.
    gsi: bool,
    dcau: Dcau,
    mode: TransferMode,
    sbuf: Option<u64>,
    rest: Option<Restart>,
    allo: Option<u64>,
    setup: Setup,
    wait: Wait,
    actions: VecDeque<ServerAction>,
}

impl Transfers {
    /// A session's machine: MODE S, no set-up, data connections only to `peers`.
    pub fn new(cfg: DataConfig, peers: Peers) -> Transfers {
        Transfers {
            cfg,
            peers,
            prot_private: false,
            gsi: false,
            dcau: Dcau::None,
            mode: TransferMode::Stream,
            sbuf: None,
            rest: None,
            allo: None,
            setup: Setup::None,
            wait: Wait::Nothing,
            actions: VecDeque::new(),
        }
    }

    /// The next action for the driver, if one is due.
    pub fn poll_action(&mut self) -> Option<ServerAction> {
        self.actions.pop_front()
    }

    /// True while a listener or a transfer is awaited: commands other than `ABOR` must wait.
    pub fn is_busy(&self) -> bool {
        self.wait != Wait::Nothing
    }

    /// True while a transfer runs (between [`ServerAction::Transfer`] and its outcome).
    pub fn in_transfer(&self) -> bool {
        matches!(self.wait, Wait::Transfer { .. })
    }

    /// The transfer mode in force.
    pub fn mode(&self) -> TransferMode {
        self.mode
    }

    /// The socket buffer size the client asked for (`SBUF`).
    pub fn sbuf(&self) -> Option<u64> {
        self.sbuf
    }

    /// Who data connections may reach.
    pub fn peers(&self) -> Peers {
        self.peers
    }

    /// Sets whether the user may move data to and from other hosts (after the login).
    pub fn set_third_party(&mut self, allowed: bool) {
        self.peers.third_party = allowed;
    }

    /// Sets whether data connections are protected (`PROT P` in force).
    pub fn set_prot_private(&mut self, private: bool) {
        self.prot_private = private;
    }

    /// Notes that the control connection is protected by GSI (false is ignored: a session
    /// never leaves GSI). From then on data channels are authenticated as the session's own
    /// identity (`DCAU A`, GFD.020's default under GSI) until `DCAU` says otherwise.
    pub fn set_gsi(&mut self, gsi: bool) {
        if gsi && !self.gsi {
            self.gsi = true;
            self.dcau = Dcau::SelfId;
        }
    }

    /// The data-channel authentication in force.
    pub fn dcau(&self) -> &Dcau {
        &self.dcau
    }

    /// Takes the pending `REST` (for a transfer the driver runs itself, such as PLUT's).
    pub fn take_rest(&mut self) -> Option<Restart> {
        self.rest.take()
    }

    /// The driver dropped every data connection and set-up (for example after `SITE
    /// SETNETSTACK`): the next transfer needs a new `PORT` or `PASV`.
    pub fn reset_data(&mut self) {
        self.setup = Setup::None;
    }

    fn reply(&mut self, code: u16, text: impl Into<String>) {
        self.actions
            .push_back(ServerAction::Reply(Reply::new(code, text)));
    }

    /// Handles one command of the data-transfer family. While busy, only `ABOR` is taken (see
    /// [`Transfers::abort`]); anything else is refused with `503` (the session holds pipelined
    /// commands back, so this does not happen through [`super::Session`]).
    pub fn handle_command(&mut self, cmd: Command) {
        if self.is_busy() {
            return match cmd {
                Command::Abor => self.abort(),
                _ => self.reply(503, "Bad sequence of commands: a transfer is in progress."),
            };
        }
        match cmd {
            Command::Type(_) => self.reply(200, "Type set."),
            Command::Stru(_) => self.reply(200, "Structure set to F."),
            Command::Mode(m) => self.set_mode(m),
            Command::Allo(n) => {
                self.allo = Some(n);
                self.reply(200, "ALLO command successful.")
            }
            Command::Sbuf(n) => self.set_sbuf(n),
            Command::Dcau(m) => self.set_dcau(&m),
            Command::Rest(r) => {
                self.rest = Some(r);
                self.reply(
                    350,
                    "Restart Marker OK. Send STORE or RETR to initiate transfer.",
                )
            }
            Command::Abor => self.reply(226, "ABOR command successful; no transfer in progress."),
            Command::Port(a) => self.active(vec![a], "PORT"),
            Command::Eprt(a) => self.active(vec![a], "EPRT"),
            Command::Spor(addrs) => self.active(addrs, "SPOR"),
            Command::Pasv => self.passive(Passive::Pasv),
            Command::Epsv => self.passive(Passive::Epsv),
            Command::Spas => self.passive(Passive::Spas),
            Command::Retr(path) => self.transfer(TransferOp::Send { path, range: None }),
            Command::Eret {
                offset,
                length,
                path,
            } => self.transfer(TransferOp::Send {
                path,
                range: Some((offset, length)),
            }),
            Command::Stor(path) => self.receive(path, WriteKind::Stor),
            Command::Appe(path) => self.receive(path, WriteKind::Appe),
            Command::Esto { offset, path } => self.receive(path, WriteKind::Esto(offset)),
            Command::List(path) => self.list(path, ListKind::List),
            Command::Nlst(path) => self.list(path, ListKind::Nlst),
            Command::Mlsd(path) => self.list(path, ListKind::Mlsd),
            Command::Mlsr(path) => self.list(path, ListKind::Mlsr),
            other => self.reply(
                502,
                format!("{} is not a data-transfer command.", other.verb()),
            ),
        }
    }

    /// `MODE S` / `MODE E`; a change drops the cached data connections.
    fn set_mode(&mut self, m: TransferMode) {
        if m != self.mode {
            self.actions.push_back(ServerAction::DropCached);
        }
        self.mode = m;
        let c = if m == TransferMode::Extended {
            'E'
        } else {
            'S'
        };
        self.reply(200, format!("Mode set to {c}."))
    }

    /// `SBUF`: the socket buffer size of the data connections, 4 KiB to 1 GiB.
    fn set_sbuf(&mut self, n: u64) {
        if !(MIN_SBUF..=MAX_SBUF).contains(&n) {
            return self.reply(
                501,
                format!("SBUF {n} out of range {MIN_SBUF}..={MAX_SBUF}."),
            );
        }
        self.sbuf = Some(n);
        self.reply(200, "SBUF Command Successful.")
    }

    /// `DCAU N`, `DCAU A` or `DCAU S <subject>` (GFD.020 §5.1); A and S need GSI.
    fn set_dcau(&mut self, m: &str) {
        let (mode, subject) = m.split_once(' ').unwrap_or((m, ""));
        let subject = subject.trim();
        match mode.to_ascii_uppercase().as_str() {
            "N" => {
                self.dcau = Dcau::None;
                self.reply(200, "DCAU N.")
            }
            "A" if self.gsi => {
                self.dcau = Dcau::SelfId;
                self.reply(200, "DCAU A.")
            }
            "S" if self.gsi && !subject.is_empty() => {
                self.reply(200, format!("DCAU S {subject}."));
                self.dcau = Dcau::Subject(subject.to_string());
            }
            "S" if self.gsi => self.reply(501, "DCAU S needs a subject."),
            "A" | "S" => self.reply(
                504,
                format!(
                    "DCAU {mode} needs GSI (gsiftp://); haul protects ftp:// data channels with PROT P."
                ),
            ),
            _ => self.reply(501, format!("DCAU {mode}: the mode must be N, A or S.")),
        }
    }

    /// `PORT` / `EPRT` / `SPOR`: the client listens at `addrs`, which must be its own address
    /// (or any, with the third-party permission) and unprivileged ports, at most the parallelism
    /// limit. The old set-up is dropped either way.
    fn active(&mut self, addrs: Vec<SocketAddr>, verb: &str) {
        self.reset_data();
        let max = self.cfg.max_parallelism;
        if addrs.is_empty() || addrs.len() > max {
            self.actions.push_back(ServerAction::DropData);
            return self.reply(501, format!("{verb}: between 1 and {max} addresses."));
        }
        if let Some(why) = addrs.iter().find_map(|a| self.peers.refuse_port(a)) {
            self.actions.push_back(ServerAction::DropData);
            return self.reply(501, format!("{verb} refused: {why}."));
        }
        self.setup = Setup::Active;
        self.actions.push_back(ServerAction::Active(addrs));
        self.reply(200, format!("{verb} Command successful."))
    }

    /// `PASV` / `EPSV` / `SPAS`: asks the driver for a listener.
    fn passive(&mut self, kind: Passive) {
        self.reset_data();
        self.wait = Wait::Listen(kind);
        self.actions.push_back(ServerAction::Listen(kind));
    }

    /// The listener asked for by [`ServerAction::Listen`] is at `addr`, or could not be had.
    /// Ignored at any other time.
    pub fn listening(&mut self, result: Result<SocketAddr, String>) {
        let Wait::Listen(kind) = self.wait else {
            return;
        };
        self.wait = Wait::Nothing;
        let addr = match result {
            Ok(a) => a,
            Err(e) => return self.reply(425, format!("Can't open data connection: {e}")),
        };
        self.setup = Setup::Passive;
        let r = match kind {
            Passive::Pasv => Reply::new(
                227,
                format!("Entering Passive Mode ({})", format_port(&addr)),
            ),
            Passive::Epsv => Reply::new(
                229,
                format!("Entering Extended Passive Mode (|||{}|)", addr.port()),
            ),
            Passive::Spas => Reply::multi(
                229,
                vec![
                    "Entering Striped Passive Mode.".into(),
                    format!(" {}", format_port(&addr)),
                    "End".into(),
                ],
            ),
        };
        self.actions.push_back(ServerAction::Reply(r));
    }

    fn receive(&mut self, path: String, kind: WriteKind) {
        self.transfer(TransferOp::Receive { path, kind })
    }

    fn list(&mut self, path: Option<String>, kind: ListKind) {
        self.transfer(TransferOp::List { path, kind })
    }

    /// Starts a transfer; the driver checks its file first, then whether a data channel can be
    /// had ([`Transfers::data_channel_ready`]).
    fn transfer(&mut self, op: TransferOp) {
        let restart = self.rest.take();
        let allocate = self.allo.take();
        self.wait = Wait::Transfer {
            checked: false,
            opened: false,
            aborts: 0,
        };
        self.actions.push_back(ServerAction::Transfer(Transfer {
            op,
            restart,
            allocate,
            mode: self.mode,
        }));
    }

    /// Whether the running transfer can have a data channel: protected if it must be, and
    /// either `reused` MODE E connections or a `PORT` / `PASV` set-up. If not, the refusal
    /// (`521`, `425`) is queued and the transfer is over. False outside a transfer.
    pub fn data_channel_ready(&mut self, reused: bool) -> bool {
        let Wait::Transfer { checked, .. } = &mut self.wait else {
            return false;
        };
        if *checked {
            return true;
        }
        *checked = true;
        let refusal = if self.cfg.require_tls && !self.prot_private {
            Some((
                521,
                "Data connections must be protected on this server: send PROT P.",
            ))
        } else if !(reused && self.mode == TransferMode::Extended) && self.setup == Setup::None {
            Some((
                425,
                "Can't open data connection: send PORT, EPRT, SPOR, PASV, EPSV or SPAS first.",
            ))
        } else {
            None
        };
        match refusal {
            Some((code, text)) => {
                self.transfer_done(Outcome::Refused(Reply::new(code, text)));
                false
            }
            None => true,
        }
    }

    /// The transfer is about to move data: `125` on `reused` connections, else `150` (after
    /// [`Transfers::data_channel_ready`], which it calls if the driver did not). False when
    /// the transfer cannot go on: no data channel, or not in a transfer.
    pub fn transfer_opening(&mut self, reused: bool, sending: bool) -> bool {
        if !self.data_channel_ready(reused) {
            return false;
        }
        let Wait::Transfer { opened, aborts, .. } = &mut self.wait else {
            return false;
        };
        if *opened {
            return true;
        }
        *opened = true;
        if *aborts > 0 {
            // The client gave up before any data moved; the driver learns it from `Abort`.
            return true;
        }
        match (reused, sending && self.mode == TransferMode::Stream) {
            (true, _) => self.reply(125, "Beginning transfer; reusing existing data connection."),
            (false, true) => self.reply(150, "Opening data connection."),
            (false, false) => self.reply(150, "Beginning transfer."),
        }
        true
    }

    /// `ABOR` during a transfer: the first tells the driver to cut it short
    /// ([`ServerAction::Abort`]); every one is answered after the transfer's final reply.
    /// Outside a transfer, `ABOR` is answered at once.
    pub fn abort(&mut self) {
        match &mut self.wait {
            Wait::Transfer { aborts, .. } => {
                *aborts = aborts.saturating_add(1);
                if *aborts == 1 {
                    self.actions.push_back(ServerAction::Abort);
                }
            }
            _ => self.reply(226, "ABOR command successful; no transfer in progress."),
        }
    }

    /// The transfer ended. Ignored outside a transfer.
    pub fn transfer_done(&mut self, outcome: Outcome) {
        let Wait::Transfer { aborts, .. } = self.wait else {
            return;
        };
        self.wait = Wait::Nothing;
        let mut r = match outcome {
            Outcome::Refused(r) => r,
            Outcome::NoConnection(e) => Reply::new(425, format!("Can't open data connection: {e}")),
            Outcome::Complete => Reply::new(226, "Transfer Complete."),
            Outcome::Failed(e) => Reply::new(426, format!("Data connection closed: {e}")),
        };
        if aborts > 0 && r.code != 226 {
            r = Reply::new(426, format!("Transfer aborted: {}", r.text()));
        }
        if aborts > 0 {
            self.actions.push_back(ServerAction::Reply(r));
            for _ in 0..aborts {
                self.reply(226, "ABOR command successful.");
            }
        } else if r.code == 226 {
            self.actions.push_back(ServerAction::Defer(r));
        } else {
            self.actions.push_back(ServerAction::Reply(r));
        }
    }
}
