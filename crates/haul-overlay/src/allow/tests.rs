//! Tests of the allow-list: every entry form and error, matching, and properties.

use std::net::{Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;

use super::*;

fn list(s: &str) -> AllowList {
    s.parse()
        .unwrap_or_else(|e| panic!("{s:?} does not parse: {e}"))
}

fn sa(s: &str) -> SocketAddr {
    s.parse()
        .unwrap_or_else(|e| panic!("{s:?} is not a socket address: {e}"))
}

#[test]
fn every_form_prints_canonically() {
    let cases = [
        ("example.org", "example.org"),
        ("Example.ORG.:2812", "example.org:2812"),
        ("10.0.0.1", "10.0.0.1"),
        ("10.0.0.1:21", "10.0.0.1:21"),
        ("[::1]", "[::1]"),
        ("[::1]:2811", "[::1]:2811"),
        ("::1", "[::1]"),
        ("[0:0::1]", "[::1]"),
        ("[10.0.0.1]", "10.0.0.1"),
        ("[::ffff:10.0.0.1]:22", "10.0.0.1:22"),
        ("10.1.2.3/8", "10.0.0.0/8"),
        ("10.0.0.0/8:2811", "10.0.0.0/8:2811"),
        ("0.0.0.0/0", "0.0.0.0/0"),
        ("192.168.1.7/32", "192.168.1.7/32"),
        ("[fd00::/8]", "[fd00::/8]"),
        ("fd12::/8", "[fd00::/8]"),
        ("[fd00::/8]:2811", "[fd00::/8]:2811"),
        ("[::ffff:10.1.0.0/104]", "10.0.0.0/8"),
        ("::/0", "[::/0]"),
        (
            " a.example ,b-2.example:2812,\t10.0.0.0/24 ",
            "a.example,b-2.example:2812,10.0.0.0/24",
        ),
    ];
    for (text, want) in cases {
        let l = list(text);
        assert_eq!(l.to_string(), want, "{text:?}");
        assert_eq!(list(want), l, "{want:?}");
    }
    let l = list("a,b,c");
    assert_eq!((l.len(), l.is_empty()), (3, false));
}

#[test]
fn every_error_names_the_entry() {
    let entry = |s: &str| s.to_string();
    let cases = [
        ("", AllowError::Empty),
        (" \t", AllowError::Empty),
        ("a,,b", AllowError::EmptyEntry { position: 2 }),
        ("a, ", AllowError::EmptyEntry { position: 2 }),
        (",a", AllowError::EmptyEntry { position: 1 }),
        (
            "10.0.0.0/33",
            AllowError::BadPrefix {
                entry: entry("10.0.0.0/33"),
                max: 32,
            },
        ),
        (
            "[fd00::/129]",
            AllowError::BadPrefix {
                entry: entry("[fd00::/129]"),
                max: 128,
            },
        ),
        (
            "10.0.0.0/x",
            AllowError::BadPrefix {
                entry: entry("10.0.0.0/x"),
                max: 32,
            },
        ),
        (
            "10.0.0.0/",
            AllowError::BadPrefix {
                entry: entry("10.0.0.0/"),
                max: 32,
            },
        ),
        (
            "10.0.0.0/+8",
            AllowError::BadPrefix {
                entry: entry("10.0.0.0/+8"),
                max: 32,
            },
        ),
        (
            "fd00::/8:2811",
            AllowError::BadPrefix {
                entry: entry("fd00::/8:2811"),
                max: 128,
            },
        ),
        (
            "h:x",
            AllowError::BadPort {
                entry: entry("h:x"),
            },
        ),
        ("h:", AllowError::BadPort { entry: entry("h:") }),
        (
            "h:65536",
            AllowError::BadPort {
                entry: entry("h:65536"),
            },
        ),
        (
            "h:+1",
            AllowError::BadPort {
                entry: entry("h:+1"),
            },
        ),
        (
            "[::1]x",
            AllowError::BadPort {
                entry: entry("[::1]x"),
            },
        ),
        (
            "[::1]:",
            AllowError::BadPort {
                entry: entry("[::1]:"),
            },
        ),
        (
            "h:0",
            AllowError::PortZero {
                entry: entry("h:0"),
            },
        ),
        (
            "[::1]:0",
            AllowError::PortZero {
                entry: entry("[::1]:0"),
            },
        ),
        (
            "10.0.0.0/8:00",
            AllowError::PortZero {
                entry: entry("10.0.0.0/8:00"),
            },
        ),
        (
            "h_x",
            AllowError::BadHost {
                entry: entry("h_x"),
            },
        ),
        (
            "a..b",
            AllowError::BadHost {
                entry: entry("a..b"),
            },
        ),
        (".a", AllowError::BadHost { entry: entry(".a") }),
        (
            "hé",
            AllowError::BadHost {
                entry: entry("hé")
            },
        ),
        (
            ":2811",
            AllowError::BadHost {
                entry: entry(":2811"),
            },
        ),
        (
            "[::1",
            AllowError::BadAddress {
                entry: entry("[::1"),
            },
        ),
        (
            "[zz]",
            AllowError::BadAddress {
                entry: entry("[zz]"),
            },
        ),
        (
            "[host]",
            AllowError::BadAddress {
                entry: entry("[host]"),
            },
        ),
        (
            "1.2.3",
            AllowError::BadAddress {
                entry: entry("1.2.3"),
            },
        ),
        (
            "300.1.1.1:21",
            AllowError::BadAddress {
                entry: entry("300.1.1.1:21"),
            },
        ),
        (
            "fd00::zz",
            AllowError::BadAddress {
                entry: entry("fd00::zz"),
            },
        ),
        (
            "10.0.0/8",
            AllowError::BadAddress {
                entry: entry("10.0.0/8"),
            },
        ),
        (
            "host/8",
            AllowError::NamePrefix {
                entry: entry("host/8"),
            },
        ),
    ];
    for (text, want) in cases {
        let got = text.parse::<AllowList>().expect_err(text);
        assert_eq!(got, want, "{text:?}");
        let msg = got.to_string();
        assert!(msg.contains("--relay-allow"), "{msg}");
        if let Some(bad) = text
            .split(',')
            .find(|e| !e.trim().is_empty() && list_ok(e).is_err())
        {
            assert!(msg.contains(bad.trim()), "{msg:?} does not name {bad:?}");
        }
    }
}

fn list_ok(e: &str) -> Result<AllowList, AllowError> {
    e.parse()
}

#[test]
fn ports_without_an_entry_port() {
    let l = list("h");
    for (port, ok) in [(2811, true), (1024, true), (65535, true), (2812, true)] {
        assert_eq!(l.allows("h", sa(&format!("10.0.0.1:{port}"))), ok, "{port}");
    }
    for port in [0, 1, 21, 22, 80, 443, 1023] {
        assert!(!l.allows("h", sa(&format!("10.0.0.1:{port}"))), "{port}");
    }
    let l = list("h:21,10.0.0.9:0022");
    assert!(l.allows("h", sa("10.0.0.1:21")));
    assert!(!l.allows("h", sa("10.0.0.1:2811")));
    assert!(!l.allows("h", sa("10.0.0.1:22")));
    assert!(l.allows("x", sa("10.0.0.9:22")));
    assert!(!l.allows("x", sa("10.0.0.9:21")));
}

#[test]
fn hosts_addresses_and_networks() {
    let l = list("Origin.Example.,10.0.0.7,[fd00::7],192.168.0.0/16,[fd10::/16]:2812");
    assert!(l.allows("origin.example", sa("203.0.113.1:2811")));
    assert!(l.allows("ORIGIN.example.", sa("[2001:db8::1]:2811")));
    assert!(!l.allows("origin.example.org", sa("203.0.113.1:2811")));
    assert!(!l.allows("other", sa("203.0.113.1:2811")));
    assert!(l.allows("any", sa("10.0.0.7:2811")));
    assert!(l.allows("any", sa("[::ffff:10.0.0.7]:2811")));
    assert!(!l.allows("any", sa("10.0.0.8:2811")));
    assert!(l.allows("any", sa("[fd00::7]:5000")));
    assert!(!l.allows("any", sa("[fd00::8]:5000")));
    assert!(l.allows("any", sa("192.168.255.1:2811")));
    assert!(l.allows("any", sa("[::ffff:192.168.3.4]:2811")));
    assert!(!l.allows("any", sa("192.169.0.1:2811")));
    assert!(l.allows("any", sa("[fd10:1::1]:2812")));
    assert!(!l.allows("any", sa("[fd10:1::1]:2811")));
    assert!(!l.allows("any", sa("[fd11::1]:2812")));
    // A mapped entry is IPv4; an IPv6 network does not take mapped addresses.
    let l = list("[::ffff:10.0.0.1],::/0");
    assert!(l.allows("x", sa("10.0.0.1:2811")));
    assert!(!l.allows("x", sa("10.0.0.2:2811")));
    assert!(!l.allows("x", sa("[::ffff:10.0.0.2]:2811")));
    assert!(l.allows("x", sa("[2001:db8::2]:2811")));
    assert!(list("0.0.0.0/0").allows("x", sa("[::ffff:1.2.3.4]:2811")));
}

#[test]
fn check_picks_the_first_allowed_address() {
    let l = list("10.0.0.0/8");
    let addrs = [
        sa("192.0.2.1:2811"),
        sa("10.1.1.1:2811"),
        sa("10.2.2.2:2811"),
    ];
    assert_eq!(l.check("origin", 2811, &addrs), Ok(sa("10.1.1.1:2811")));
    let e = l.check("origin", 2811, &addrs[..1]).expect_err("refused");
    assert_eq!(
        e.to_string(),
        "next hop origin:2811 is not on this relay's allow-list (--relay-allow)"
    );
    let e = l
        .check("fd00::1", 2811, &[sa("[fd00::1]:2811")])
        .expect_err("refused");
    assert_eq!(
        e,
        NotAllowed::Refused {
            hop: "[fd00::1]:2811".into()
        }
    );
    let e = l.check("origin", 21, &[]).expect_err("empty");
    assert_eq!(e.to_string(), "next hop origin:21 did not resolve");
    assert!(l.check("origin", 22, &[sa("10.0.0.1:22")]).is_err());
}

/// Host names, addresses and networks drawn from small sets, so that probes often match.
fn gen_entry() -> impl Strategy<Value = String> {
    let port = prop_oneof![
        Just(String::new()),
        prop::sample::select(vec![21u16, 22, 1023, 1024, 2811, 2812, 65535])
            .prop_map(|p| format!(":{p}")),
    ];
    let v4 = (0..4u8, 0..4u8).prop_map(|(a, b)| Ipv4Addr::new(10, 0, a, b));
    let v6 = (0..4u16, 0..4u16).prop_map(|(a, b)| Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, a, b));
    let target = prop_oneof![
        (
            prop::sample::select(vec!["a", "B.example", "b.example.", "c-1"]),
            any::<bool>()
        )
            .prop_map(|(h, up)| if up { h.to_uppercase() } else { h.to_string() }),
        v4.clone().prop_map(|a| a.to_string()),
        (v4.clone(), 0..=32u8).prop_map(|(a, l)| format!("{a}/{l}")),
        (v6.clone(), any::<bool>()).prop_map(|(a, mapped)| match mapped {
            true => format!("[::ffff:10.0.{}.{}]", a.segments()[6], a.segments()[7]),
            false => format!("[{a}]"),
        }),
        (v6, 100..=128u8).prop_map(|(a, l)| format!("[{a}/{l}]")),
    ];
    (target, port).prop_map(|(t, p)| format!("{t}{p}"))
}

fn gen_probe() -> impl Strategy<Value = (String, SocketAddr)> {
    let ip = prop_oneof![
        (0..4u8, 0..4u8).prop_map(|(a, b)| IpAddr::V4(Ipv4Addr::new(10, 0, a, b))),
        (0..4u8, 0..4u8).prop_map(|(a, b)| IpAddr::V6(Ipv4Addr::new(10, 0, a, b).to_ipv6_mapped())),
        (0..4u16, 0..4u16)
            .prop_map(|(a, b)| IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, a, b))),
        (0..4u16).prop_map(|b| IpAddr::V6(Ipv6Addr::new(0, 0, 0, 0, 0, 0, 0, b))),
    ];
    let port = prop_oneof![
        prop::sample::select(vec![0u16, 21, 22, 1023, 1024, 2811, 2812, 65535]),
        any::<u16>(),
    ];
    let host = prop::sample::select(vec!["a", "A.", "b.example", "B.EXAMPLE.", "c-1", "d"]);
    (host, ip, port).prop_map(|(h, ip, p)| (h.to_string(), SocketAddr::new(ip, p)))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn parse_never_panics(
        s in any::<String>(),
        t in "[a-z0-9:./\\[\\], +-]{0,40}",
        u in "(\\[?[0-9a-f:.]{0,12}(/[0-9]{0,3})?\\]?(:[0-9]{0,6})?, ?){1,4}",
    ) {
        for text in [&s, &t, &u] {
            if let Ok(l) = text.parse::<AllowList>() {
                prop_assert!(!l.is_empty());
                let _ = l.to_string();
            }
        }
    }

    #[test]
    fn display_then_parse_gives_the_same_matches(
        entries in prop::collection::vec(gen_entry(), 1..5),
        probes in prop::collection::vec(gen_probe(), 1..40),
    ) {
        let text = entries.join(" , ");
        let l = list(&text);
        let shown = l.to_string();
        let back = list(&shown);
        prop_assert_eq!(&back, &l);
        prop_assert_eq!(back.to_string(), shown.clone());
        for (host, addr) in &probes {
            prop_assert_eq!(l.allows(host, *addr), back.allows(host, *addr), "{} {}", host, addr);
            let one = l.check(host, addr.port(), &[*addr]);
            prop_assert_eq!(one.is_ok(), l.allows(host, *addr));
        }
    }
}
