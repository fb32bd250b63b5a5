//! Fuzzes what a relay reads from its clients and its command line: `nested` (a command path
//! that may name the next hop), `redact` (credentials out of log lines and replies) and
//! `AllowList::from_str` (`--relay-allow`). Nothing may panic; an accepted chain of hops must
//! parse hop by hop to the end, and no password may show in `redacted()` or `redact()` unless
//! it is also elsewhere in the text; an accepted allow-list must print to text that parses back
//! to the same list. `haul_proto::nested::chain` (the client's key for reusing a relayed
//! session) must not panic and must be a prefix of the path.

#![no_main]

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::ops::Range;
use std::str::FromStr;

use haul_overlay::nested::MAX_HOPS;
use haul_overlay::{nested, redact, AllowList, NextHop};
use libfuzzer_sys::fuzz_target;

/// The raw password of the URL that starts `text` (after any `/`), as a byte range of `text`.
fn pass_span(text: &str) -> Option<Range<usize>> {
    let s = text.trim_start_matches('/');
    let off = text.len() - s.len();
    let after = s.find("://")? + 3;
    let rest = &s[after..];
    let authority = &rest[..rest.find('/').unwrap_or(rest.len())];
    let at = authority.rfind('@')?;
    let colon = authority[..at].find(':')?;
    Some(off + after + colon + 1..off + after + at)
}

/// `text` with the byte ranges `spans` (offsets from `base`) replaced by NUL.
fn blank(text: &str, base: usize, spans: &[Range<usize>]) -> String {
    let mut b = text.as_bytes().to_vec();
    for s in spans.iter().filter(|s| s.start >= base) {
        b[s.start - base..s.end - base].fill(0);
    }
    String::from_utf8(b).expect("spans are between ASCII ':' and '@'")
}

/// A password a check can look for: non-empty, without the mask's `*`.
fn testable(p: &Option<String>) -> Option<&str> {
    p.as_deref().filter(|p| !p.is_empty() && !p.contains('*'))
}

/// `redact(text)` shows no password that `text` holds only in the password spans.
fn check_redact(text: &str, base: usize, spans: &[Range<usize>], hops: &[NextHop]) {
    let shown = redact(text);
    assert_eq!(
        redact(&shown),
        shown,
        "redact is not idempotent on {text:?}"
    );
    let rest = blank(text, base, spans);
    for p in hops.iter().filter_map(|h| testable(&h.url.pass)) {
        if !rest.contains(p) {
            assert!(
                !shown.contains(p),
                "redact({text:?}) = {shown:?} shows {p:?}"
            );
        }
    }
}

/// `redacted()` does not depend on the password, and does not show it.
fn check_redacted(input: &str, rest: &str, h: &NextHop) {
    let shown = h.redacted();
    let mut other = h.clone();
    other.url.pass = other.url.pass.as_ref().map(|p| format!("{p}Zz"));
    assert_eq!(
        other.redacted(),
        shown,
        "redacted() depends on the password"
    );
    let mut none = h.clone();
    none.url.pass = None;
    let none = none.redacted();
    // What redacted() writes around `****`: `scheme://user:` and the text without a password.
    let head = format!("{}:", &none[..none.find('@').unwrap_or(none.len())]);
    if let Some(p) = testable(&h.url.pass) {
        if !rest.contains(p) && !none.contains(p) && !head.contains(p) {
            assert!(
                !shown.contains(p),
                "{input:?}: redacted() = {shown:?} shows {p:?}"
            );
        }
    }
    match nested(&shown) {
        Some(Ok(back)) => {
            assert_eq!((&back.url.host, back.url.port), (&h.url.host, h.url.port));
            assert_eq!(&back.url.user, &h.url.user);
            assert_eq!(back.url.tls, h.url.tls);
        }
        Some(Err(_)) => {} // an inner URL's path hidden past its `@` may not parse
        None => panic!("redacted() = {shown:?} is not a nested URL"),
    }
}

/// Follows an accepted chain hop by hop and checks every level.
fn check_chain(input: &str, first: NextHop) {
    let mut hops = vec![first];
    loop {
        let path = hops[hops.len() - 1].url.path.clone();
        match nested(&path) {
            Some(Ok(h)) => {
                assert!(
                    input.ends_with(&path),
                    "{path:?} is not the tail of {input:?}"
                );
                hops.push(h);
            }
            Some(Err(e)) => panic!("{input:?} accepted, but its tail {path:?} is not: {e}"),
            None => break,
        }
        assert!(hops.len() <= MAX_HOPS, "{input:?} has over {MAX_HOPS} hops");
    }
    let mut spans: Vec<Range<usize>> = pass_span(input).into_iter().collect();
    for h in &hops[..hops.len() - 1] {
        let base = input.len() - h.url.path.len();
        spans.extend(pass_span(&h.url.path).map(|r| r.start + base..r.end + base));
    }
    check_redact(input, 0, &spans, &hops);
    let rest = blank(input, 0, &spans);
    for (i, h) in hops.iter().enumerate() {
        if i + 1 < hops.len() {
            check_redact(
                &h.url.path,
                input.len() - h.url.path.len(),
                &spans,
                &hops[i + 1..],
            );
        }
        check_redacted(input, &rest, h);
        let hop = h.hop();
        assert!(hop.ends_with(&format!(":{}", h.url.port)), "{hop}");
        assert!(h.url.port != 0, "{input:?}: port 0");
    }
}

/// An accepted allow-list prints to text that parses back to the same list and matches.
fn check_allow(text: &str, data: &[u8]) {
    let Ok(list) = AllowList::from_str(text) else {
        return;
    };
    assert!(!list.is_empty());
    let shown = list.to_string();
    let back = AllowList::from_str(&shown)
        .unwrap_or_else(|e| panic!("{text:?} printed as {shown:?}, which does not parse: {e}"));
    assert_eq!(back, list, "{text:?} printed as {shown:?}");
    assert_eq!(back.to_string(), shown);
    let mut b = [0u8; 18];
    for (d, s) in b.iter_mut().zip(data.iter().rev()) {
        *d = *s;
    }
    let port = u16::from_be_bytes([b[16], b[17]]);
    let v4: [u8; 4] = b[..4].try_into().expect("4 bytes");
    let v6: [u8; 16] = b[..16].try_into().expect("16 bytes");
    for addr in [
        SocketAddr::new(Ipv4Addr::from(v4).into(), port),
        SocketAddr::new(Ipv6Addr::from(v6).into(), port),
        SocketAddr::new(Ipv4Addr::from(v4).to_ipv6_mapped().into(), port),
    ] {
        for host in ["h", text.split(',').next().unwrap_or("")] {
            let ok = list.allows(host, addr);
            assert_eq!(back.allows(host, addr), ok, "{shown:?} {host:?} {addr}");
            assert_eq!(list.check(host, port, &[addr]).is_ok(), ok);
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let shown = redact(text);
    assert_eq!(
        redact(&shown),
        shown,
        "redact is not idempotent on {text:?}"
    );
    if let Some(Ok(hop)) = nested(text) {
        check_chain(text, hop);
    }
    // The client's session reuse keys on `chain`: a prefix of the path, present exactly when
    // the path is nested.
    match haul_proto::nested::chain(text) {
        Some(c) => assert!(text.trim_start_matches('/').starts_with(c), "{text:?}"),
        None => assert!(!haul_proto::nested::is_nested(text), "{text:?}"),
    }
    check_allow(text, data);
});
