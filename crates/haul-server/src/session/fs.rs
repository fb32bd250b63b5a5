//! The file-system family (PWD, CWD, CDUP, SIZE, MDTM, MLST, STAT, MKD, RMD, DELE, RNFR,
//! RNTO; CKSM lives in `cksm`), and the path helpers every command that names a file uses.

use std::io;

use haul_proto::{Command, Reply};

use super::{fs_error, Session};
use crate::listing;
use crate::vfs::{is_part_name, Parent, Root, Target};

impl Session<'_> {
    /// Answers a command of the file-system family (see the module doc).
    pub(super) fn fs_command(&mut self, cmd: Command) -> io::Result<()> {
        match cmd {
            Command::Pwd => self.cmd_pwd(),
            Command::Cwd(p) => self.cmd_cwd(&p),
            Command::Cdup => self.cmd_cwd(".."),
            Command::Size(p) => self.cmd_size(&p),
            Command::Mdtm(p) => self.cmd_mdtm(&p),
            Command::Mlst(p) => self.cmd_mlst(p.as_deref()),
            Command::Stat(p) => self.cmd_stat(p.as_deref()),
            Command::Cksm {
                algorithm,
                offset,
                length,
                path,
            } => self.cmd_cksm(&algorithm, offset, length, &path),
            Command::Mkd(p) => self.cmd_mkd(&p),
            Command::Rmd(p) => self.cmd_remove(&p, true),
            Command::Dele(p) => self.cmd_remove(&p, false),
            Command::Rnfr(p) => self.cmd_rnfr(&p),
            Command::Rnto(p) => self.cmd_rnto(&p),
            _ => unreachable!("dispatch routes only file-system commands here"),
        }
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
                self.answer(
                    550,
                    format!("{arg}: not a regular file or directory (virtual device)"),
                )?;
                Ok(None)
            }
        }
    }

    /// The parent handle of `virt` for a change to its name; replies 550 when it cannot be had,
    /// or (553) when the name is reserved for upload part files and `refuse_part` is set.
    pub(crate) fn parent_of(
        &mut self,
        virt: &str,
        refuse_part: bool,
    ) -> io::Result<Option<Parent>> {
        if refuse_part && virt.rsplit('/').next().is_some_and(is_part_name) {
            self.answer(553, format!("{virt}: names of the form .NAME.haul-part are reserved for uploads in progress"))?;
            return Ok(None);
        }
        match self.shared.vfs.parent(virt) {
            Ok(p) => Ok(Some(p)),
            Err(e) => {
                tracing::warn!(path = virt, error = %e, "path refused");
                self.answer(550, fs_error(virt, &e))?;
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
        self.answer(550, format!("Permission denied ({why})."))?;
        Ok(false)
    }

    /// `PWD`: the current directory, quoted as RFC 959 says (`"` doubled).
    fn cmd_pwd(&mut self) -> io::Result<()> {
        let cwd = self.cwd.replace('"', "\"\"");
        self.ctl
            .reply(257, format!("\"{cwd}\" is current directory."))
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

    /// The checks every change to a name makes: a user who may write, a real path, not the
    /// root when `root_verb` names the change (`removed`, `renamed`), and the parent handle
    /// (`refuse_part`: see [`Session::parent_of`]). Replies and returns None when one fails.
    fn name_to_change(
        &mut self,
        arg: &str,
        root_verb: Option<&str>,
        refuse_part: bool,
    ) -> io::Result<Option<(String, Parent)>> {
        if !self.check_write()? {
            return Ok(None);
        }
        let Some(virt) = self.resolve_real(arg)? else {
            return Ok(None);
        };
        if let Some(verb) = root_verb.filter(|_| virt == "/") {
            let why = format!("/: Permission denied (the served root cannot be {verb})");
            return self.ctl.reply(550, why).map(|()| None);
        }
        Ok(self.parent_of(&virt, refuse_part)?.map(|p| (virt, p)))
    }

    fn cmd_mkd(&mut self, arg: &str) -> io::Result<()> {
        let Some((virt, parent)) = self.name_to_change(arg, None, true)? else {
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
        let Some((virt, parent)) = self.name_to_change(arg, Some("removed"), false)? else {
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
        let Some((virt, parent)) = self.name_to_change(arg, Some("renamed"), true)? else {
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
        let Some((virt, to)) = self.name_to_change(arg, None, true)? else {
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
