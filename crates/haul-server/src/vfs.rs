//! The session's view of the file system: virtual absolute paths under `/`, mapped onto the
//! served root. `.`/`..` are resolved lexically (never above `/`), then the real path is checked
//! by canonicalizing its deepest existing ancestor (following symlinks), so no path, absolute
//! or relative, and no symlink leads outside the root. `/dev/zero` and `/dev/null` are virtual
//! devices for memory-to-memory runs, as Globus servers expose them.

use std::io;
use std::path::{Path, PathBuf};

/// Virtual path of the endless zero source.
pub const DEV_ZERO: &str = "/dev/zero";
/// Virtual path of the discarding sink.
pub const DEV_NULL: &str = "/dev/null";

/// A path could not be mapped into the root.
#[derive(Debug, thiserror::Error)]
pub enum VfsError {
    /// The path leads outside the served root.
    #[error("{0}: outside the served root")]
    Outside(String),
    /// Checking the path failed.
    #[error("{path}: {source}")]
    Io {
        /// The virtual path.
        path: String,
        /// The IO error.
        source: io::Error,
    },
}

/// What a command's path argument names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// The virtual `/dev/zero`.
    Zero,
    /// The virtual `/dev/null`.
    Null,
    /// A path inside the root.
    Path {
        /// Normalised virtual path, e.g. `/a/b`.
        virt: String,
        /// Real path under the root (not canonicalized, so a symlink stays a symlink).
        real: PathBuf,
    },
}

/// The served root.
#[derive(Debug, Clone)]
pub struct Vfs {
    root: PathBuf,
}

impl Vfs {
    /// Serves `root`, which must exist.
    pub fn new(root: &Path) -> io::Result<Vfs> {
        Ok(Vfs { root: root.canonicalize()? })
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

    /// Maps `arg` (relative to `cwd`) to a target confined to the root.
    pub fn resolve(&self, cwd: &str, arg: &str) -> Result<Target, VfsError> {
        let virt = Vfs::normalize(cwd, arg);
        match virt.as_str() {
            DEV_ZERO => return Ok(Target::Zero),
            DEV_NULL => return Ok(Target::Null),
            _ => {}
        }
        let real = self.real(&virt)?;
        Ok(Target::Path { virt, real })
    }

    /// The real path of a normalised virtual path, after checking it stays inside the root.
    pub fn real(&self, virt: &str) -> Result<PathBuf, VfsError> {
        let mut real = self.root.clone();
        // The root is canonical and `virt` has no `.` or `..`: if no component below the root
        // is a symlink, the path is inside the root as it stands. Checking that costs one lstat
        // per component instead of a readlink per component of the whole path, twice.
        let mut plain = true;
        let mut exists = true;
        for p in virt.split('/').filter(|p| !p.is_empty()) {
            real.push(p);
            if exists && plain {
                match real.symlink_metadata() {
                    Ok(m) => plain = !m.file_type().is_symlink(),
                    Err(_) => exists = false,
                }
            }
        }
        if plain {
            return Ok(real);
        }
        let mut probe = real.as_path();
        while probe.symlink_metadata().is_err() {
            match probe.parent() {
                Some(p) => probe = p,
                None => return Err(VfsError::Outside(virt.to_string())),
            }
        }
        let canon = match probe.canonicalize() {
            Ok(c) => c,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                // A dangling symlink: its target is unknown, so never follow it.
                return Err(VfsError::Outside(virt.to_string()));
            }
            Err(source) => return Err(VfsError::Io { path: virt.to_string(), source }),
        };
        if !canon.starts_with(&self.root) {
            return Err(VfsError::Outside(virt.to_string()));
        }
        Ok(real)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes_lexically() {
        assert_eq!(Vfs::normalize("/a/b", "../c"), "/a/c");
        assert_eq!(Vfs::normalize("/a", "../../../etc/passwd"), "/etc/passwd");
        assert_eq!(Vfs::normalize("/a", "/x/./y/"), "/x/y");
        assert_eq!(Vfs::normalize("/a", "~/f"), "/f");
        assert_eq!(Vfs::normalize("/", ".."), "/");
    }

    #[test]
    fn confines_symlinks() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), root.path().join("esc")).unwrap();
        std::os::unix::fs::symlink(root.path().join("nowhere"), root.path().join("dangling")).unwrap();
        std::fs::create_dir(root.path().join("d")).unwrap();
        let v = Vfs::new(root.path()).unwrap();
        assert!(matches!(v.resolve("/", "esc/new"), Err(VfsError::Outside(_))));
        assert!(matches!(v.resolve("/", "dangling"), Err(VfsError::Outside(_))));
        assert!(matches!(v.resolve("/", "d/new/deeper"), Ok(Target::Path { .. })));
        assert_eq!(v.resolve("/", "/dev/zero").unwrap(), Target::Zero);
    }
}
