//! MLSR: the MLSD facts of a whole tree, as `globus-gridftp-server` lists it. The listed
//! directory comes first as `Type=cdir` named `.`; then every entry below it, depth first, each
//! directory's entries in name order right after the directory itself, each named by its path
//! relative to the listed directory (`sub/deeper/c.txt`). There is no `pdir` line. Symlinks are
//! listed but never walked into, and the walk is bounded: a tree deeper or larger than the
//! limits is refused rather than listed in part, and the walk stops when the client leaves.

use std::io;

use super::facts;
use crate::vfs::{Dir, Root};

/// The bounds of one MLSR walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TreeLimits {
    /// Most directory levels below the listed one.
    pub max_depth: usize,
    /// Most entries listed in all.
    pub max_entries: usize,
}

impl Default for TreeLimits {
    /// 64 levels and 100,000 entries (some 20 MB of listing).
    fn default() -> TreeLimits {
        TreeLimits {
            max_depth: 64,
            max_entries: 100_000,
        }
    }
}

/// One walk's output and bounds.
struct Walk<'a> {
    root: &'a Root,
    write: bool,
    limits: TreeLimits,
    gone: &'a dyn Fn() -> bool,
    entries: usize,
    out: String,
}

/// MLSR body of directory `virt`; `gone` says when the client has left, which ends the walk
/// with `ConnectionAborted`.
pub fn mlsr(
    root: &Root,
    virt: &str,
    write: bool,
    limits: TreeLimits,
    gone: &dyn Fn() -> bool,
) -> io::Result<Vec<u8>> {
    let top = root.open_dir(virt)?;
    let mut w = Walk {
        root,
        write,
        limits,
        gone,
        entries: 0,
        out: String::new(),
    };
    w.out
        .push_str(&facts(&root.stat(virt)?, Some("cdir"), write));
    w.out.push_str(".\r\n");
    w.dir(&top, "", 0)?;
    Ok(w.out.into_bytes())
}

impl Walk<'_> {
    /// Lists `dir`'s entries, whose names get `prefix`, and walks into its subdirectories.
    fn dir(&mut self, dir: &Dir, prefix: &str, depth: usize) -> io::Result<()> {
        if (self.gone)() {
            return Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "the client left",
            ));
        }
        for e in dir.entries(self.root)? {
            self.entries += 1;
            if self.entries > self.limits.max_entries {
                return Err(io::Error::other(format!(
                    "more than {} entries in the tree (MLSR's limit); list its parts",
                    self.limits.max_entries
                )));
            }
            let rel = format!("{prefix}{}", e.name);
            self.out.push_str(&facts(&e.meta, None, self.write));
            self.out.push_str(&rel);
            self.out.push_str("\r\n");
            if !e.meta.is_dir() {
                continue;
            }
            let Some(sub) = dir.child(&e.name)? else {
                continue;
            };
            if depth + 1 > self.limits.max_depth {
                return Err(io::Error::other(format!(
                    "{}: deeper than {} levels (MLSR's limit); list its parts",
                    sub.virt(),
                    self.limits.max_depth
                )));
            }
            self.dir(&sub, &format!("{rel}/"), depth + 1)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_walk_stops_when_the_client_leaves() {
        let d = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir_all(d.path().join("a/b")).expect("mkdir");
        let root = Root::new(d.path()).expect("root");
        let lim = TreeLimits::default();
        let body = mlsr(&root, "/", false, lim, &|| false).expect("listing");
        assert_eq!(String::from_utf8_lossy(&body).matches("\r\n").count(), 3);
        let calls = std::cell::Cell::new(0);
        let gone = || {
            calls.set(calls.get() + 1);
            calls.get() > 1
        };
        let e = mlsr(&root, "/", false, lim, &gone).expect_err("the client left");
        assert_eq!(e.kind(), io::ErrorKind::ConnectionAborted);
    }
}
