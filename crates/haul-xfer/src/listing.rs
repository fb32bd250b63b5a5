//! Directory listings: parsing MLSD / MLST fact lines (RFC 3659 §7) into entries.

use std::sync::Mutex;

use haul_transport::io::Sink;

/// One entry of a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// File name (no directory part).
    pub name: String,
    /// A directory (not `cdir` / `pdir`).
    pub is_dir: bool,
    /// Size in bytes (0 for directories).
    pub size: u64,
    /// The `Unique` fact (RFC 3659 §7.5.2), which names the same file or directory by whatever
    /// path it is reached: a directory met twice under one root is a loop.
    pub unique: Option<String>,
}

/// Parses one `fact=value;fact=value; name` line; None for `.`/`..` entries and malformed lines.
pub fn parse_mlsx_line(line: &str) -> Option<Entry> {
    let (name, facts) = parse_facts(line)?;
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return None;
    }
    Some(Entry {
        name: name.to_string(),
        is_dir: facts.is_dir,
        size: facts.size,
        unique: facts.unique,
    })
}

/// Parses the facts of an MLST reply line (the name may be a full path): (name, is_dir, size).
/// `cdir` counts as a directory here, since MLST of a directory may describe it so.
pub fn parse_mlst(line: &str) -> Option<(bool, u64)> {
    let line = line.trim_start();
    let (facts, _) = line.split_once(' ')?;
    let kind = facts.split(';').find_map(|f| {
        f.split_once('=')
            .filter(|(k, _)| k.eq_ignore_ascii_case("type"))
            .map(|(_, v)| v.to_ascii_lowercase())
    })?;
    if kind == "cdir" {
        return Some((true, 0));
    }
    parse_facts(line).map(|(_, f)| (f.is_dir, f.size))
}

/// The facts of one line that haul uses.
struct Facts {
    is_dir: bool,
    size: u64,
    unique: Option<String>,
}

fn parse_facts(line: &str) -> Option<(&str, Facts)> {
    let line = line.trim_end_matches(['\r', '\n']);
    let (facts, name) = line.split_once(' ')?;
    let mut kind = None;
    let mut size = 0;
    let mut unique = None;
    for f in facts.split(';').filter(|f| !f.is_empty()) {
        let (k, v) = f.split_once('=')?;
        match k.to_ascii_lowercase().as_str() {
            "type" => kind = Some(v.to_ascii_lowercase()),
            "size" => size = v.parse().ok()?,
            "unique" => unique = Some(v.to_string()),
            _ => {}
        }
    }
    let is_dir = match kind.as_deref()? {
        "file" => false,
        "dir" => true,
        _ => return None,
    };
    Some((
        name,
        Facts {
            is_dir,
            size: if is_dir { 0 } else { size },
            unique,
        },
    ))
}

/// Parses an MLSD body.
pub fn parse_mlsd(body: &[u8]) -> Vec<Entry> {
    String::from_utf8_lossy(body)
        .lines()
        .filter_map(parse_mlsx_line)
        .collect()
}

/// A sink that collects a listing in memory.
#[derive(Debug, Default)]
pub struct VecSink(Mutex<Vec<u8>>);

impl VecSink {
    /// The bytes received.
    pub fn into_bytes(self) -> Vec<u8> {
        self.0.into_inner().unwrap_or_else(|p| p.into_inner())
    }
}

impl Sink for VecSink {
    fn write_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
        let mut v = self
            .0
            .lock()
            .map_err(|_| std::io::Error::other("listing buffer poisoned"))?;
        let end = offset as usize + buf.len();
        if end > 64 << 20 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "listing larger than 64 MiB",
            ));
        }
        if v.len() < end {
            v.resize(end, 0);
        }
        v[offset as usize..end].copy_from_slice(buf);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_globus_lines() {
        let body = b"Type=cdir;Modify=20261122014156;Size=4096; .\r\nType=file;Modify=20261122014156;Size=300000;Perm=awr;UNIX.mode=0644; a1\r\nType=dir;Size=4096;Unique=fd00-2a; sub dir\r\ngarbage\r\n";
        let e = parse_mlsd(body);
        assert_eq!(
            e,
            vec![
                Entry {
                    name: "a1".into(),
                    is_dir: false,
                    size: 300000,
                    unique: None
                },
                Entry {
                    name: "sub dir".into(),
                    is_dir: true,
                    size: 0,
                    unique: Some("fd00-2a".into())
                }
            ]
        );
        assert_eq!(parse_mlsx_line("Type=file;Size=1; ../x"), None);
        assert_eq!(
            parse_mlst(" Type=file;Size=7;Perm=r; /a/b"),
            Some((false, 7))
        );
        assert_eq!(parse_mlst(" Type=cdir;Size=4096; /a"), Some((true, 0)));
    }

    proptest::proptest! {
        /// Any body parses without panicking, and every entry is a plain name: the walk joins
        /// it to a directory, so a `/`, `.` or `..` from a hostile server must never pass.
        #[test]
        fn any_listing_gives_plain_names(body in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..512)) {
            for e in parse_mlsd(&body) {
                proptest::prop_assert!(!e.name.is_empty() && !e.name.contains('/') && e.name != "." && e.name != "..");
            }
        }

        /// A well-formed line gives back its facts, the `Unique` fact included.
        #[test]
        fn facts_round_trip(
            name in "[a-zA-Z0-9_][a-zA-Z0-9_. -]{0,19}",
            size in proptest::prelude::any::<u64>(),
            is_dir in proptest::prelude::any::<bool>(),
            unique in proptest::option::of("[a-z0-9-]{1,12}"),
        ) {
            let kind = if is_dir { "dir" } else { "file" };
            let u = unique.as_ref().map(|u| format!("Unique={u};")).unwrap_or_default();
            let line = format!("Type={kind};Size={size};{u} {name}\r\n");
            let want = Entry { name: name.clone(), is_dir, size: if is_dir { 0 } else { size }, unique };
            proptest::prop_assert_eq!(parse_mlsd(line.as_bytes()), vec![want]);
        }
    }
}
