//! Directory listings and file facts: MLST/MLSD facts (RFC 3659 §7, with Globus's
//! `UNIX.mode`), `ls -l` style LIST lines, NLST names and MDTM timestamps.

use std::fs::Metadata;
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::time::UNIX_EPOCH;

use haul_proto::command::ModTime;

use crate::vfs::Root;

mod tree;

pub use tree::{mlsr, TreeLimits};

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

fn mtime_secs(meta: &Metadata) -> i64 {
    meta.modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_secs() as i64)
}

/// Modification time as `YYYYMMDDHHMMSS` in UTC (RFC 3659 §2.3).
pub fn mdtm(meta: &Metadata) -> String {
    ModTime::from_unix(mtime_secs(meta)).to_string()
}

/// MLST facts of one entry, ending in `; ` (the name follows). `kind` overrides the type
/// (`cdir`/`pdir` for `.` and `..`). A symlink listed as itself (one that leaves the root) is
/// `OS.unix=slink`, as Globus lists symlinks.
pub fn facts(meta: &Metadata, kind: Option<&str>, write: bool) -> String {
    let (ty, perm) = if meta.is_dir() {
        (kind.unwrap_or("dir"), if write { "elcfmpd" } else { "el" })
    } else if meta.file_type().is_symlink() {
        ("OS.unix=slink", "")
    } else {
        ("file", if write { "radfw" } else { "r" })
    };
    format!(
        "Type={ty};Modify={};Size={};Perm={perm};UNIX.mode=0{:o};UNIX.uid={};UNIX.gid={}; ",
        mdtm(meta),
        meta.len(),
        meta.permissions().mode() & 0o7777,
        meta.uid(),
        meta.gid()
    )
}

/// MLSD body of directory `virt` (RFC 3659 §7.2), with `cdir` and `pdir` entries like Globus.
pub fn mlsd(root: &Root, virt: &str, write: bool) -> io::Result<Vec<u8>> {
    let parent = match virt.rsplit_once('/') {
        Some((p, _)) if !p.is_empty() => p,
        _ => "/",
    };
    let mut out = String::new();
    out.push_str(&facts(&root.stat(virt)?, Some("cdir"), write));
    out.push_str(".\r\n");
    out.push_str(&facts(&root.stat(parent)?, Some("pdir"), write));
    out.push_str("..\r\n");
    for e in root.read_dir(virt)? {
        out.push_str(&facts(&e.meta, None, write));
        out.push_str(&e.name);
        out.push_str("\r\n");
    }
    Ok(out.into_bytes())
}

fn mode_string(meta: &Metadata) -> String {
    let mode = meta.permissions().mode();
    let mut s = String::with_capacity(10);
    let ft = meta.file_type();
    s.push(if ft.is_dir() {
        'd'
    } else if ft.is_symlink() {
        'l'
    } else {
        '-'
    });
    for shift in [6, 3, 0] {
        let bits = (mode >> shift) & 7;
        s.push(if bits & 4 != 0 { 'r' } else { '-' });
        s.push(if bits & 2 != 0 { 'w' } else { '-' });
        s.push(if bits & 1 != 0 { 'x' } else { '-' });
    }
    s
}

/// One `ls -l` style line without its line end.
pub fn ls_line(meta: &Metadata, name: &str) -> String {
    let t = ModTime::from_unix(mtime_secs(meta));
    let month = MONTHS.get(t.month as usize - 1).copied().unwrap_or("Jan");
    let (d, h, mi) = (t.day, t.hour, t.minute);
    format!(
        "{} {:>3} {:>8} {:>8} {:>12} {month} {d:>2} {h:02}:{mi:02} {name}",
        mode_string(meta),
        meta.nlink(),
        meta.uid(),
        meta.gid(),
        meta.len()
    )
}

/// LIST (long) or NLST (names only) body of the file or directory `virt`.
pub fn list(root: &Root, virt: &str, long: bool) -> io::Result<Vec<u8>> {
    let meta = root.stat(virt)?;
    let items = if meta.is_dir() {
        root.read_dir(virt)?
            .into_iter()
            .map(|e| (e.name, e.meta))
            .collect()
    } else {
        vec![(
            virt.rsplit('/').next().unwrap_or_default().to_string(),
            meta,
        )]
    };
    let mut out = String::new();
    for (name, meta) in items {
        if long {
            out.push_str(&ls_line(&meta, &name));
        } else {
            out.push_str(&name);
        }
        out.push_str("\r\n");
    }
    Ok(out.into_bytes())
}
