//! The data-transfer family: the settings of the next transfer (TYPE, STRU, MODE, ALLO, SBUF,
//! DCAU, REST) and the commands that set up a data channel or run a transfer over one, which
//! `transfer`, `upload` and `plut_transfer` carry out.

use std::io;

use haul_proto::command::{Restart, TransferMode};
use haul_proto::Command;

use super::Session;
use crate::transfer::{ListKind, Passive, WriteKind};

impl Session<'_> {
    /// Answers a command of the data-transfer family (see the module doc); RETR, ERET and STOR
    /// go over PLUT once the client selected it.
    pub(super) fn transfer_command(&mut self, cmd: Command) -> io::Result<()> {
        match cmd {
            Command::Type(_) => self.ctl.reply(200, "Type set."),
            Command::Stru(_) => self.ctl.reply(200, "Structure set to F."),
            Command::Mode(m) => self.cmd_mode(m),
            Command::Allo(_) => self.ctl.reply(200, "ALLO command successful."),
            Command::Sbuf(n) => self.cmd_sbuf(n),
            Command::Dcau(m) => self.cmd_dcau(&m),
            Command::Rest(r) => self.cmd_rest(r),
            Command::Abor => self
                .ctl
                .reply(226, "ABOR command successful; no transfer in progress."),
            Command::Port(a) => self.cmd_port(vec![a], "PORT"),
            Command::Eprt(a) => self.cmd_port(vec![a], "EPRT"),
            Command::Spor(addrs) => self.cmd_port(addrs, "SPOR"),
            Command::Pasv => self.cmd_passive(Passive::Pasv),
            Command::Epsv => self.cmd_passive(Passive::Epsv),
            Command::Spas => self.cmd_passive(Passive::Spas),
            Command::Retr(p) if self.plut.enabled() => self.plut_retr(&p, None),
            Command::Eret {
                offset,
                length,
                path,
            } if self.plut.enabled() => self.plut_retr(&path, Some((offset, length))),
            Command::Stor(p) if self.plut.enabled() => self.plut_stor(&p),
            Command::Retr(p) => self.cmd_retr(&p, None),
            Command::Eret {
                offset,
                length,
                path,
            } => self.cmd_retr(&path, Some((offset, length))),
            Command::Stor(p) => self.cmd_stor(&p, WriteKind::Stor),
            Command::Appe(p) => self.cmd_stor(&p, WriteKind::Appe),
            Command::Esto { offset, path } => self.cmd_stor(&path, WriteKind::Esto(offset)),
            Command::List(p) => self.cmd_listing(p.as_deref(), ListKind::List),
            Command::Nlst(p) => self.cmd_listing(p.as_deref(), ListKind::Nlst),
            Command::Mlsd(p) => self.cmd_listing(p.as_deref(), ListKind::Mlsd),
            _ => unreachable!("dispatch routes only data-transfer commands here"),
        }
    }

    /// `MODE S` / `MODE E`; cached data connections are dropped when the mode changes.
    fn cmd_mode(&mut self, m: TransferMode) -> io::Result<()> {
        if m != self.mode {
            self.data.drop_cached();
        }
        self.mode = m;
        let c = if m == TransferMode::Extended {
            'E'
        } else {
            'S'
        };
        self.ctl.reply(200, format!("Mode set to {c}."))
    }

    /// `DCAU`: only `N` (no data-channel authentication) is accepted.
    fn cmd_dcau(&mut self, m: &str) -> io::Result<()> {
        if m.eq_ignore_ascii_case("N") {
            self.ctl.reply(200, "DCAU N.")
        } else {
            self.ctl.reply(
                504,
                format!("DCAU {m} not supported: haul protects data channels with PROT P."),
            )
        }
    }

    /// `REST`: where the next RETR or STOR starts.
    fn cmd_rest(&mut self, r: Restart) -> io::Result<()> {
        self.rest = Some(r);
        self.ctl.reply(
            350,
            "Restart Marker OK. Send STORE or RETR to initiate transfer.",
        )
    }

    /// `SBUF`: the socket buffer size of the data connections, 4 KiB to 1 GiB.
    fn cmd_sbuf(&mut self, n: u64) -> io::Result<()> {
        if !(4096..=(1 << 30)).contains(&n) {
            return self
                .ctl
                .reply(501, format!("SBUF {n} out of range 4096..=1073741824."));
        }
        self.data.sbuf = Some(n as usize);
        self.ctl.reply(200, "SBUF Command Successful.")
    }
}
