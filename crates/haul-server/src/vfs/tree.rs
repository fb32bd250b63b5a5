//! [`Dir`]: an open directory of the served tree, read by handle, and its subdirectories opened
//! beneath that handle, never by name from the root again and never through a symlink, so a
//! walk of a whole tree (MLSR) stays inside it whatever is renamed or swapped meanwhile.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;

use super::{cstr, is_part_name, meta_of, names, open_beneath, openat, Entry, Root};

/// An open directory inside the root, with its virtual path.
#[derive(Debug)]
pub struct Dir {
    fd: OwnedFd,
    virt: String,
}

impl Root {
    /// Opens directory `virt` for reading (following symlinks that stay inside the root, as
    /// every path a client names does).
    pub fn open_dir(&self, virt: &str) -> io::Result<Dir> {
        Ok(Dir {
            fd: self.open(virt, libc::O_RDONLY | libc::O_DIRECTORY)?,
            virt: virt.to_string(),
        })
    }
}

impl Dir {
    /// The directory's virtual path.
    pub fn virt(&self) -> &str {
        &self.virt
    }

    /// The entries, sorted by name, each with the metadata of what it leads to inside the
    /// root; a symlink that leaves the root is described as itself. Entries that vanish while
    /// the directory is read (an upload's part file renamed into place, a file deleted) are left
    /// out, and so are upload part files, which are the server's own.
    pub fn entries(&self, root: &Root) -> io::Result<Vec<Entry>> {
        let mut out = Vec::new();
        for name in names(&self.fd)? {
            let text = name.to_string_lossy().into_owned();
            if is_part_name(&text) {
                continue;
            }
            let c = cstr(name.as_bytes())?;
            let dir = self.fd.as_raw_fd();
            let meta = match open_beneath(dir, &c, libc::O_PATH, 0) {
                Ok(fd) => meta_of(fd),
                Err(_) => match root.open(
                    &format!("{}/{text}", self.virt.trim_end_matches('/')),
                    libc::O_PATH,
                ) {
                    // A relative link to elsewhere inside the root.
                    Ok(fd) => meta_of(fd),
                    Err(_) => openat(dir, &c, libc::O_PATH | libc::O_NOFOLLOW, 0).and_then(meta_of),
                },
            };
            match meta {
                Ok(meta) => out.push(Entry { name: text, meta }),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// The subdirectory `name`, opened beneath this handle; None when the name is a symlink
    /// (never walked into: a tree walk sees each directory once) or no longer a directory.
    pub fn child(&self, name: &str) -> io::Result<Option<Dir>> {
        let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW;
        match openat(self.fd.as_raw_fd(), &cstr(name.as_bytes())?, flags, 0) {
            Ok(fd) => Ok(Some(Dir {
                fd,
                virt: format!("{}/{name}", self.virt.trim_end_matches('/')),
            })),
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ELOOP) | Some(libc::ENOTDIR) | Some(libc::ENOENT)
                ) =>
            {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }
}
