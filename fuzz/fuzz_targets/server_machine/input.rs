//! The fuzz input of `server_machine`: the commands, the driver's decisions, and what the
//! harness knows of the protocol (the user table, which commands are which).

use std::collections::VecDeque;
use std::net::IpAddr;

use haul_proto::server::{ListKind, TransferOp, Verdict, WriteKind};
use haul_proto::{Command, LineBuffer, LineError, Reply};

/// Every command in `data`, as the server reads them: an over-long line ends the session, a
/// line that is not UTF-8 or does not parse is answered outside the machine.
pub fn commands(data: &[u8]) -> VecDeque<Command> {
    let mut b = LineBuffer::new(haul_proto::MAX_LINE);
    b.extend(data);
    let mut out = VecDeque::new();
    loop {
        match b.next_line() {
            Ok(Some(l)) => out.extend(Command::parse(&l).ok()),
            Ok(None) | Err(LineError::TooLong { .. }) => return out,
            Err(_) => {}
        }
    }
}

/// The verdict of the harness's user table (`alice` / `pw`; `full` is refused, a session
/// limit; anonymous names get in with any password) and the reply it brings.
pub fn verdict(user: &str, pass: &str) -> (Verdict, u16) {
    match user {
        "alice" if pass == "pw" => (Verdict::Accepted, 230),
        "anonymous" | "ftp" => (Verdict::Accepted, 230),
        "full" => (
            Verdict::Refused(Reply::new(421, "Too many sessions for full.")),
            421,
        ),
        _ => (Verdict::Rejected, 530),
    }
}

pub fn is_transfer(c: &Command) -> bool {
    matches!(
        c,
        Command::Retr(_)
            | Command::Eret { .. }
            | Command::Stor(_)
            | Command::Appe(_)
            | Command::Esto { .. }
            | Command::List(_)
            | Command::Nlst(_)
            | Command::Mlsd(_)
    )
}

/// What a transfer command asks the driver to move.
pub fn expected_op(c: &Command) -> Option<TransferOp> {
    let receive = |path: &String, kind| TransferOp::Receive {
        path: path.clone(),
        kind,
    };
    let list = |path: &Option<String>, kind| TransferOp::List {
        path: path.clone(),
        kind,
    };
    Some(match c {
        Command::Retr(path) => TransferOp::Send {
            path: path.clone(),
            range: None,
        },
        Command::Eret {
            offset,
            length,
            path,
        } => TransferOp::Send {
            path: path.clone(),
            range: Some((*offset, *length)),
        },
        Command::Stor(p) => receive(p, WriteKind::Stor),
        Command::Appe(p) => receive(p, WriteKind::Appe),
        Command::Esto { offset, path } => receive(path, WriteKind::Esto(*offset)),
        Command::List(p) => list(p, ListKind::List),
        Command::Nlst(p) => list(p, ListKind::Nlst),
        Command::Mlsd(p) => list(p, ListKind::Mlsd),
        _ => return None,
    })
}

/// The commands that may run before the login besides the login family.
pub fn is_server_command(c: &Command) -> bool {
    matches!(
        c,
        Command::Feat | Command::Syst | Command::Noop | Command::Help(_) | Command::Opts { .. }
    )
}

pub fn is_login_family(c: &Command) -> bool {
    matches!(
        c,
        Command::User(_)
            | Command::Pass(_)
            | Command::Auth(_)
            | Command::Pbsz(_)
            | Command::Prot(_)
            | Command::Quit
    )
}

/// An address as the kernel reports it for either family.
pub fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// The driver's decisions; 0 once they run out.
pub struct Decisions<'a>(pub &'a [u8]);

impl Decisions<'_> {
    pub fn next(&mut self) -> u8 {
        let Some((&b, rest)) = self.0.split_first() else {
            return 0;
        };
        self.0 = rest;
        b
    }
}
