//! Directory listings and file facts: MLST/MLSD facts (RFC 3659 §7, with Globus's
//! `UNIX.mode`), `ls -l` style LIST lines, NLST names and MDTM timestamps.

use std::fs::Metadata;
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::time::UNIX_EPOCH;

use crate::vfs::Root;

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// UTC civil time (year, month, day, hour, minute, second) of Unix seconds.
fn civil(secs: i64) -> (i64, u32, u32, u32, u32, u32) {
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    // Days-to-civil conversion of H. Hinnant, "chrono-Compatible Low-Level Date Algorithms".
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (
        y,
        m,
        d,
        (sod / 3600) as u32,
        (sod % 3600 / 60) as u32,
        (sod % 60) as u32,
    )
}

fn mtime_secs(meta: &Metadata) -> i64 {
    meta.modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_secs() as i64)
}

/// Modification time as `YYYYMMDDHHMMSS` in UTC (RFC 3659 §2.3).
pub fn mdtm(meta: &Metadata) -> String {
    let (y, mo, d, h, mi, s) = civil(mtime_secs(meta));
    format!("{y:04}{mo:02}{d:02}{h:02}{mi:02}{s:02}")
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
    let (_, mo, d, h, mi, _) = civil(mtime_secs(meta));
    let month = MONTHS.get(mo as usize - 1).copied().unwrap_or("Jan");
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        assert_eq!(civil(0), (1970, 1, 1, 0, 0, 0));
        assert_eq!(civil(951_782_400), (2000, 2, 29, 0, 0, 0));
        assert_eq!(civil(1_700_000_000), (2023, 11, 14, 22, 13, 20));
    }
}
