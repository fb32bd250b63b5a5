//! Commands about the server itself and the session's options: FEAT, HELP, SITE, OPTS, SYST,
//! NOOP, ACCT, REIN, and the verbs the parser does not know, among them haul's PLUT and DTOK.

use std::io;

use haul_proto::command::{RetrOptions, SiteCommand};
use haul_proto::{Command, Reply};
use haul_transport::checksum::Algorithm;

use super::Session;

impl Session<'_> {
    /// Answers a command about the server or the session's options (see the module doc).
    pub(super) fn feature_command(&mut self, cmd: Command) -> io::Result<()> {
        match cmd {
            Command::Feat => self.cmd_feat(),
            Command::Syst => self.ctl.reply(215, "UNIX Type: L8"),
            Command::Noop => self.ctl.reply(200, "NOOP command successful."),
            Command::Help(_) => self.help(214),
            Command::Opts { command, options } => self.cmd_opts(&command, &options),
            Command::Site(text) => self.cmd_site(&text),
            Command::Acct(_) => self.ctl.reply(202, "ACCT not needed."),
            Command::Rein => self
                .ctl
                .reply(502, "REIN not implemented; reconnect instead."),
            Command::Unknown { verb, arg } if verb == "PLUT" => self.cmd_plut(&arg),
            Command::Unknown { verb, .. } if verb == "DTOK" => self.cmd_dtok(),
            Command::Unknown { verb, .. } => {
                self.ctl.reply(500, format!("Unknown command {verb}."))
            }
            _ => unreachable!("dispatch routes only FEAT, OPTS, SITE and the like here"),
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
            "MLSR".to_string(),
            "MFMT".to_string(),
            "WHOAMI".to_string(),
            format!("CKSM {algs}"),
            "HAUL 1".to_string(),
            "PLUT 1;START".to_string(),
            "DTOK".to_string(),
        ];
        if self.shared.cfg.relay.is_some() {
            feats.push("RELAY".to_string());
        }
        if self.shared.cfg.predictions.is_some() {
            feats.push("BTC".to_string());
        }
        if self.shared.cfg.registry.is_some() {
            feats.push("BTCREG".to_string());
        }
        if self.shared.tls().is_some() {
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
            "    MDTM    MFMT    MKD     MLSD    MLSR    MLST    MODE    NLST".to_string(),
            "    NOOP    OPTS    PASS    PASV    PBSZ    PORT    PROT    PWD".to_string(),
            "    QUIT    REST    RETR    RMD     RNFR    RNTO    SBUF    SITE".to_string(),
            "    SIZE    SPAS    SPOR    STAT    STOR    STRU    SYST    TYPE".to_string(),
            "    USER".to_string(),
            "SITE commands:".to_string(),
            "    CHGRP   CHMOD   UTIME   WHOAMI  SETDISKSTACK     CLIENTINFO".to_string(),
            "End".to_string(),
        ];
        self.ctl.send(&Reply::multi(code, lines))
    }

    fn cmd_site(&mut self, text: &str) -> io::Result<()> {
        let cmd = match SiteCommand::parse(text) {
            Ok(c) => c,
            Err(e) => return self.ctl.reply(501, format!("{e}.")),
        };
        let (sub, rest) = match cmd {
            SiteCommand::Chmod { mode, path } => return self.cmd_site_chmod(mode, &path),
            SiteCommand::Chgrp { group, path } => return self.cmd_site_chgrp(&group, &path),
            SiteCommand::Utime { time, path } => return self.cmd_site_utime(time, &path),
            SiteCommand::SetDiskStack(stack) => return self.cmd_setdiskstack(&stack),
            SiteCommand::Whoami => return self.ctl.reply(200, self.user_name.clone()),
            SiteCommand::Other { sub, arg } => (sub, arg),
        };
        match sub.as_str() {
            "HELP" => self.help(214),
            "CLIENTINFO" => self.ctl.reply(250, "OK."),
            "SETNETSTACK" => self.cmd_setnetstack(rest.trim()),
            "RELAY" => self.cmd_relay(rest.trim()),
            "BTC" if rest.trim().is_empty() => self.cmd_btc(),
            "BTC" if rest.trim().eq_ignore_ascii_case("ALL") => self.cmd_btc_all(),
            "BTC" => self.ctl.reply(
                501,
                format!("SITE BTC {}: expected no argument or ALL.", rest.trim()),
            ),
            _ => self.ctl.reply(500, format!("SITE {sub} not understood.")),
        }
    }

    /// `SITE SETDISKSTACK stack` (`globus-url-copy -fsstack`): haul's storage is the plain file
    /// system, Globus's `file` driver, so that stack is accepted and any other refused, as the
    /// Globus server refuses a driver it does not have.
    fn cmd_setdiskstack(&mut self, stack: &str) -> io::Result<()> {
        if stack.eq_ignore_ascii_case("file") {
            return self.ctl.reply(250, "OK.");
        }
        let bad = stack
            .split(',')
            .find(|d| !d.trim().eq_ignore_ascii_case("file"))
            .unwrap_or(stack);
        self.ctl.reply(
            504,
            format!("SITE SETDISKSTACK {stack}: this server stores through the file driver only, not {bad:?}."),
        )
    }

    /// `SITE BTC`: this server's current throughput predictions for the peers it has served,
    /// one `peer=…;dir=…;bps=…;predictor=…;age=…;samples=…;` line each, and whether it relays
    /// (haul extension, docs/protocol.md), so clients can choose routes without a central
    /// service.
    fn cmd_btc(&mut self) -> io::Result<()> {
        let Some(p) = self.shared.cfg.predictions.clone() else {
            return self
                .ctl
                .reply(504, "SITE BTC: this server keeps no history.");
        };
        let mut lines = vec!["BTC predictions".to_string()];
        lines.extend(p.current().iter().map(|x| format!(" {}", x.line())));
        let relays = if self.shared.cfg.relay.is_some() {
            "yes"
        } else {
            "no"
        };
        lines.push(format!(" relay={relays};"));
        lines.push("End.".to_string());
        self.ctl.send(&Reply::multi(211, lines))
    }

    /// `SITE BTC ALL`: every prediction this server, an aggregating registry, holds of the
    /// servers it polls, each line naming the server that made it and its peer, with one line
    /// per server that answered its last poll (haul extension, docs/protocol.md).
    fn cmd_btc_all(&mut self) -> io::Result<()> {
        let Some(r) = self.shared.cfg.registry.clone() else {
            return self.ctl.reply(
                504,
                "SITE BTC ALL: this server is not a registry (--registry-gather).",
            );
        };
        let snap = r.snapshot();
        let mut lines = vec!["BTC registry".to_string()];
        lines.extend(snap.servers.iter().map(|s| format!(" {}", s.line())));
        lines.extend(snap.reported.iter().map(|p| format!(" {}", p.line())));
        lines.push("End.".to_string());
        self.ctl.send(&Reply::multi(211, lines))
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
            "RELAY" => self.relay_opts(options),
            _ => self
                .ctl
                .reply(501, format!("OPTS {command} not understood.")),
        }
    }
}
