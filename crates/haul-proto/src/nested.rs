//! Nested URLs as command paths (`RETR /ftp://origin:2811/data/f`): the routing syntax of the
//! GridFTP overlay (002 §4.3), which relays carry out on the next hop.

/// The schemes a nested URL may start with.
const SCHEMES: [&str; 3] = ["ftp://", "haul://", "gsiftp://"];

/// Whether a command's path is a nested URL: after any leading `/`, an `ftp://`, `haul://` or
/// `gsiftp://` URL (clients send `/ftp://host/path` or `ftp://host/path`).
pub fn is_nested(path: &str) -> bool {
    let p = path.trim_start_matches('/').as_bytes();
    SCHEMES.iter().any(|s| {
        p.get(..s.len())
            .is_some_and(|h| h.eq_ignore_ascii_case(s.as_bytes()))
    })
}

#[cfg(test)]
mod tests {
    use super::is_nested;

    #[test]
    fn nested_paths_are_told_from_plain_ones() {
        for p in [
            "/ftp://h/x",
            "ftp://h/x",
            "//haul://h:1/x",
            "/GSIFTP://h//x",
            "/Ftp://h",
        ] {
            assert!(is_nested(p), "{p}");
        }
        for p in [
            "/ftp:/h/x",
            "/data/ftp://h/x",
            "ftp",
            "/",
            "",
            "/http://h/x",
        ] {
            assert!(!is_nested(p), "{p}");
        }
    }
}
