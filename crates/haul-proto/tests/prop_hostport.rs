//! Property tests of the host-port formats of PORT / PASV / SPOR / EPRT and their replies.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use haul_proto::hostport::{find_in_reply, format_eprt, format_port, parse_eprt, parse_port};
use proptest::prelude::*;

fn v4() -> impl Strategy<Value = SocketAddr> {
    (any::<u32>(), any::<u16>())
        .prop_map(|(ip, port)| SocketAddr::new(IpAddr::V4(Ipv4Addr::from(ip)), port))
}

/// Reply text around an address: anything, but not ending (prefix) or starting (suffix) with a
/// digit or comma, which would merge into the address's digit group.
fn around() -> impl Strategy<Value = (String, String)> {
    let t = prop_oneof!["[a-zA-Z ()=:.]{0,20}", "\\PC{0,12}", "[ -~]{0,20}"];
    (t.clone(), t).prop_filter("no digit or comma next to the address", |(p, s)| {
        !p.ends_with(|c: char| c.is_ascii_digit() || c == ',')
            && !s.starts_with(|c: char| c.is_ascii_digit() || c == ',')
            && find_in_reply(p).is_none()
    })
}

proptest! {
    #[test]
    fn port_round_trip(a in v4()) {
        prop_assert_eq!(parse_port(&format_port(&a)), Ok(a));
    }

    #[test]
    fn eprt_round_trip(a in prop_oneof![
        v4(),
        (any::<u128>(), any::<u16>()).prop_map(|(ip, port)| SocketAddr::new(IpAddr::V6(Ipv6Addr::from(ip)), port)),
    ]) {
        prop_assert_eq!(parse_eprt(&format_eprt(&a)), Ok(a));
    }

    #[test]
    fn finds_address_in_reply_text(a in v4(), (prefix, suffix) in around()) {
        let text = format!("{prefix}{}{suffix}", format_port(&a));
        prop_assert_eq!(find_in_reply(&text), Some(a), "in {:?}", text);
    }

    #[test]
    fn parsers_never_panic(s in prop_oneof![".*", "[0-9, ]{0,40}", "\\|[0-9]?\\|[0-9a-f:.]{0,40}\\|[0-9]{0,8}\\|?"]) {
        let _ = parse_port(&s);
        let _ = parse_eprt(&s);
        let _ = find_in_reply(&s);
        let _ = haul_proto::hostport::find_epsv_port(&s);
    }
}

proptest! {
    /// The port of an EPSV reply comes back from the text the server writes, and from any
    /// delimiter RFC 2428 allows in place of `|`.
    #[test]
    fn finds_epsv_port(port: u16, d in "[!-~]", (prefix, suffix) in around()) {
        prop_assume!(!d.chars().any(|c| c.is_ascii_digit() || c == '(' || c == ')'));
        prop_assume!(!prefix.contains('('));
        let text = format!("{prefix}Entering Extended Passive Mode ({d}{d}{d}{port}{d}){suffix}");
        prop_assert_eq!(haul_proto::hostport::find_epsv_port(&text), Some(port), "in {:?}", text);
    }
}
