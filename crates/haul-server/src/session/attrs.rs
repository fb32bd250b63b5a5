//! The attribute family, as the Globus server has it: `MFMT` (draft-somers-ftp-mfxx) and
//! `SITE UTIME` set a modification time, `SITE CHMOD` a mode, `SITE CHGRP` a group. Each is a
//! write: it needs a user who may write, a real path inside the root that is not an upload's
//! part file, and a name that is not a symlink; the change is made through the handle the
//! confinement opened (`vfs::Parent`), never by the name again.

use std::ffi::CString;
use std::io;

use haul_proto::command::ModTime;

use super::{fs_error, Session};
use crate::listing;
use crate::vfs::Parent;

/// What an attribute command changes.
enum Change {
    /// The modification time.
    Mtime(ModTime),
    /// The permission bits.
    Mode(u32),
    /// The group, by id.
    Group(u32),
}

/// The mode bits `SITE CHMOD` may set: permissions only. Set-user-ID, set-group-ID and sticky
/// bits are refused: files a server running as root created are root's, and a set-user-ID
/// root file is a way onto the host.
const PERMISSION_BITS: u32 = 0o777;

impl Session<'_> {
    /// `MFMT time path`: `213 Modify=YYYYMMDDHHMMSS; path` (draft-somers-ftp-mfxx §3).
    pub(super) fn cmd_mfmt(&mut self, time: ModTime, arg: &str) -> io::Result<()> {
        let Some((virt, parent)) = self.attr_target(arg)? else {
            return Ok(());
        };
        if let Err(e) = change(&parent, Change::Mtime(time)) {
            return self.ctl.reply(550, fs_error(&virt, &e));
        }
        let now = match parent.lstat() {
            Ok(Some(m)) => listing::mdtm(&m),
            _ => time.to_string(),
        };
        self.ctl.reply(213, format!("Modify={now}; {arg}"))
    }

    /// `SITE UTIME time path`: `250` once the modification time is set.
    pub(super) fn cmd_site_utime(&mut self, time: ModTime, arg: &str) -> io::Result<()> {
        self.site_change(arg, Change::Mtime(time), "UTIME")
    }

    /// `SITE CHMOD mode path`: `250` once the mode is set; special bits are refused (`501`).
    pub(super) fn cmd_site_chmod(&mut self, mode: u32, arg: &str) -> io::Result<()> {
        if mode & !PERMISSION_BITS != 0 {
            return self.ctl.reply(
                501,
                format!("SITE CHMOD {mode:o}: only permission bits (0-777) are set by this server; set-user-ID, set-group-ID and sticky bits are refused."),
            );
        }
        self.site_change(arg, Change::Mode(mode), "CHMOD")
    }

    /// `SITE CHGRP group path`: `250` once the group is set, when it is one of the server
    /// process's own groups; `550` otherwise.
    pub(super) fn cmd_site_chgrp(&mut self, group: &str, arg: &str) -> io::Result<()> {
        let gid = match group_id(group) {
            Ok(Some(g)) => g,
            Ok(None) => {
                return self
                    .ctl
                    .reply(550, format!("SITE CHGRP: no group {group:?}."))
            }
            Err(e) => {
                return self
                    .ctl
                    .reply(550, format!("SITE CHGRP: group {group:?}: {e}"))
            }
        };
        if !own_groups().contains(&gid) {
            return self.ctl.reply(
                550,
                format!("SITE CHGRP: group {group:?} is not one of this server's groups, the only ones it sets."),
            );
        }
        self.site_change(arg, Change::Group(gid), "CHGRP")
    }

    fn site_change(&mut self, arg: &str, what: Change, verb: &str) -> io::Result<()> {
        let Some((virt, parent)) = self.attr_target(arg)? else {
            return Ok(());
        };
        match change(&parent, what) {
            Ok(()) => self
                .ctl
                .reply(250, format!("SITE {verb} command successful.")),
            Err(e) => self.ctl.reply(550, fs_error(&virt, &e)),
        }
    }

    /// The checks of every attribute change (see the module doc); replies and returns None
    /// when one fails.
    fn attr_target(&mut self, arg: &str) -> io::Result<Option<(String, Parent)>> {
        if !self.check_write()? {
            return Ok(None);
        }
        let Some(virt) = self.resolve_real(arg)? else {
            return Ok(None);
        };
        if virt == "/" {
            let why = "/: Permission denied (the served root's attributes are not changed)";
            return self.ctl.reply(550, why).map(|()| None);
        }
        Ok(self.parent_of(&virt, true)?.map(|p| (virt, p)))
    }
}

fn change(parent: &Parent, what: Change) -> io::Result<()> {
    match what {
        Change::Mtime(t) => parent.set_mtime(t.unix_seconds()),
        Change::Mode(m) => parent.set_mode(m),
        Change::Group(g) => parent.set_group(g),
    }
}

/// The id of group `name` (a name, or a number), None if there is no such group.
fn group_id(name: &str) -> io::Result<Option<u32>> {
    if let Ok(n) = name.parse::<u32>() {
        return Ok(Some(n));
    }
    let c = CString::new(name).map_err(|_| io::Error::other("a NUL byte in the name"))?;
    // SAFETY: all-zero is a valid `struct group` to be filled in.
    let mut grp: libc::group = unsafe { std::mem::zeroed() };
    let mut buf = vec![0 as libc::c_char; 16 << 10];
    let mut found: *mut libc::group = std::ptr::null_mut();
    // SAFETY: a NUL-terminated name, a group struct, a buffer of the length given and a
    // result pointer, all live for the call.
    let rc = unsafe {
        libc::getgrnam_r(
            c.as_ptr(),
            &mut grp,
            buf.as_mut_ptr(),
            buf.len(),
            &mut found,
        )
    };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Ok((!found.is_null()).then_some(grp.gr_gid))
}

/// The server process's effective group and supplementary groups.
fn own_groups() -> Vec<u32> {
    // SAFETY: getegid cannot fail.
    let mut out = vec![unsafe { libc::getegid() }];
    let mut groups = vec![0 as libc::gid_t; 256];
    // SAFETY: a buffer of the length given.
    let n = unsafe { libc::getgroups(groups.len() as libc::c_int, groups.as_mut_ptr()) };
    if let Ok(n) = usize::try_from(n) {
        out.extend_from_slice(&groups[..n.min(groups.len())]);
    }
    out
}
