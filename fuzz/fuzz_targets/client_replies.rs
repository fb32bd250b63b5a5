//! Fuzzes what the client makes of a server's replies, after `ReplyParser` split them, applying
//! each reader to the reply code the client applies it to: a `DTOK` token (`DataToken::from_hex`,
//! 200), the FEAT reply (`Features::parse`, 211), a CKSM digest (`parse_cksm_reply`) and SIZE (213), the addresses of PASV / SPAS / EPSV
//! (227 / 229), 111 restart and 112 performance markers, the MLST fact line `Session::stat` picks
//! (250), and the error built from a refusal (`XferError::from_reply`, 4yz / 5yz). None may
//! panic; each result must keep what the client relies on.

#![no_main]

use haul_proto::hostport::{find_epsv_port, find_in_reply, format_port};
use haul_proto::markers::parse_range_marker;
use haul_proto::{Command, PerfMarker, Reply, ReplyParser};
use haul_transport::token::DataToken;
use haul_xfer::checksum::parse_cksm_reply;
use haul_xfer::control::Features;
use haul_xfer::listing::parse_mlst;
use haul_xfer::{ErrorKind, XferError};
use libfuzzer_sys::fuzz_target;

#[path = "common/replies.rs"]
mod common;
use common::replies;

/// The same reply after a trip over the wire.
fn resent(r: &Reply) -> Reply {
    let mut p = ReplyParser::new();
    p.extend(r.encode().as_bytes());
    p.next_reply()
        .expect("a re-encoded reply parses")
        .expect("and is complete")
}

/// Applies to `r` what the client applies to a reply of its code.
fn check(r: &Reply) {
    let text = r.text();
    match r.code {
        200 => {
            // As `Session::data_token` reads a `DTOK` reply.
            if let Some(t) = text
                .trim()
                .strip_prefix("DTOK ")
                .and_then(DataToken::from_hex)
            {
                assert_eq!(DataToken::from_hex(&t.to_hex()), Some(t));
                let hex = text.trim()["DTOK ".len()..].trim();
                assert_eq!(
                    t.to_hex(),
                    hex.to_ascii_lowercase(),
                    "token read from {hex:?}"
                );
            }
        }
        211 => {
            let f = Features::parse(r);
            for a in &f.cksm {
                assert!(
                    !a.is_empty() && a.trim() == a && *a == a.to_ascii_uppercase(),
                    "CKSM algorithm {a:?}"
                );
                assert!(
                    !a.contains([';', ',', ':']),
                    "CKSM algorithm {a:?} not split"
                );
                assert!(f.has_cksm(&a.to_ascii_lowercase()));
            }
            assert_eq!(
                format!("{f:?}"),
                format!("{:?}", Features::parse(&resent(r))),
                "FEAT changed on the wire"
            );
        }
        213 => {
            // The digest is compared for equality with the local lowercase hex, so only its form
            // matters: trimmed, lower-case, one line, and a hex last line read exactly.
            let digest = parse_cksm_reply(r).expect("a reply has a line");
            assert!(
                digest.trim() == digest && digest == digest.to_ascii_lowercase(),
                "digest {digest:?}"
            );
            assert!(!digest.contains('\n'), "digest {digest:?}");
            let last = r.lines.last().map_or("", |l| l.trim());
            if !last.is_empty() && last.bytes().all(|b| b.is_ascii_hexdigit()) {
                assert_eq!(digest, last.to_ascii_lowercase());
            }
            let _ = text.trim().parse::<u64>();
        }
        227 | 229 => {
            if let Some(a) = find_in_reply(&text) {
                assert!(a.is_ipv4());
                assert_eq!(find_in_reply(&format_port(&a)), Some(a));
            }
            if let Some(p) = find_epsv_port(&text) {
                assert_eq!(find_epsv_port(&format!("(|||{p}|)")), Some(p));
            }
        }
        111 => {
            if let Some(set) = parse_range_marker(&text) {
                for w in set.ranges().windows(2) {
                    assert!(w[0].1 < w[1].0, "marker ranges {set:?}");
                }
                assert!(
                    set.ranges().iter().all(|&(a, b)| a < b),
                    "marker ranges {set:?}"
                );
            }
        }
        112 => {
            if let Some(m) = PerfMarker::from_lines(&r.lines) {
                assert_eq!(
                    PerfMarker::from_lines(&m.to_lines()).map(|x| x.stripe_bytes),
                    Some(m.stripe_bytes)
                );
            }
        }
        250 => {
            // As `Session::stat` picks the fact line of an MLST reply.
            if let Some(facts) = r.lines.iter().find(|l| l.contains('=') && l.contains(';')) {
                if let Some((true, size)) = parse_mlst(facts) {
                    assert_eq!(size, 0, "MLST directory with a size: {facts:?}");
                }
            }
        }
        _ => {}
    }
    if r.code >= 400 {
        let e = XferError::from_reply("fuzz.example:2811", &Command::Noop, r);
        assert!(
            e.to_string().contains(&r.code.to_string()),
            "{e} does not name the reply code"
        );
        if r.code == 530 {
            assert_eq!(e.kind(), ErrorKind::AuthenticationFailed);
        }
    }
}

fuzz_target!(|data: &[u8]| {
    for r in replies(data) {
        check(&r);
    }
});
