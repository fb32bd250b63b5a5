//! Transfer endpoints as users write them: `ftp://[user[:pass]@]host[:port]/path`,
//! `haul://…` (the same protocol with TLS on control and data), `gsiftp://…` (GSI: X.509
//! proxy certificates, [`crate::gsi`]), or a local path.

use std::fmt;
use std::path::PathBuf;

/// Where one side of a transfer lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// A path on this machine.
    Local(PathBuf),
    /// A path on a GridFTP / haul server.
    Remote(RemoteUrl),
}

/// A server URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteUrl {
    /// True for `haul://` (TLS), false for `ftp://` and `gsiftp://`.
    pub tls: bool,
    /// True for `gsiftp://` (GSI).
    pub gsi: bool,
    /// User name (anonymous when absent).
    pub user: Option<String>,
    /// Password.
    pub pass: Option<String>,
    /// Host name or address.
    pub host: String,
    /// Control port.
    pub port: u16,
    /// Absolute path on the server.
    pub path: String,
}

/// A URL could not be parsed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("bad URL {url:?}: {reason}")]
pub struct UrlError {
    /// The text given.
    pub url: String,
    /// What is wrong.
    pub reason: String,
}

/// The GridFTP control port.
pub const DEFAULT_PORT: u16 = 2811;

fn hex(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

fn pct_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push(h << 4 | l);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Percent-encodes all but RFC 3986's unreserved characters, so a user or password survives
/// being written into a URL (and a nested one) and read back by [`Endpoint::parse`].
fn pct_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

impl Endpoint {
    /// Parses a command-line endpoint.
    pub fn parse(s: &str) -> Result<Endpoint, UrlError> {
        let err = |reason: &str| UrlError {
            url: s.to_string(),
            reason: reason.to_string(),
        };
        let (tls, gsi, rest) = if let Some(r) = s.strip_prefix("ftp://") {
            (false, false, r)
        } else if let Some(r) = s.strip_prefix("gsiftp://") {
            (false, true, r)
        } else if let Some(r) = s.strip_prefix("haul://") {
            (true, false, r)
        } else if let Some(r) = s.strip_prefix("file://") {
            return Ok(Endpoint::Local(PathBuf::from(pct_decode(r))));
        } else if s.contains("://") {
            return Err(err(
                "unknown scheme (use ftp://, gsiftp://, haul:// or a local path)",
            ));
        } else {
            if s.is_empty() {
                return Err(err("empty path"));
            }
            return Ok(Endpoint::Local(PathBuf::from(s)));
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let (userinfo, hostport) = match authority.rfind('@') {
            Some(i) => (Some(&authority[..i]), &authority[i + 1..]),
            None => (None, authority),
        };
        let (user, pass) = match userinfo {
            Some(u) => match u.split_once(':') {
                Some((a, b)) => (Some(pct_decode(a)), Some(pct_decode(b))),
                None => (Some(pct_decode(u)), None),
            },
            None => (None, None),
        };
        let (host, port) = if let Some(h) = hostport.strip_prefix('[') {
            let close = h.find(']').ok_or_else(|| err("unclosed [ in IPv6 host"))?;
            let port = match &h[close + 1..] {
                "" => DEFAULT_PORT,
                p => p
                    .strip_prefix(':')
                    .and_then(|p| p.parse().ok())
                    .ok_or_else(|| err("bad port"))?,
            };
            (h[..close].to_string(), port)
        } else {
            match hostport.rsplit_once(':') {
                Some((h, p)) => (h.to_string(), p.parse().map_err(|_| err("bad port"))?),
                None => (hostport.to_string(), DEFAULT_PORT),
            }
        };
        if host.is_empty() {
            return Err(err("missing host"));
        }
        Ok(Endpoint::Remote(RemoteUrl {
            tls,
            gsi,
            user,
            pass,
            host,
            port,
            path: pct_decode(path),
        }))
    }

    /// True for a remote endpoint.
    pub fn is_remote(&self) -> bool {
        matches!(self, Endpoint::Remote(_))
    }
}

impl RemoteUrl {
    /// The URL scheme: `haul`, `gsiftp` or `ftp`.
    pub fn scheme(&self) -> &'static str {
        match (self.tls, self.gsi) {
            (true, _) => "haul",
            (false, true) => "gsiftp",
            (false, false) => "ftp",
        }
    }

    /// `host:port` for connecting and for the history store.
    pub fn host_port(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    /// `scheme://host:port`: the server, as logs and route reports name it; with
    /// `credentials`, `scheme://user[:pass]@host:port` (percent-encoded), for nesting this
    /// server into another URL (relays, docs/relay.md).
    pub fn server(&self, credentials: bool) -> String {
        let scheme = self.scheme();
        let cred = match (credentials, &self.user, &self.pass) {
            (true, Some(u), Some(p)) => format!("{}:{}@", pct_encode(u), pct_encode(p)),
            (true, Some(u), None) => format!("{}@", pct_encode(u)),
            _ => String::new(),
        };
        format!("{scheme}://{cred}{}", self.host_port())
    }

    /// The servers a transfer of this URL passes: this one, then, while the path is a nested
    /// URL (relays, docs/relay.md), each next hop, as `scheme://host:port`.
    pub fn route(&self) -> Vec<String> {
        let mut hops = Vec::new();
        let mut at = Some(self.clone());
        while let Some(u) = at.take() {
            hops.push(u.server(false));
            if hops.len() > 16 || !haul_proto::nested::is_nested(&u.path) {
                break;
            }
            if let Ok(Endpoint::Remote(next)) = Endpoint::parse(u.path.trim_start_matches('/')) {
                at = Some(next);
            }
        }
        hops
    }

    /// The same server with another path.
    pub fn with_path(&self, path: String) -> RemoteUrl {
        RemoteUrl {
            path,
            ..self.clone()
        }
    }
}

/// Prints the URL without its password.
impl fmt::Display for RemoteUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = self.scheme();
        match &self.user {
            Some(u) => write!(f, "{scheme}://{u}@{}{}", self.host_port(), self.path),
            None => write!(f, "{scheme}://{}{}", self.host_port(), self.path),
        }
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Endpoint::Local(p) => write!(f, "{}", p.display()),
            Endpoint::Remote(r) => r.fmt(f),
        }
    }
}

#[cfg(test)]
mod route_tests {
    use super::*;

    #[test]
    fn a_nested_url_names_every_hop() {
        let Ok(Endpoint::Remote(u)) =
            Endpoint::parse("ftp://u:p@r1:2000/haul://r2/ftp://[::1]:2811//data/f")
        else {
            panic!("parse")
        };
        assert_eq!(
            u.route(),
            ["ftp://r1:2000", "haul://r2:2811", "ftp://[::1]:2811"]
        );
        let Ok(Endpoint::Remote(d)) = Endpoint::parse("ftp://h/data/f") else {
            panic!("parse")
        };
        assert_eq!(d.route(), ["ftp://h:2811"]);
    }

    #[test]
    fn credentials_written_into_a_server_url_read_back() {
        let Ok(Endpoint::Remote(u)) = Endpoint::parse("haul://a%3Ab:p%2F%40%3A%25w@h:7/x") else {
            panic!("parse")
        };
        assert_eq!(
            (u.user.as_deref(), u.pass.as_deref()),
            (Some("a:b"), Some("p/@:%w"))
        );
        assert_eq!(u.server(false), "haul://h:7");
        let back = format!("{}/y", u.server(true));
        let Ok(Endpoint::Remote(v)) = Endpoint::parse(&back) else {
            panic!("parse {back}")
        };
        assert_eq!(
            (v.user, v.pass, v.host, v.port),
            (u.user, u.pass, u.host, u.port)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        #[test]
        fn parse_never_panics(s in "\\PC*", tail in "[%a-fA-F0-9é/:@\\[\\]]{0,12}") {
            let _ = Endpoint::parse(&s);
            let _ = Endpoint::parse(&format!("ftp://h/{tail}"));
            let _ = Endpoint::parse(&format!("haul://{tail}"));
        }
    }

    #[test]
    fn parses_urls() {
        let Endpoint::Remote(r) =
            Endpoint::parse("ftp://bob:s%40cret@example.org:2812/data/x y").unwrap()
        else {
            panic!()
        };
        assert_eq!(
            (r.user.as_deref(), r.pass.as_deref()),
            (Some("bob"), Some("s@cret"))
        );
        assert_eq!(
            (r.host.as_str(), r.port, r.path.as_str()),
            ("example.org", 2812, "/data/x y")
        );
        assert_eq!(r.to_string(), "ftp://bob@example.org:2812/data/x y");
        let Endpoint::Remote(r) = Endpoint::parse("haul://[::1]/").unwrap() else {
            panic!()
        };
        assert!(r.tls);
        assert_eq!((r.host.as_str(), r.port), ("::1", DEFAULT_PORT));
        assert_eq!(
            Endpoint::parse("./a/b").unwrap(),
            Endpoint::Local("./a/b".into())
        );
        assert_eq!(
            Endpoint::parse("file:///tmp/x").unwrap(),
            Endpoint::Local("/tmp/x".into())
        );
        assert!(Endpoint::parse("http://x/").is_err());
        // Percent escapes next to multi-byte characters never split a character.
        let Endpoint::Remote(r) = Endpoint::parse("ftp://h/%aé%4").unwrap() else {
            panic!()
        };
        assert_eq!(r.path, "/%aé%4");
        let Endpoint::Remote(r) = Endpoint::parse("ftp://h/a%20b%c3%a9").unwrap() else {
            panic!()
        };
        assert_eq!(r.path, "/a bé");
        assert!(Endpoint::parse("ftp://:21/x").is_err());
        assert!(Endpoint::parse("ftp://h:99999/x").is_err());
    }
}
