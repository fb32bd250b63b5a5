//! Host-port encodings of the control channel: RFC 959 `h1,h2,h3,h4,p1,p2` (PORT, PASV, SPOR,
//! SPAS), RFC 2428 `|af|addr|port|` (EPRT, EPSV), and the addresses inside PASV/SPAS replies.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// Parses `h1,h2,h3,h4,p1,p2`.
pub fn parse_port(s: &str) -> Result<SocketAddr, String> {
    let s = s.trim();
    let parts: Vec<&str> = s.split(',').map(str::trim).collect();
    if parts.len() != 6 {
        return Err(format!("{s:?} is not h1,h2,h3,h4,p1,p2"));
    }
    let mut n = [0u8; 6];
    for (i, p) in parts.iter().enumerate() {
        n[i] = p
            .parse::<u8>()
            .map_err(|_| format!("{p:?} in {s:?} is not a number 0-255"))?;
    }
    let ip = Ipv4Addr::new(n[0], n[1], n[2], n[3]);
    let port = u16::from(n[4]) << 8 | u16::from(n[5]);
    Ok(SocketAddr::new(IpAddr::V4(ip), port))
}

/// Formats an address as `h1,h2,h3,h4,p1,p2`; IPv6 addresses are not expressible and map to
/// their IPv4 form when they have one, else to 0.0.0.0.
pub fn format_port(a: &SocketAddr) -> String {
    let ip = match a.ip() {
        IpAddr::V4(v4) => v4,
        IpAddr::V6(v6) => v6.to_ipv4_mapped().unwrap_or(Ipv4Addr::UNSPECIFIED),
    };
    let o = ip.octets();
    format!(
        "{},{},{},{},{},{}",
        o[0],
        o[1],
        o[2],
        o[3],
        a.port() >> 8,
        a.port() & 0xff
    )
}

/// Parses an RFC 2428 `|af|addr|port|` argument.
pub fn parse_eprt(s: &str) -> Result<SocketAddr, String> {
    let s = s.trim();
    let d = s.chars().next().ok_or("empty EPRT argument")?;
    let parts: Vec<&str> = s.split(d).collect();
    if parts.len() != 5 || !parts[0].is_empty() || !parts[4].is_empty() {
        return Err(format!("{s:?} is not |af|addr|port|"));
    }
    let ip: IpAddr = parts[2]
        .parse()
        .map_err(|_| format!("bad address {:?}", parts[2]))?;
    match (parts[1], ip) {
        ("1", IpAddr::V4(_)) | ("2", IpAddr::V6(_)) => {}
        _ => return Err(format!("address family {:?} does not match {ip}", parts[1])),
    }
    let port: u16 = parts[3]
        .parse()
        .map_err(|_| format!("bad port {:?}", parts[3]))?;
    Ok(SocketAddr::new(ip, port))
}

/// Formats an address as `|af|addr|port|`.
pub fn format_eprt(a: &SocketAddr) -> String {
    let af = if a.is_ipv4() { 1 } else { 2 };
    format!("|{af}|{}|{}|", a.ip(), a.port())
}

/// Finds the first `h1,h2,h3,h4,p1,p2` group in a reply text (PASV's 227, each SPAS line).
pub fn find_in_reply(text: &str) -> Option<SocketAddr> {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i].is_ascii_digit() {
            let end = text[i..]
                .find(|c: char| !(c.is_ascii_digit() || c == ','))
                .map_or(text.len(), |e| i + e);
            if let Ok(a) = parse_port(&text[i..end]) {
                return Some(a);
            }
            i = end;
        } else {
            i += 1;
        }
    }
    None
}

/// Extracts the port of an EPSV 229 reply text, `(|||port|)`.
pub fn find_epsv_port(text: &str) -> Option<u16> {
    let open = text.find('(')?;
    let close = text[open..].find(')')? + open;
    let inner = &text[open + 1..close];
    let d = inner.chars().next()?;
    let parts: Vec<&str> = inner.split(d).collect();
    if parts.len() != 5 {
        return None;
    }
    parts[3].parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_round_trip() {
        let a: SocketAddr = "10.1.2.3:50001".parse().unwrap();
        assert_eq!(parse_port(&format_port(&a)).unwrap(), a);
        assert!(parse_port("1,2,3,4,5").is_err());
        assert!(parse_port("1,2,3,4,5,256").is_err());
    }

    #[test]
    fn eprt_round_trip() {
        for s in ["127.0.0.1:2121", "[::1]:2121"] {
            let a: SocketAddr = s.parse().unwrap();
            assert_eq!(parse_eprt(&format_eprt(&a)).unwrap(), a);
        }
        assert!(parse_eprt("|2|127.0.0.1|21|").is_err());
    }

    #[test]
    fn finds_addresses_in_replies() {
        assert_eq!(
            find_in_reply("Entering Passive Mode (127,0,0,1,195,80)"),
            Some("127.0.0.1:50000".parse().unwrap())
        );
        assert_eq!(
            find_in_reply(" 127,0,0,1,4,1"),
            Some("127.0.0.1:1025".parse().unwrap())
        );
        assert_eq!(find_in_reply("nothing 1,2"), None);
        assert_eq!(
            find_epsv_port("Entering Extended Passive Mode (|||6446|)"),
            Some(6446)
        );
    }
}
