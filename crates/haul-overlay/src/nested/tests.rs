//! Tests of nested URLs: every form, every error, and properties over generated chains of hops.

use std::net::{Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;

use super::*;

/// The next hop of a path that must parse.
fn hop(path: &str) -> NextHop {
    match nested(path) {
        Some(Ok(h)) => h,
        other => panic!("{path:?}: {other:?}"),
    }
}

/// The error of a path that must be nested and refused.
fn err(path: &str) -> NestedError {
    match nested(path) {
        Some(Err(e)) => e,
        other => panic!("{path:?}: {other:?}"),
    }
}

#[test]
fn plain_paths_are_not_nested() {
    for p in [
        "",
        "/",
        "/data/f",
        "ftp",
        "ftp:/x/",
        "/ftp:/x",
        "/http://h/x",
        "/ftpx://h/",
        "file:///tmp/x",
        "/data/ftp://h/x",
        "/%66tp://h/x",
        "é",
    ] {
        assert_eq!(nested(p), None, "{p:?}");
    }
}

#[test]
fn every_prefix_form_is_nested() {
    for p in [
        "/ftp://origin:2811/data/f",
        "ftp://origin:2811/data/f",
        "///ftp://origin:2811/data/f",
        "/FTP://origin:2811/data/f",
        "/gsiftp://origin:2811/data/f",
        "/GsiFtp://origin:2811/data/f",
    ] {
        let h = hop(p);
        assert!(!h.url.tls, "{p:?}");
        // gsiftp:// stays GSI: the relay logs in there with the client's delegated credential.
        assert_eq!(
            h.url.gsi,
            p.to_ascii_lowercase().contains("gsiftp"),
            "{p:?}"
        );
        let scheme = if h.url.gsi { "gsiftp" } else { "ftp" };
        assert_eq!(
            h.redacted(),
            format!("{scheme}://origin:2811/data/f"),
            "{p:?}"
        );
        assert_eq!(
            (h.url.host.as_str(), h.url.port, h.url.path.as_str()),
            ("origin", 2811, "/data/f"),
            "{p:?}"
        );
        assert_eq!(h.hop(), "origin:2811");
    }
    let h = hop("/Haul://origin/x");
    assert!(h.url.tls);
    assert_eq!((h.url.port, h.url.user.clone()), (2811, None));
    assert_eq!(h.redacted(), "haul://origin:2811/x");
}

#[test]
fn hosts_ports_and_paths() {
    let h = hop("/ftp://h");
    assert_eq!((h.hop(), h.url.path.as_str()), ("h:2811".to_string(), "/"));
    let h = hop("/ftp://10.1.2.3:21/a%20b%25");
    assert_eq!(
        (h.hop(), h.url.path.as_str()),
        ("10.1.2.3:21".into(), "/a b%")
    );
    let h = hop("/ftp://[::1]:2812/x");
    assert_eq!((h.url.host.as_str(), h.hop()), ("::1", "[::1]:2812".into()));
    let h = hop("/ftp://[::ffff:10.0.0.1]/x");
    assert_eq!(h.hop(), "[::ffff:10.0.0.1]:2811");
    let h = hop("/ftp://Data-1.Example.ORG.:65535/x");
    assert_eq!(h.hop(), "Data-1.Example.ORG.:65535");
}

#[test]
fn users_and_passwords() {
    let h = hop("/ftp://bob:s%40cret@h/x");
    assert_eq!(h.url.user.as_deref(), Some("bob"));
    assert_eq!(h.url.pass.as_deref(), Some("s@cret"));
    assert_eq!(h.redacted(), "ftp://bob:****@h:2811/x");
    let h = hop("/ftp://bob:a@b:c@h:21/x");
    assert_eq!(h.url.pass.as_deref(), Some("a@b:c"));
    let h = hop("/ftp://b%3Ab@h/x");
    assert_eq!(
        (h.url.user.as_deref(), h.url.pass.as_deref()),
        (Some("b:b"), None)
    );
    assert_eq!(h.redacted(), "ftp://b%3Ab@h:2811/x");
    let h = hop("/ftp://a%20b%40c:p@[::1]/x");
    assert_eq!(h.redacted(), "ftp://a%20b%40c:****@[::1]:2811/x");
    let h = hop("/ftp://:pw@h/x");
    assert_eq!(h.url.user.as_deref(), Some(""));
    assert_eq!(h.redacted(), "ftp://:****@h:2811/x");
}

#[test]
fn chains_of_hops() {
    let h = hop("/ftp://r2/ftp://origin/path");
    assert_eq!(
        (h.hop(), h.url.path.as_str()),
        ("r2:2811".into(), "/ftp://origin/path")
    );
    let h = hop(&h.url.path);
    assert_eq!(
        (h.hop(), h.url.path.as_str()),
        ("origin:2811".into(), "/path")
    );
    assert_eq!(nested(&h.url.path), None);

    // Inner levels pass on verbatim: each relay decodes its own escapes exactly once.
    let h = hop("ftp://r1:p1@r1//haul://u:p%2Fq%25@origin:2812/a%20b");
    assert_eq!(h.url.pass.as_deref(), Some("p1"));
    assert_eq!(h.url.path, "//haul://u:p%2Fq%25@origin:2812/a%20b");
    assert_eq!(
        h.redacted(),
        "ftp://r1:****@r1:2811//haul://u:****@origin:2812/a%20b"
    );
    let h = hop(&h.url.path);
    assert!(h.url.tls);
    assert_eq!(h.url.pass.as_deref(), Some("p/q%"));
    assert_eq!(
        (h.hop(), h.url.path.as_str()),
        ("origin:2812".into(), "/a b")
    );
}

#[test]
fn depth_limit_counts_the_whole_chain() {
    let chain = |n: usize| "/ftp://r".repeat(n) + "/f";
    assert_eq!(MAX_HOPS, 8);
    let mut path = chain(MAX_HOPS);
    for left in (1..=MAX_HOPS).rev() {
        let h = hop(&path);
        assert_eq!(path.matches("://").count(), left);
        path = h.url.path;
    }
    assert_eq!(path, "/f");
    assert_eq!(
        err(&chain(MAX_HOPS + 1)),
        NestedError::TooDeep { max: MAX_HOPS }
    );
    assert_eq!(err(&chain(100)), NestedError::TooDeep { max: MAX_HOPS });
    // An error deep in the chain is found at the first relay, with its level.
    assert_eq!(
        err("/ftp://a/ftp://b/ftp://c:0/x"),
        NestedError::PortZero { level: 3 }
    );
}

#[test]
fn every_error() {
    use NestedError::*;
    let cases: &[(&str, NestedError)] = &[
        ("/ftp:///x", EmptyHost { level: 1 }),
        ("/ftp://", EmptyHost { level: 1 }),
        ("/ftp://:21/x", EmptyHost { level: 1 }),
        ("/ftp://u:p@/x", EmptyHost { level: 1 }),
        ("/ftp://[]/x", EmptyHost { level: 1 }),
        ("/ftp://h/ftp:///x", EmptyHost { level: 2 }),
        ("/ftp://h:x/", BadPort { level: 1 }),
        ("/ftp://h:/", BadPort { level: 1 }),
        ("/ftp://h:65536/", BadPort { level: 1 }),
        ("/ftp://h:+21/", BadPort { level: 1 }),
        ("/ftp://[::1]x/", BadPort { level: 1 }),
        ("/ftp://[::1]:/", BadPort { level: 1 }),
        ("/ftp://h:0/", PortZero { level: 1 }),
        ("/ftp://[::1]:00/", PortZero { level: 1 }),
        ("/ftp://h_x/", BadHost { level: 1 }),
        ("/ftp://hé/", BadHost { level: 1 }),
        ("/ftp://h%41/", BadHost { level: 1 }),
        ("/ftp://::1/", BadHost { level: 1 }),
        ("/ftp://[zz]/", BadHost { level: 1 }),
        ("/ftp://[::1/", BadHost { level: 1 }),
        ("/ftp://[fe80::1%25eth0]/", BadHost { level: 1 }),
        ("/ftp://h/a b", BadChar),
        ("/ftp://h/a\tb", BadChar),
        ("/ftp://h/a\r\nDELE x", BadChar),
        ("/ftp://h/a\u{2028}", BadChar),
        ("/ftp://h/\u{85}", BadChar),
        ("/ftp://u:p%0a@h/", EscapedControl { level: 1 }),
        ("/ftp://u%00@h/", EscapedControl { level: 1 }),
        ("/ftp://h/a%0d%0aDELE%20x", EscapedControl { level: 1 }),
        ("/ftp://h/ftp://u:%7F@o/", EscapedControl { level: 2 }),
        ("/ftp://h/%66tp://o/x", HiddenNesting { level: 1 }),
        ("/ftp://h/ftp%3A%2F%2Fo/x", HiddenNesting { level: 1 }),
        ("/ftp://a/ftp://b/%2Fftp://o/x", HiddenNesting { level: 2 }),
    ];
    for (path, want) in cases {
        assert_eq!(&err(path), want, "{path:?}");
        assert!(!err(path).to_string().is_empty());
    }
}

#[test]
fn errors_never_quote_the_url() {
    for path in [
        "/ftp://bob:hunter2/x",
        "/ftp://bob:hunter2:21/x",
        "/ftp://bob:hunter2@h:0/x",
        "/ftp://bob:hunter2@h/a b",
        "/ftp://bob:hunter2@h/%0a",
        "/ftp://bob:hunter2@/x",
        "/ftp://bob:hunter2@h_/x",
        "/ftp://h/ftp://bob:hunter2@h/%66tp://x/",
    ] {
        let e = err(path);
        assert!(!format!("{e} {e:?}").contains("hunter"), "{path:?}: {e}");
    }
}

#[test]
fn redact_text() {
    let cases = [
        (
            "550 /ftp://u:pw@h/x: No such file.",
            "550 /ftp://u:****@h/x: No such file.",
        ),
        (
            "RETR /ftp://a:b@r2/haul://c:d@o/f ftp://e:f@g",
            "RETR /ftp://a:****@r2/haul://c:****@o/f ftp://e:****@g",
        ),
        ("ftp://u@h/x ftp://h:2811/x", "ftp://u@h/x ftp://h:2811/x"),
        ("ftp://u:p@x@h/a@b", "ftp://u:****@h/a@b"),
        // No `@` in the authority: hide up to the last `@` rather than show a password.
        ("ftp://u:p/q@h/f", "ftp://u:****@h/f"),
        ("GSIFTP://U:P@H", "GSIFTP://U:****@H"),
        ("://u:p@h", "://u:****@h"),
        ("é://ü:ö@h ü", "é://ü:****@h ü"),
        ("no URL: here @ all", "no URL: here @ all"),
        ("ftp://", "ftp://"),
        ("ftp://ftp://u:p@h", "ftp://ftp://u:****@h"),
        ("a:////b:c@d", "a:////b:****@d"),
    ];
    for (text, want) in cases {
        assert_eq!(redact(text), want, "{text:?}");
        assert_eq!(redact(want), want, "redacting twice changes {want:?}");
    }
}

/// One generated level of a chain.
#[derive(Debug, Clone)]
struct GenHop {
    scheme: &'static str,
    upper: bool,
    host: String,
    v6: bool,
    port: Option<u16>,
    user: Option<String>,
    /// The password: random alphanumerics, then maybe characters URLs reserve.
    pass: Option<(String, String)>,
    slashes: usize,
}

impl GenHop {
    /// `scheme://[user[:pass]@]host[:port]`, user and password percent-encoded.
    fn authority(&self) -> String {
        let scheme = if self.upper {
            self.scheme.to_uppercase()
        } else {
            self.scheme.to_string()
        };
        let mut s = format!("{scheme}://");
        if let Some(u) = &self.user {
            s += &encode(u);
            if let Some((core, extra)) = &self.pass {
                s += &format!(":{}{}", core, encode(extra));
            }
            s.push('@');
        }
        s += &if self.v6 {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        if let Some(p) = self.port {
            s += &format!(":{p}");
        }
        s
    }
}

/// Percent-encodes every byte but ASCII letters and digits.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                char::from(b).to_string()
            } else {
                format!("%{b:02x}")
            }
        })
        .collect()
}

fn gen_hop() -> impl Strategy<Value = GenHop> {
    let host = prop_oneof![
        "[a-zA-Z][a-zA-Z0-9-]{0,8}(\\.[a-z][a-z0-9-]{0,8}){0,2}\\.?".prop_map(|h| (h, false)),
        any::<Ipv4Addr>().prop_map(|a| (a.to_string(), false)),
        any::<Ipv6Addr>().prop_map(|a| (a.to_string(), true)),
    ];
    let pass = proptest::option::of(("[a-zA-Z0-9]{8,12}", "[:@/%?#& a-z]{0,3}"));
    let user = proptest::option::of(("[a-zA-Z0-9._:@/% -]{0,8}", pass));
    (
        prop::sample::select(vec!["ftp", "haul", "gsiftp"]),
        any::<bool>(),
        host,
        proptest::option::of(1..=u16::MAX),
        user,
        1..4usize,
    )
        .prop_map(|(scheme, upper, (host, v6), port, user, slashes)| {
            let (user, pass) = match user {
                Some((u, p)) => (Some(u), p),
                None => (None, None),
            };
            GenHop {
                scheme,
                upper,
                host,
                v6,
                port,
                user,
                pass,
                slashes,
            }
        })
}

/// The chain's URL text and, for each level, the path its hop is asked for.
fn chain_text(hops: &[GenHop], path: &str) -> (String, Vec<String>) {
    let mut text = path
        .split('/')
        .map(|seg| seg.replace('%', "%25").replace(' ', "%20"))
        .collect::<Vec<_>>()
        .join("/");
    let mut paths = vec![if path.is_empty() {
        "/".to_string()
    } else {
        path.to_string()
    }];
    for (i, h) in hops.iter().enumerate().rev() {
        text = h.authority() + &text;
        if i > 0 {
            text = "/".repeat(hops[i - 1].slashes) + &text;
            paths.push(text.clone());
        }
    }
    paths.reverse();
    (text, paths)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn nested_never_panics(
        s in any::<String>(),
        t in "\\PC{0,30}",
        u in "(/{0,2}(ftp|FTP|haul|gsiftp)://[a-z0-9@:\\[\\]%./é -]{0,12}){1,10}",
    ) {
        for p in [&s, &t, &u] {
            let _ = nested(p);
            let _ = redact(p);
            if let Some(Ok(h)) = nested(p) {
                let _ = (h.redacted(), h.hop());
            }
        }
    }

    #[test]
    fn chains_round_trip(
        hops in prop::collection::vec(gen_hop(), 1..=4),
        path in "(/[a-zA-Z0-9._ %-]{1,8}){0,3}",
        lead in 0..3usize,
    ) {
        let (text, paths) = chain_text(&hops, &path);
        let mut p = "/".repeat(lead) + &text;
        let cores: Vec<&str> =
            hops.iter().filter_map(|h| h.pass.as_ref().map(|(c, _)| c.as_str())).collect();
        let shown = redact(&p);
        for core in &cores {
            prop_assert!(!shown.contains(core), "{shown:?} shows {core:?}");
        }
        for (i, g) in hops.iter().enumerate() {
            let h = match nested(&p) {
                Some(Ok(h)) => h,
                other => return Err(TestCaseError::fail(format!("{p:?}: {other:?}"))),
            };
            prop_assert_eq!(&h.url.host, &g.host);
            prop_assert_eq!(h.url.port, g.port.unwrap_or(2811));
            prop_assert_eq!(h.url.tls, g.scheme == "haul");
            prop_assert_eq!(h.url.gsi, g.scheme == "gsiftp");
            prop_assert_eq!(&h.url.user, &g.user);
            let pass = g.pass.as_ref().map(|(c, e)| format!("{c}{e}"));
            prop_assert_eq!(&h.url.pass, &pass);
            prop_assert_eq!(&h.url.path, &paths[i]);
            let bracketed = if g.v6 { format!("[{}]", g.host) } else { g.host.clone() };
            prop_assert_eq!(h.hop(), format!("{bracketed}:{}", h.url.port));
            let shown = h.redacted();
            for core in &cores {
                prop_assert!(!shown.contains(core), "{shown:?} shows {core:?}");
            }
            // The redacted URL parses back to the same hop, with `****` for the password.
            let back = match nested(&shown) {
                Some(Ok(b)) => b,
                other => return Err(TestCaseError::fail(format!("{shown:?}: {other:?}"))),
            };
            prop_assert_eq!((&back.url.host, back.url.port), (&h.url.host, h.url.port));
            prop_assert_eq!(&back.url.user, &h.url.user);
            prop_assert_eq!(back.url.pass.is_some(), pass.is_some());
            p = h.url.path;
        }
        prop_assert_eq!(nested(&p), None);
    }
}
