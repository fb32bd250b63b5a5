//! The relay's allow-list of next hops (`haul serve --relay-allow HOST[:PORT],…`).
//!
//! Entries, comma-separated: `HOST`, `HOST:PORT`, `ADDR`, `ADDR:PORT`, `[V6]`, `[V6]:PORT`,
//! `NET/LEN` (IPv4, or IPv6 bare or bracketed as `[fd00::/8]`), `NET/LEN:PORT` (IPv4) and
//! `[V6NET/LEN]:PORT`. An entry with a port allows only that port; one without allows the
//! GridFTP port 2811 and every unprivileged port (1024 and up), never another port below 1024.
//! IPv4-mapped IPv6 addresses, in entries and in the addresses checked, compare as IPv4.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;

use haul_xfer::url::DEFAULT_PORT;

/// The next hops a relay may connect to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowList {
    entries: Vec<Entry>,
}

/// One allow-list entry.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    target: Target,
    /// The only port allowed, or `None` for 2811 and the unprivileged ports.
    port: Option<u16>,
}

/// What an entry's host part matches.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    /// A host name, lower case, without a trailing dot.
    Name(String),
    /// One address (IPv4-mapped addresses stored as IPv4).
    Addr(IpAddr),
    /// A network: address with the host bits clear, and prefix length.
    Net(IpAddr, u8),
}

/// A `--relay-allow` list that cannot be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AllowError {
    /// The list has no entries.
    #[error("--relay-allow is empty: give HOST[:PORT], ADDR[:PORT] or NET/LEN[:PORT] entries")]
    Empty,
    /// An entry is empty.
    #[error("--relay-allow entry {position} is empty (a stray comma?)")]
    EmptyEntry {
        /// 1-based position of the entry in the list.
        position: usize,
    },
    /// A prefix length is not a number within the address's width.
    #[error("--relay-allow entry {entry:?}: bad prefix length (want a number from 0 to {max})")]
    BadPrefix {
        /// The entry as given.
        entry: String,
        /// 32 for IPv4, 128 for IPv6.
        max: u8,
    },
    /// A port is not a number from 1 to 65535.
    #[error("--relay-allow entry {entry:?}: bad port (want a number from 1 to 65535)")]
    BadPort {
        /// The entry as given.
        entry: String,
    },
    /// A port is 0.
    #[error("--relay-allow entry {entry:?}: port 0 is not a port")]
    PortZero {
        /// The entry as given.
        entry: String,
    },
    /// A host name holds characters host names cannot, or an empty label.
    #[error(
        "--relay-allow entry {entry:?}: invalid host name \
         (want labels of letters, digits and '-', joined by '.')"
    )]
    BadHost {
        /// The entry as given.
        entry: String,
    },
    /// Something that looks like an IP address or network but is not one.
    #[error(
        "--relay-allow entry {entry:?}: invalid IP address \
         (write IPv6 in brackets to add a port: [V6]:PORT, [V6NET/LEN]:PORT)"
    )]
    BadAddress {
        /// The entry as given.
        entry: String,
    },
    /// A prefix length after a host name.
    #[error("--relay-allow entry {entry:?}: a prefix length needs an IP network, not a host name")]
    NamePrefix {
        /// The entry as given.
        entry: String,
    },
}

/// A next hop the allow-list refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotAllowed {
    /// None of the next hop's addresses is allowed.
    #[error("next hop {hop} is not on this relay's allow-list (--relay-allow)")]
    Refused {
        /// `host:port`, an IPv6 host in brackets.
        hop: String,
    },
    /// The next hop has no addresses to check.
    #[error("next hop {hop} did not resolve")]
    Unresolved {
        /// `host:port`, an IPv6 host in brackets.
        hop: String,
    },
}

impl AllowList {
    /// True when an entry allows connecting to `addr` for the next hop named `host`.
    pub fn allows(&self, host: &str, addr: SocketAddr) -> bool {
        let ip = canonical_ip(addr.ip());
        let host = host.strip_suffix('.').unwrap_or(host);
        self.entries
            .iter()
            .any(|e| e.port_ok(addr.port()) && e.target.matches(host, ip))
    }

    /// The first of `addrs` (`host`'s resolved addresses, with their ports) the list allows.
    pub fn check(
        &self,
        host: &str,
        port: u16,
        addrs: &[SocketAddr],
    ) -> Result<SocketAddr, NotAllowed> {
        let hop = if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        if addrs.is_empty() {
            return Err(NotAllowed::Unresolved { hop });
        }
        addrs
            .iter()
            .copied()
            .find(|a| self.allows(host, *a))
            .ok_or(NotAllowed::Refused { hop })
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when the list has no entries (a parsed list always has some).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

impl Entry {
    /// True when this entry allows `port`.
    fn port_ok(&self, port: u16) -> bool {
        match self.port {
            Some(p) => port == p,
            None => port == DEFAULT_PORT || port >= 1024,
        }
    }
}

impl Target {
    /// True when `host` (trailing dot stripped) or `ip` (canonical) matches.
    fn matches(&self, host: &str, ip: IpAddr) -> bool {
        match self {
            Target::Name(n) => host.eq_ignore_ascii_case(n),
            Target::Addr(a) => *a == ip,
            Target::Net(net, len) => mask(ip, *len) == Some(*net),
        }
    }
}

/// IPv4-mapped IPv6 addresses as IPv4, others unchanged.
fn canonical_ip(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// `ip` with all but its first `len` bits clear; `None` when `len` is wider than `ip`.
fn mask(ip: IpAddr, len: u8) -> Option<IpAddr> {
    match ip {
        IpAddr::V4(a) if len <= 32 => {
            let m = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
            Some(IpAddr::V4((u32::from(a) & m).into()))
        }
        IpAddr::V6(a) if len <= 128 => {
            let m = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
            Some(IpAddr::V6((u128::from(a) & m).into()))
        }
        _ => None,
    }
}

impl FromStr for AllowList {
    type Err = AllowError;

    /// Parses a comma-separated list; white space around entries is ignored.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.trim().is_empty() {
            return Err(AllowError::Empty);
        }
        let entries = s
            .split(',')
            .enumerate()
            .map(|(i, e)| match e.trim() {
                "" => Err(AllowError::EmptyEntry { position: i + 1 }),
                e => parse_entry(e),
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(AllowList { entries })
    }
}

/// Parses one entry (already trimmed).
fn parse_entry(entry: &str) -> Result<Entry, AllowError> {
    let e = || entry.to_string();
    let (body, port, bracketed) = if let Some(r) = entry.strip_prefix('[') {
        let (inner, after) = r
            .split_once(']')
            .ok_or(AllowError::BadAddress { entry: e() })?;
        let port = match after {
            "" => None,
            a => Some(
                a.strip_prefix(':')
                    .ok_or(AllowError::BadPort { entry: e() })?,
            ),
        };
        (inner, port, true)
    } else if entry.matches(':').count() > 1 {
        // A bare IPv6 address or network: no room for a port.
        (entry, None, false)
    } else {
        match entry.split_once(':') {
            Some((b, p)) => (b, Some(p), false),
            None => (entry, None, false),
        }
    };
    let port = match port {
        None => None,
        Some(p) if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) => {
            return Err(AllowError::BadPort { entry: e() })
        }
        Some(p) => match p.parse::<u16>() {
            Ok(0) => return Err(AllowError::PortZero { entry: e() }),
            Ok(p) => Some(p),
            Err(_) => return Err(AllowError::BadPort { entry: e() }),
        },
    };
    let target = parse_target(body, bracketed, entry)?;
    Ok(Entry { target, port })
}

/// Parses an entry's host part: a network, an address or a host name.
fn parse_target(body: &str, bracketed: bool, entry: &str) -> Result<Target, AllowError> {
    let e = || entry.to_string();
    if let Some((net, len)) = body.split_once('/') {
        let ip: IpAddr = match net.parse() {
            Ok(ip) => ip,
            Err(_) if !bracketed && is_name(net) && !looks_numeric(net) => {
                return Err(AllowError::NamePrefix { entry: e() })
            }
            Err(_) => return Err(AllowError::BadAddress { entry: e() }),
        };
        let max = if ip.is_ipv4() { 32 } else { 128 };
        let len = match len.parse::<u8>() {
            Ok(l) if l <= max && len.bytes().all(|b| b.is_ascii_digit()) => l,
            _ => return Err(AllowError::BadPrefix { entry: e(), max }),
        };
        return Ok(network(ip, len));
    }
    if let Ok(ip) = body.parse::<IpAddr>() {
        return Ok(Target::Addr(canonical_ip(ip)));
    }
    if bracketed || body.contains(':') || looks_numeric(body) {
        return Err(AllowError::BadAddress { entry: e() });
    }
    if !is_name(body) {
        return Err(AllowError::BadHost { entry: e() });
    }
    let name = body.strip_suffix('.').unwrap_or(body);
    Ok(Target::Name(name.to_ascii_lowercase()))
}

/// The network `ip/len` with its host bits clear; IPv4-mapped networks (`::ffff:0:0/96` and
/// longer) as IPv4.
fn network(ip: IpAddr, len: u8) -> Target {
    let (ip, len) = match ip {
        IpAddr::V6(v6) if len >= 96 => match v6.to_ipv4_mapped() {
            Some(v4) => (IpAddr::V4(v4), len - 96),
            None => (ip, len),
        },
        _ => (ip, len),
    };
    match mask(ip, len) {
        Some(net) => Target::Net(net, len),
        None => Target::Addr(ip),
    }
}

/// True for a host name: labels of letters, digits and `-`, joined by `.`, maybe a final `.`.
fn is_name(s: &str) -> bool {
    let s = s.strip_suffix('.').unwrap_or(s);
    !s.is_empty()
        && s.len() <= 253
        && s.split('.')
            .all(|l| !l.is_empty() && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'))
}

/// True for digits and dots only: a mistyped IPv4 address rather than a host name.
fn looks_numeric(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit() || b == b'.')
}

impl fmt::Display for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.target {
            Target::Name(n) => write!(f, "{n}")?,
            Target::Addr(IpAddr::V6(a)) => write!(f, "[{a}]")?,
            Target::Addr(a) => write!(f, "{a}")?,
            Target::Net(IpAddr::V6(a), len) => write!(f, "[{a}/{len}]")?,
            Target::Net(a, len) => write!(f, "{a}/{len}")?,
        }
        match self.port {
            Some(p) => write!(f, ":{p}"),
            None => Ok(()),
        }
    }
}

/// Prints the list in canonical form, which parses back to the same list.
impl fmt::Display for AllowList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.entries.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
