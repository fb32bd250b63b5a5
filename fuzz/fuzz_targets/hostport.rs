//! Fuzzes the host-port forms: `parse_port` (PORT / SPOR / PLUT PORT arguments, which the server
//! reads), `parse_eprt` (EPRT), and what the client reads from replies: `find_in_reply` (PASV's
//! 227, each SPAS line) and `find_epsv_port` (EPSV's 229). Whatever is accepted must print with
//! the matching formatter to text that parses to the same address or port.

#![no_main]

use std::net::SocketAddr;

use haul_proto::hostport::{
    find_epsv_port, find_in_reply, format_eprt, format_port, parse_eprt, parse_port,
};
use libfuzzer_sys::fuzz_target;

/// Checks an IPv4 address as the RFC 959 forms carry it.
fn check_port_form(a: SocketAddr) {
    assert!(a.is_ipv4(), "{a} from an h1,h2,h3,h4,p1,p2 form");
    let shown = format_port(&a);
    assert_eq!(parse_port(&shown), Ok(a), "{shown:?}");
    assert_eq!(
        find_in_reply(&format!("Entering Passive Mode ({shown})")),
        Some(a)
    );
    assert_eq!(find_in_reply(&format!(" {shown}")), Some(a), "an SPAS line");
}

fuzz_target!(|data: &[u8]| {
    let s = String::from_utf8_lossy(data);
    if let Ok(a) = parse_port(&s) {
        assert_eq!(s.split(',').count(), 6, "{s:?} accepted as a PORT argument");
        check_port_form(a);
    }
    if let Ok(a) = parse_eprt(&s) {
        let shown = format_eprt(&a);
        assert_eq!(parse_eprt(&shown), Ok(a), "{shown:?}");
    }
    if let Some(a) = find_in_reply(&s) {
        check_port_form(a);
    }
    if let Some(p) = find_epsv_port(&s) {
        let shown = format!("Entering Extended Passive Mode (|||{p}|)");
        assert_eq!(find_epsv_port(&shown), Some(p), "{shown:?}");
    }
});
