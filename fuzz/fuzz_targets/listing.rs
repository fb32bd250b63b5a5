//! Fuzzes the client's listing parsers: an MLSD body (`parse_mlsd`, whole and split at a line
//! boundary, which must agree) and MLST fact lines (`parse_mlst`). Every entry must be a plain
//! name the walk may join to a directory (not empty, no `/`, not `.` or `..`), a directory has
//! size 0, and an entry printed back as a fact line parses to the same entry.

#![no_main]

use haul_xfer::listing::{parse_mlsd, parse_mlst, parse_mlsx_line, Entry};
use libfuzzer_sys::fuzz_target;

/// An entry as a server would list it.
fn fact_line(e: &Entry) -> String {
    let kind = if e.is_dir { "dir" } else { "file" };
    let unique = e
        .unique
        .as_ref()
        .map(|u| format!("Unique={u};"))
        .unwrap_or_default();
    format!("Type={kind};Size={};{unique} {}", e.size, e.name)
}

fuzz_target!(|data: &[u8]| {
    let Some((&ctl, body)) = data.split_first() else {
        return;
    };
    let entries = parse_mlsd(body);
    for e in &entries {
        assert!(
            !e.name.is_empty() && !e.name.contains('/') && e.name != "." && e.name != "..",
            "entry name {:?}",
            e.name
        );
        if e.is_dir {
            assert_eq!(e.size, 0, "directory {:?} with a size", e.name);
        }
        let line = fact_line(e);
        assert_eq!(parse_mlsx_line(&line).as_ref(), Some(e), "{line:?}");
        assert_eq!(
            parse_mlst(&format!(" {line}")),
            Some((e.is_dir, e.size)),
            "{line:?}"
        );
    }
    // Split after the ctl-th line end: the two halves list the same entries as the whole.
    let cut = body
        .iter()
        .enumerate()
        .filter(|&(_, &b)| b == b'\n')
        .nth(usize::from(ctl))
        .map_or(body.len(), |(i, _)| i + 1);
    let mut halves = parse_mlsd(&body[..cut]);
    halves.extend(parse_mlsd(&body[cut..]));
    assert_eq!(
        halves, entries,
        "splitting at a line end changed the listing"
    );
    for line in String::from_utf8_lossy(body).lines() {
        if let Some((true, size)) = parse_mlst(line) {
            assert_eq!(size, 0, "MLST directory with a size: {line:?}");
        }
    }
});
