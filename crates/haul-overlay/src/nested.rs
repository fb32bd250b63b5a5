//! Nested URLs: a command path such as `/ftp://origin:2811/data/f`, sent to a relay, names the
//! next hop (`origin:2811`) and the path to ask it for (`/data/f`).
//!
//! A path is nested when, after any number of leading `/`, it starts (ASCII case-insensitively)
//! with `ftp://`, `haul://` (TLS) or `gsiftp://` (GSI, with the client's delegated
//! credential). The URL is parsed with [`Endpoint::parse`]; its authority is checked first
//! (host name or bracketed IPv6 literal, port 1–65535), and the whole chain of hops behind it
//! too, up to [`MAX_HOPS`] levels.
//!
//! Escapes: each level's user and password are percent-decoded once, by the hop that uses them.
//! When the next hop's path is itself a nested URL it is passed on verbatim (so the next relay
//! decodes its own credentials exactly once); a plain path is percent-decoded, as
//! [`Endpoint::parse`] does. A plain path that decodes to a nested URL is refused, so that
//! escapes cannot hide hops from the depth limit.
//!
//! Credentials never reach logs or replies: errors name the cause and the nesting level, never
//! the text; [`NextHop::redacted`] and [`redact`] show passwords as `****`.

use std::net::Ipv6Addr;

use haul_xfer::url::Endpoint;
use haul_xfer::RemoteUrl;

/// The most levels of nesting a path may hold, counted over the whole chain of hops.
pub const MAX_HOPS: usize = 8;

/// What a password is shown as.
const MASK: &str = "****";

/// The schemes that make a path nested, and the scheme [`Endpoint::parse`] is given for each.
const SCHEMES: [(&str, &str); 3] = [
    ("ftp://", "ftp://"),
    ("gsiftp://", "gsiftp://"),
    ("haul://", "haul://"),
];

/// A nested URL that cannot be used. Messages name the cause and never quote the URL.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NestedError {
    /// A level names no host.
    #[error("nested URL (level {level}) has an empty host")]
    EmptyHost {
        /// Nesting level, 1 for the outermost URL.
        level: usize,
    },
    /// A level's port is not a number from 0 to 65535.
    #[error("nested URL (level {level}) has a bad port (want a number from 1 to 65535)")]
    BadPort {
        /// Nesting level, 1 for the outermost URL.
        level: usize,
    },
    /// A level's port is 0.
    #[error("nested URL (level {level}) has port 0")]
    PortZero {
        /// Nesting level, 1 for the outermost URL.
        level: usize,
    },
    /// A level's host is neither a host name nor a bracketed IPv6 literal.
    #[error(
        "nested URL (level {level}) has a bad host (want letters, digits, '-' and '.', \
         or an IPv6 address in brackets)"
    )]
    BadHost {
        /// Nesting level, 1 for the outermost URL.
        level: usize,
    },
    /// The path holds a space or a control character.
    #[error("nested URL contains a space or a control character")]
    BadChar,
    /// A percent-escape in a user, password or path decodes to a control character.
    #[error("nested URL (level {level}) has a percent-escape that decodes to a control character")]
    EscapedControl {
        /// Nesting level, 1 for the outermost URL.
        level: usize,
    },
    /// The chain of hops is longer than [`MAX_HOPS`].
    #[error("nested URL has more than {max} levels of nesting")]
    TooDeep {
        /// The limit, [`MAX_HOPS`].
        max: usize,
    },
    /// The innermost path is a nested URL written with percent-escapes.
    #[error("nested URL (level {level}) hides another nested URL behind percent-escapes")]
    HiddenNesting {
        /// Nesting level, 1 for the outermost URL.
        level: usize,
    },
    /// [`Endpoint::parse`] refused a level for another reason.
    #[error("nested URL (level {level}) is malformed")]
    Malformed {
        /// Nesting level, 1 for the outermost URL.
        level: usize,
    },
}

/// The hop a nested path names: where to connect, as whom, and the path to ask for there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NextHop {
    /// The next hop's URL; its `path` may itself be a nested URL (verbatim).
    pub url: RemoteUrl,
}

/// One level of a nested path: its URL and the raw text after its authority.
struct Level<'a> {
    url: RemoteUrl,
    tail: &'a str,
}

/// The next hop a command path names, `None` when the path is not a nested URL.
pub fn nested(path: &str) -> Option<Result<NextHop, NestedError>> {
    let (scheme, rest) = strip_scheme(path)?;
    Some(parse_chain(path, scheme, rest))
}

/// Replaces the password of every `scheme://user:pass@` in `text` with `****`.
///
/// The user information ends at the last `@` before the first `/` of the authority; when the
/// authority has none, at the last `@` before the next URL or white space, erring toward hiding
/// too much rather than too little.
pub fn redact(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut search = 0;
    while let Some(i) = text[search..].find("://") {
        let start = search + i + 3;
        let end = segment_end(text, start);
        let seg = &text[start..end];
        let authority = &seg[..seg.find('/').unwrap_or(seg.len())];
        let at = authority.rfind('@').or_else(|| seg.rfind('@'));
        if let Some(at) = at {
            if let Some(colon) = seg[..at].find(':') {
                out.push_str(&text[copied..start + colon + 1]);
                out.push_str(MASK);
                copied = start + at;
            }
        }
        search = end;
    }
    out.push_str(&text[copied..]);
    out
}

impl NextHop {
    /// The URL as text for logs and replies, passwords at every level of nesting as `****`.
    pub fn redacted(&self) -> String {
        let u = &self.url;
        let mut out = format!("{}://", u.scheme());
        if let Some(user) = &u.user {
            escape_userinfo(user, &mut out);
        }
        if u.pass.is_some() {
            out.push(':');
            out.push_str(MASK);
        }
        if u.user.is_some() || u.pass.is_some() {
            out.push('@');
        }
        out.push_str(&u.host_port());
        // A plain path was percent-decoded: escape it again so the text reads as a URL.
        if strip_scheme(&u.path).is_some() {
            out.push_str(&redact(&u.path));
        } else {
            out.push_str(&redact(&escape_path(&u.path)));
        }
        out
    }

    /// `host:port` to connect to, an IPv6 host in brackets.
    pub fn hop(&self) -> String {
        self.url.host_port()
    }
}

/// The scheme to parse with and the text after `scheme://`, when `path` is nested.
fn strip_scheme(path: &str) -> Option<(&'static str, &str)> {
    let s = path.trim_start_matches('/');
    SCHEMES.iter().find_map(|&(prefix, scheme)| {
        let head = s.get(..prefix.len())?;
        head.eq_ignore_ascii_case(prefix)
            .then(|| (scheme, &s[prefix.len()..]))
    })
}

/// Parses the first level and checks every level behind it.
fn parse_chain(path: &str, scheme: &str, rest: &str) -> Result<NextHop, NestedError> {
    if path.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(NestedError::BadChar);
    }
    let first = parse_level(scheme, rest, 1)?;
    let mut level = 1;
    let mut tail = first.tail;
    let mut innermost = first.url.path.clone();
    while let Some((scheme, rest)) = strip_scheme(tail) {
        level += 1;
        if level > MAX_HOPS {
            return Err(NestedError::TooDeep { max: MAX_HOPS });
        }
        let next = parse_level(scheme, rest, level)?;
        tail = next.tail;
        innermost = next.url.path;
    }
    if innermost.chars().any(char::is_control) {
        return Err(NestedError::EscapedControl { level });
    }
    if strip_scheme(&innermost).is_some() {
        return Err(NestedError::HiddenNesting { level });
    }
    let mut url = first.url;
    if strip_scheme(first.tail).is_some() {
        url.path = first.tail.to_string();
    }
    Ok(NextHop { url })
}

/// Parses one level: `rest` is the text after `scheme://`.
fn parse_level<'a>(scheme: &str, rest: &'a str, level: usize) -> Result<Level<'a>, NestedError> {
    let (authority, tail) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let hostport = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    check_hostport(hostport, level)?;
    let url = match Endpoint::parse(&format!("{scheme}{rest}")) {
        Ok(Endpoint::Remote(url)) => url,
        _ => return Err(NestedError::Malformed { level }),
    };
    let decoded = [&url.user, &url.pass];
    if decoded.iter().any(|s| {
        s.as_deref()
            .is_some_and(|s| s.chars().any(char::is_control))
    }) {
        return Err(NestedError::EscapedControl { level });
    }
    Ok(Level { url, tail })
}

/// Checks `host[:port]` or `[v6][:port]` before [`Endpoint::parse`] reads it.
fn check_hostport(hostport: &str, level: usize) -> Result<(), NestedError> {
    let (host, port) = if let Some(h) = hostport.strip_prefix('[') {
        let (v6, after) = h.split_once(']').ok_or(NestedError::BadHost { level })?;
        if v6.is_empty() {
            return Err(NestedError::EmptyHost { level });
        }
        if v6.parse::<Ipv6Addr>().is_err() {
            return Err(NestedError::BadHost { level });
        }
        let port = match after {
            "" => None,
            a => Some(a.strip_prefix(':').ok_or(NestedError::BadPort { level })?),
        };
        (None, port)
    } else {
        match hostport.rsplit_once(':') {
            Some((h, p)) => (Some(h), Some(p)),
            None => (Some(hostport), None),
        }
    };
    if let Some(host) = host {
        if host.is_empty() {
            return Err(NestedError::EmptyHost { level });
        }
        if !host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
        {
            return Err(NestedError::BadHost { level });
        }
    }
    match port {
        None => Ok(()),
        Some(p) if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) => {
            Err(NestedError::BadPort { level })
        }
        Some(p) => match p.parse::<u16>() {
            Ok(0) => Err(NestedError::PortZero { level }),
            Ok(_) => Ok(()),
            Err(_) => Err(NestedError::BadPort { level }),
        },
    }
}

/// Where the URL text that starts at `start` (just after `://`) ends for [`redact`]: at white
/// space, a control character, or the scheme of the next URL.
fn segment_end(text: &str, start: usize) -> usize {
    let rest = &text[start..];
    let rest = &rest[..rest
        .find(|c: char| c.is_whitespace() || c.is_control())
        .unwrap_or(rest.len())];
    let Some(next) = rest.find("://") else {
        return start + rest.len();
    };
    let b = rest.as_bytes();
    let mut end = next;
    while end > 0 && (b[end - 1].is_ascii_alphanumeric() || b"+-.".contains(&b[end - 1])) {
        end -= 1;
    }
    start + end
}

/// A plain (decoded) path as URL text: `%`, white space and control characters escaped.
fn escape_path(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for c in path.chars() {
        if c == '%' || c.is_whitespace() || c.is_control() {
            let mut buf = [0; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("%{b:02X}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Appends a user name with the characters URL user information reserves percent-escaped.
fn escape_userinfo(s: &str, out: &mut String) {
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
}

#[cfg(test)]
mod tests;
