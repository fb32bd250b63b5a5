//! The fuzz input of `server_machine`: the commands, the driver's decisions, and what the
//! harness knows of the protocol (the user table, which commands are which).

use std::net::IpAddr;

use haul_proto::server::{ListKind, TransferOp, WriteKind};
use haul_proto::Command;

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
            | Command::Mlsr(_)
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
        Command::Mlsr(p) => list(p, ListKind::Mlsr),
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
