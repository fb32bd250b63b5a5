//! Directory listings and file facts: MLST/MLSD facts (RFC 3659 §7, with Globus's
//! `UNIX.mode`), `ls -l` style LIST lines, NLST names and MDTM timestamps.

use std::fs::{self, Metadata};
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::time::UNIX_EPOCH;

const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

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
    (y, m, d, (sod / 3600) as u32, (sod % 3600 / 60) as u32, (sod % 60) as u32)
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
/// (`cdir`/`pdir` for `.` and `..`).
pub fn facts(meta: &Metadata, kind: Option<&str>, write: bool) -> String {
    let (ty, perm) = if meta.is_dir() {
        (kind.unwrap_or("dir"), if write { "elcfmpd" } else { "el" })
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

fn entries(dir: &Path) -> io::Result<Vec<(String, Metadata)>> {
    let mut out = Vec::new();
    for e in fs::read_dir(dir)? {
        let e = e?;
        let name = e.file_name().to_string_lossy().into_owned();
        // `metadata` follows symlinks; a dangling one is listed as itself.
        let meta = match fs::metadata(e.path()) {
            Ok(m) => m,
            Err(_) => e.metadata()?,
        };
        out.push((name, meta));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// MLSD body of a directory (RFC 3659 §7.2), with `cdir` and `pdir` entries like Globus.
pub fn mlsd(dir: &Path, parent: &Path, write: bool) -> io::Result<Vec<u8>> {
    let mut out = String::new();
    out.push_str(&facts(&fs::metadata(dir)?, Some("cdir"), write));
    out.push_str(".\r\n");
    out.push_str(&facts(&fs::metadata(parent)?, Some("pdir"), write));
    out.push_str("..\r\n");
    for (name, meta) in entries(dir)? {
        out.push_str(&facts(&meta, None, write));
        out.push_str(&name);
        out.push_str("\r\n");
    }
    Ok(out.into_bytes())
}

fn mode_string(meta: &Metadata) -> String {
    let mode = meta.permissions().mode();
    let mut s = String::with_capacity(10);
    s.push(if meta.is_dir() { 'd' } else { '-' });
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

/// LIST (long) or NLST (names only) body of a file or directory.
pub fn list(path: &Path, long: bool) -> io::Result<Vec<u8>> {
    let meta = fs::metadata(path)?;
    let items = if meta.is_dir() {
        entries(path)?
    } else {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        vec![(name, meta)]
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
