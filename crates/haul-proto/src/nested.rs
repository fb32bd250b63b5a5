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

/// The chain of relays a nested path goes through, as text: everything up to the end of the
/// last `scheme://authority` (`ftp://r2:2811/ftp://origin:2811` for
/// `/ftp://r2:2811/ftp://origin:2811/data/f`); `None` when the path is not nested. Two paths
/// with the same chain reach the same server through the same relays as the same users. A file
/// name containing `://` makes the chain longer than it is, never equal to another's.
pub fn chain(path: &str) -> Option<&str> {
    if !is_nested(path) {
        return None;
    }
    let p = path.trim_start_matches('/');
    let last = p.rfind("://")? + 3;
    Some(p[last..].find('/').map_or(p, |i| &p[..last + i]))
}

/// The next leg's settings a client asks a relay for (`OPTS RELAY Parallelism=N;TcpBuffer=B;`,
/// haul extension): unset values leave the relay's own configuration in force.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NextLeg {
    /// TCP streams on the next leg.
    pub parallelism: Option<u32>,
    /// Socket buffer size of the next leg's data connections, bytes.
    pub tcp_buffer: Option<u64>,
}

impl NextLeg {
    /// The `OPTS RELAY` options text: `Parallelism=4;TcpBuffer=16777216;`.
    pub fn format(&self) -> String {
        let mut s = String::new();
        if let Some(p) = self.parallelism {
            s.push_str(&format!("Parallelism={p};"));
        }
        if let Some(b) = self.tcp_buffer {
            s.push_str(&format!("TcpBuffer={b};"));
        }
        s
    }

    /// Reads `OPTS RELAY` options (keys in any case); an error names the bad option.
    pub fn parse(text: &str) -> Result<NextLeg, String> {
        let mut leg = NextLeg::default();
        for kv in text.split(';').map(str::trim).filter(|s| !s.is_empty()) {
            let (k, v) = kv
                .split_once('=')
                .ok_or_else(|| format!("option {kv:?} is not KEY=VALUE"))?;
            let n: u64 = v
                .trim()
                .parse()
                .map_err(|_| format!("{k}={v}: not a number"))?;
            match k.trim().to_ascii_lowercase().as_str() {
                "parallelism" if (1..=64).contains(&n) => leg.parallelism = Some(n as u32),
                "parallelism" => return Err(format!("Parallelism={n}: want 1 to 64")),
                "tcpbuffer" if (4096..=1 << 30).contains(&n) => leg.tcp_buffer = Some(n),
                "tcpbuffer" => return Err(format!("TcpBuffer={n}: want 4096 to 1073741824")),
                other => return Err(format!("unknown option {other:?} (Parallelism, TcpBuffer)")),
            }
        }
        Ok(leg)
    }
}

#[cfg(test)]
mod tests {
    use super::{chain, is_nested, NextLeg};

    #[test]
    fn a_chain_is_the_hops_without_the_file() {
        assert_eq!(
            chain("/ftp://r2:2811/ftp://origin:2811/data/f"),
            Some("ftp://r2:2811/ftp://origin:2811")
        );
        assert_eq!(
            chain("ftp://u:p@origin:2811/a/b"),
            Some("ftp://u:p@origin:2811")
        );
        assert_eq!(chain("/gsiftp://origin"), Some("gsiftp://origin"));
        assert_eq!(chain("/data/f"), None);
        assert_eq!(
            chain("/ftp://o:1/x"),
            chain("/ftp://o:1/y/z"),
            "files of one server share a chain"
        );
        assert_ne!(chain("/ftp://o:1/x"), chain("/ftp://o:2/x"));
        assert_ne!(chain("/ftp://a/ftp://o/x"), chain("/ftp://b/ftp://o/x"));
    }

    #[test]
    fn next_leg_options_read_back_and_refuse_nonsense() {
        let leg = NextLeg {
            parallelism: Some(8),
            tcp_buffer: Some(16 << 20),
        };
        assert_eq!(leg.format(), "Parallelism=8;TcpBuffer=16777216;");
        assert_eq!(NextLeg::parse(&leg.format()), Ok(leg));
        assert_eq!(
            NextLeg::parse("parallelism=2"),
            Ok(NextLeg {
                parallelism: Some(2),
                tcp_buffer: None
            })
        );
        for bad in [
            "Parallelism=0",
            "Parallelism=65",
            "TcpBuffer=1",
            "Streams=4",
            "Parallelism",
            "Parallelism=x",
        ] {
            assert!(NextLeg::parse(bad).is_err(), "{bad}");
        }
    }

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
