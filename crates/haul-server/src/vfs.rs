//! The served root, confined by construction. A session names files by virtual absolute paths
//! under `/` (`.`/`..` removed lexically, never above `/`); every file operation goes through
//! [`Root`], which holds a directory handle of the root and resolves each path once, in the
//! kernel, with `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`: a path, or a symlink met on
//! the way, that leads outside the root fails with `EXDEV` whatever the file system looks like
//! at that instant, so no check can be raced. What is then done to the file is done to the
//! handle that the resolution gave (never to the name again); names that are created, removed
//! or renamed are the last component under a handle of their parent directory, and are never
//! followed when they are symlinks (`O_NOFOLLOW`, `unlinkat`, `renameat`). No part of the
//! server opens a path by string.
//!
//! `/dev/zero` and `/dev/null` are virtual devices for memory-to-memory runs, as Globus servers
//! expose them.

use std::ffi::{CStr, CString, OsString};
use std::fs::{File, Metadata};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::Path;

/// Virtual path of the endless zero source.
pub const DEV_ZERO: &str = "/dev/zero";
/// Virtual path of the discarding sink.
pub const DEV_NULL: &str = "/dev/null";

/// Suffix of the hidden file an upload writes before it is renamed into place.
const PART_SUFFIX: &str = ".haul-part";

/// What a command's path argument names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// The virtual `/dev/zero`.
    Zero,
    /// The virtual `/dev/null`.
    Null,
    /// A normalised virtual path inside the root, e.g. `/a/b`.
    Path(String),
}

/// The served root: a handle of its directory.
#[derive(Debug)]
pub struct Root {
    dir: OwnedFd,
}

/// A directory handle and one name in it: where a file is created, removed or renamed.
#[derive(Debug)]
pub struct Parent {
    dir: OwnedFd,
    name: CString,
}

/// One directory entry with its metadata.
pub struct Entry {
    /// The entry's name.
    pub name: String,
    /// Metadata of what the entry leads to inside the root, or of the symlink itself when it
    /// leads outside (or nowhere).
    pub meta: Metadata,
}

fn errno(e: i32) -> io::Error {
    io::Error::from_raw_os_error(e)
}

fn cstr(bytes: &[u8]) -> io::Result<CString> {
    CString::new(bytes)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))
}

/// Returns the fd of a successful `*at` call, or the error.
fn check(rc: libc::c_long) -> io::Result<RawFd> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc as RawFd)
    }
}

/// `openat2(dir, path, flags, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`; where the kernel has
/// no `openat2` (older than 5.6, or a seccomp filter), the same walked one component at a time
/// with `O_NOFOLLOW`, which refuses every symlink instead of only the escaping ones.
fn open_beneath(dir: RawFd, path: &CStr, flags: i32, mode: u32) -> io::Result<OwnedFd> {
    // SAFETY: all-zero is a valid open_how (no flags, no mode, no resolve bits).
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (flags | libc::O_CLOEXEC) as u64;
    how.mode = if flags & libc::O_CREAT != 0 {
        u64::from(mode)
    } else {
        0
    };
    how.resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS;
    loop {
        // SAFETY: a valid dirfd, a NUL-terminated path and an open_how of the size passed.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_openat2,
                dir,
                path.as_ptr(),
                &how as *const libc::open_how,
                size_of::<libc::open_how>(),
            )
        };
        match check(rc) {
            // SAFETY: the kernel just returned this descriptor to us.
            Ok(fd) => return Ok(unsafe { OwnedFd::from_raw_fd(fd) }),
            Err(e)
                if e.raw_os_error() == Some(libc::EAGAIN)
                    || e.raw_os_error() == Some(libc::EINTR) =>
            {
                continue
            }
            Err(e)
                if e.raw_os_error() == Some(libc::ENOSYS)
                    || e.raw_os_error() == Some(libc::EPERM) =>
            {
                return walk_nofollow(dir, path.to_bytes(), flags, mode)
            }
            Err(e) => return Err(e),
        }
    }
}

/// The `openat2` fallback: each component opened with `O_NOFOLLOW`; `..` never appears in a
/// normalised virtual path, and is refused if it does.
fn walk_nofollow(dir: RawFd, path: &[u8], flags: i32, mode: u32) -> io::Result<OwnedFd> {
    let parts: Vec<&[u8]> = path
        .split(|b| *b == b'/')
        .filter(|p| !p.is_empty() && *p != b".")
        .collect();
    if parts.iter().any(|p| *p == b"..") {
        return Err(errno(libc::EXDEV));
    }
    // SAFETY: duplicating a descriptor we hold.
    let mut cur = unsafe {
        OwnedFd::from_raw_fd(check(libc::c_long::from(libc::fcntl(
            dir,
            libc::F_DUPFD_CLOEXEC,
            0,
        )))?)
    };
    let Some((last, dirs)) = parts.split_last() else {
        let dot = cstr(b".")?;
        return openat(cur.as_raw_fd(), &dot, flags | libc::O_NOFOLLOW, mode);
    };
    for p in dirs {
        cur = openat(
            cur.as_raw_fd(),
            &cstr(p)?,
            libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW,
            0,
        )?;
    }
    openat(
        cur.as_raw_fd(),
        &cstr(last)?,
        flags | libc::O_NOFOLLOW,
        mode,
    )
}

/// Plain `openat` of one name under `dir`.
fn openat(dir: RawFd, name: &CStr, flags: i32, mode: u32) -> io::Result<OwnedFd> {
    loop {
        // SAFETY: a valid dirfd and a NUL-terminated name.
        let rc = unsafe {
            libc::openat(
                dir,
                name.as_ptr(),
                flags | libc::O_CLOEXEC,
                mode as libc::c_uint,
            )
        };
        match check(libc::c_long::from(rc)) {
            // SAFETY: the kernel just returned this descriptor to us.
            Ok(fd) => return Ok(unsafe { OwnedFd::from_raw_fd(fd) }),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
}

/// Metadata of whatever `fd` refers to (an `O_PATH` handle included).
fn meta_of(fd: OwnedFd) -> io::Result<Metadata> {
    File::from(fd).metadata()
}

/// The root-relative form of a normalised virtual path (`.` for the root itself).
fn relative(virt: &str) -> io::Result<CString> {
    let rel = virt.trim_start_matches('/');
    cstr(if rel.is_empty() { b"." } else { rel.as_bytes() })
}

/// True if `name` is the name of an upload's part file, which no command may create or rename
/// onto by name.
pub fn is_part_name(name: &str) -> bool {
    name.starts_with('.') && name.ends_with(PART_SUFFIX) && name.len() > 1 + PART_SUFFIX.len()
}

/// The part-file name of an upload to `name`.
pub fn part_name(name: &CStr) -> io::Result<CString> {
    let mut v = b".".to_vec();
    v.extend_from_slice(name.to_bytes());
    v.extend_from_slice(PART_SUFFIX.as_bytes());
    cstr(&v)
}

impl Root {
    /// Opens a handle of `root`, which must be a directory.
    pub fn new(root: &Path) -> io::Result<Root> {
        let c = cstr(root.as_os_str().as_bytes())?;
        let dir = openat(libc::AT_FDCWD, &c, libc::O_PATH | libc::O_DIRECTORY, 0)?;
        Ok(Root { dir })
    }

    /// Normalises `arg` against the virtual `cwd` into an absolute virtual path. `~` is `/`.
    pub fn normalize(cwd: &str, arg: &str) -> String {
        let arg = arg.trim_end_matches(['\r', '\n']);
        let (base, rest) = if arg == "~" {
            ("/", "")
        } else if let Some(r) = arg.strip_prefix("~/") {
            ("/", r)
        } else if arg.starts_with('/') {
            ("/", arg)
        } else {
            (cwd, arg)
        };
        let mut parts: Vec<&str> = base.split('/').filter(|p| !p.is_empty()).collect();
        for p in rest.split('/') {
            match p {
                "" | "." => {}
                ".." => {
                    parts.pop();
                }
                p => parts.push(p),
            }
        }
        format!("/{}", parts.join("/"))
    }

    /// What `arg` (relative to `cwd`) names. Pure: nothing is resolved until it is used.
    pub fn target(cwd: &str, arg: &str) -> Target {
        let virt = Root::normalize(cwd, arg);
        match virt.as_str() {
            DEV_ZERO => Target::Zero,
            DEV_NULL => Target::Null,
            _ => Target::Path(virt),
        }
    }

    /// Opens `virt` with `flags` (following symlinks that stay inside the root).
    fn open(&self, virt: &str, flags: i32) -> io::Result<OwnedFd> {
        open_beneath(self.dir.as_raw_fd(), &relative(virt)?, flags, 0)
    }

    /// Metadata of `virt` (following symlinks that stay inside the root).
    pub fn stat(&self, virt: &str) -> io::Result<Metadata> {
        meta_of(self.open(virt, libc::O_PATH)?)
    }

    /// Opens `virt` for reading. Never blocks on a FIFO or device (`O_NONBLOCK`, which regular
    /// files ignore); callers check what the metadata says it is.
    pub fn open_read(&self, virt: &str) -> io::Result<(File, Metadata)> {
        let f = File::from(self.open(virt, libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY)?);
        let m = f.metadata()?;
        Ok((f, m))
    }

    /// A handle of the directory holding `virt`, and its last name. The root has no parent.
    pub fn parent(&self, virt: &str) -> io::Result<Parent> {
        let (dir, name) = virt.rsplit_once('/').unwrap_or(("", virt));
        if name.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "the served root itself",
            ));
        }
        let dir = self.open(
            if dir.is_empty() { "/" } else { dir },
            libc::O_PATH | libc::O_DIRECTORY,
        )?;
        Ok(Parent {
            dir,
            name: cstr(name.as_bytes())?,
        })
    }

    /// The entries of directory `virt`, sorted by name (see [`Dir::entries`]).
    pub fn read_dir(&self, virt: &str) -> io::Result<Vec<Entry>> {
        self.open_dir(virt)?.entries(self)
    }
}

/// The names in an open directory, without `.` and `..`.
fn names(dir: &OwnedFd) -> io::Result<Vec<OsString>> {
    // SAFETY: duplicating a descriptor we hold; fdopendir takes ownership of the duplicate.
    let fd = check(libc::c_long::from(unsafe {
        libc::fcntl(dir.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 0)
    }))?;
    // SAFETY: fd is an open directory descriptor of ours.
    let d = unsafe { libc::fdopendir(fd) };
    if d.is_null() {
        let e = io::Error::last_os_error();
        // SAFETY: fdopendir failed, so fd is still ours to close.
        unsafe { libc::close(fd) };
        return Err(e);
    }
    // SAFETY: rewinding the fresh stream (the duplicate shares the offset with `dir`).
    unsafe { libc::rewinddir(d) };
    let mut out = Vec::new();
    let result = loop {
        // SAFETY: errno is thread-local, and __errno_location points at this thread's.
        unsafe { *libc::__errno_location() = 0 };
        // SAFETY: `d` is a valid, open directory stream owned by this function.
        let ent = unsafe { libc::readdir64(d) };
        if ent.is_null() {
            let e = io::Error::last_os_error();
            break if e.raw_os_error().unwrap_or(0) == 0 {
                Ok(())
            } else {
                Err(e)
            };
        }
        // SAFETY: d_name is NUL-terminated within the entry readdir returned.
        let name = unsafe { CStr::from_ptr((*ent).d_name.as_ptr()) }.to_bytes();
        if name != b"." && name != b".." {
            out.push(OsString::from_vec(name.to_vec()));
        }
    };
    // SAFETY: closing the stream we opened (and with it the duplicate).
    unsafe { libc::closedir(d) };
    result.map(|()| out)
}

impl Parent {
    /// Metadata of the name itself (a symlink is not followed); None if it does not exist.
    pub fn lstat(&self) -> io::Result<Option<Metadata>> {
        self.lstat_of(&self.name)
    }

    fn lstat_of(&self, name: &CStr) -> io::Result<Option<Metadata>> {
        match openat(
            self.dir.as_raw_fd(),
            name,
            libc::O_PATH | libc::O_NOFOLLOW,
            0,
        ) {
            Ok(fd) => meta_of(fd).map(Some),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Opens the name for writing, creating it (`O_EXCL` with `new`); never through a symlink.
    pub fn open_write(&self, new: bool) -> io::Result<File> {
        self.open_write_as(&self.name, new)
    }

    /// The part file of this name: its metadata, if it exists.
    pub fn part_lstat(&self) -> io::Result<Option<Metadata>> {
        self.lstat_of(&part_name(&self.name)?)
    }

    /// Opens (creating) the upload part file of this name for writing, never through a symlink.
    /// With `fresh` (an upload that starts over), a symlink or other non-file planted at the
    /// part name is removed and a new file made in its place; otherwise it is an error.
    pub fn open_part(&self, fresh: bool) -> io::Result<File> {
        let part = part_name(&self.name)?;
        let planted = |e: &io::Error| {
            matches!(e.raw_os_error(), Some(libc::ELOOP) | Some(libc::ENXIO))
                || e.kind() == io::ErrorKind::InvalidInput
        };
        match self.open_write_as(&part, false) {
            Err(e) if fresh && planted(&e) => {
                tracing::warn!(part = ?part, error = %e, "replacing what was planted at an upload's part-file name");
                self.remove_part()?;
                self.open_write_as(&part, true)
            }
            r => r,
        }
    }

    fn open_write_as(&self, name: &CStr, new: bool) -> io::Result<File> {
        let excl = if new { libc::O_EXCL } else { 0 };
        let flags = libc::O_WRONLY
            | libc::O_CREAT
            | libc::O_NOFOLLOW
            | libc::O_NONBLOCK
            | libc::O_NOCTTY
            | excl;
        let f = File::from(openat(self.dir.as_raw_fd(), name, flags, 0o666)?);
        if !f.metadata()?.is_file() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not a regular file",
            ));
        }
        Ok(f)
    }

    /// Renames the part file over the name (the end of a successful upload).
    pub fn commit_part(&self) -> io::Result<()> {
        let part = part_name(&self.name)?;
        rename(self, &part, self, &self.name)
    }

    /// Removes the part file, if any.
    pub fn remove_part(&self) -> io::Result<()> {
        let part = part_name(&self.name)?;
        // SAFETY: a valid dirfd and a NUL-terminated name.
        match check(libc::c_long::from(unsafe {
            libc::unlinkat(self.dir.as_raw_fd(), part.as_ptr(), 0)
        })) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    /// `mkdirat`.
    pub fn mkdir(&self) -> io::Result<()> {
        // SAFETY: a valid dirfd and a NUL-terminated name.
        check(libc::c_long::from(unsafe {
            libc::mkdirat(self.dir.as_raw_fd(), self.name.as_ptr(), 0o777)
        }))
        .map(drop)
    }

    /// `unlinkat` (with `AT_REMOVEDIR` for a directory); a symlink is removed, not followed.
    pub fn remove(&self, dir: bool) -> io::Result<()> {
        let flags = if dir { libc::AT_REMOVEDIR } else { 0 };
        // SAFETY: a valid dirfd and a NUL-terminated name.
        check(libc::c_long::from(unsafe {
            libc::unlinkat(self.dir.as_raw_fd(), self.name.as_ptr(), flags)
        }))
        .map(drop)
    }

    /// `renameat` of this name to `to`'s.
    pub fn rename_to(&self, to: &Parent) -> io::Result<()> {
        rename(self, &self.name, to, &to.name)
    }

    /// Identity of the parent directory (device, inode), with the name: the key of one file.
    pub fn key(&self) -> io::Result<(u64, u64, Vec<u8>)> {
        use std::os::unix::fs::MetadataExt;
        // SAFETY: duplicating a descriptor we hold.
        let dup = check(libc::c_long::from(unsafe {
            libc::fcntl(self.dir.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 0)
        }))?;
        // SAFETY: the duplicate is ours.
        let m = meta_of(unsafe { OwnedFd::from_raw_fd(dup) })?;
        Ok((m.dev(), m.ino(), self.name.to_bytes().to_vec()))
    }
}

fn rename(from: &Parent, a: &CStr, to: &Parent, b: &CStr) -> io::Result<()> {
    // SAFETY: valid dirfds and NUL-terminated names.
    let rc = unsafe {
        libc::renameat(
            from.dir.as_raw_fd(),
            a.as_ptr(),
            to.dir.as_raw_fd(),
            b.as_ptr(),
        )
    };
    check(libc::c_long::from(rc)).map(drop)
}

mod attrs;
mod tree;

pub use tree::Dir;

#[cfg(test)]
mod tests;
