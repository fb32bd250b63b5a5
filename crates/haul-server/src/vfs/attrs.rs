//! Changes to a name's attributes (mode, group, modification time) for `SITE CHMOD`,
//! `SITE CHGRP`, `SITE UTIME` and `MFMT`. The name is opened once, beneath its parent's handle
//! and without following a symlink (`O_PATH | O_NOFOLLOW`); a symlink is refused, and the change
//! is made to the inode that handle holds, through the handle itself (`AT_EMPTY_PATH`, or the
//! handle's `/proc/self/fd` link, which leads to that inode and nowhere else), so the name is
//! never resolved twice.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use super::{check, errno, meta_of, openat, Parent};

/// A handle of one name that is not a symlink.
struct Node(OwnedFd);

impl Node {
    /// The path of the handle's own link in `/proc`, for the calls that take no descriptor of
    /// an `O_PATH` handle.
    fn proc_path(&self) -> io::Result<CString> {
        CString::new(format!("/proc/self/fd/{}", self.0.as_raw_fd()))
            .map_err(|_| io::Error::other("descriptor path with a NUL byte"))
    }
}

impl Parent {
    /// Opens the name as a handle; a symlink is refused with `ELOOP` (never changed, never
    /// followed).
    fn node(&self) -> io::Result<Node> {
        let fd = openat(
            self.dir.as_raw_fd(),
            &self.name,
            libc::O_PATH | libc::O_NOFOLLOW,
            0,
        )?;
        let dup = OwnedFd::try_clone(&fd)?;
        if meta_of(dup)?.file_type().is_symlink() {
            return Err(errno(libc::ELOOP));
        }
        Ok(Node(fd))
    }

    /// Sets the mode bits (`chmod`) of the name.
    pub fn set_mode(&self, mode: u32) -> io::Result<()> {
        // The handle stays open until the call is made: its link names it.
        let node = self.node()?;
        let path = node.proc_path()?;
        // SAFETY: a NUL-terminated path.
        let rc = check(libc::c_long::from(unsafe {
            libc::chmod(path.as_ptr(), mode as libc::mode_t)
        }));
        drop(node);
        rc.map(drop)
    }

    /// Sets the group (`chown(-1, gid)`) of the name.
    pub fn set_group(&self, gid: u32) -> io::Result<()> {
        let node = self.node()?;
        // SAFETY: a valid descriptor, an empty NUL-terminated path and AT_EMPTY_PATH, which
        // makes the call act on the descriptor itself.
        check(libc::c_long::from(unsafe {
            libc::fchownat(
                node.0.as_raw_fd(),
                c"".as_ptr(),
                libc::uid_t::MAX,
                gid,
                libc::AT_EMPTY_PATH,
            )
        }))
        .map(drop)
    }

    /// Sets the modification time of the name to Unix seconds `secs`, leaving its access time.
    pub fn set_mtime(&self, secs: i64) -> io::Result<()> {
        let node = self.node()?;
        let path = node.proc_path()?;
        let times = [
            libc::timespec {
                tv_sec: 0,
                tv_nsec: libc::UTIME_OMIT,
            },
            libc::timespec {
                tv_sec: secs as libc::time_t,
                tv_nsec: 0,
            },
        ];
        // SAFETY: a NUL-terminated path and two timespecs.
        let rc = check(libc::c_long::from(unsafe {
            libc::utimensat(libc::AT_FDCWD, path.as_ptr(), times.as_ptr(), 0)
        }));
        drop(node);
        rc.map(drop)
    }
}
