//! Property tests of nested paths' chains (`haul_proto::nested::chain`), which decide whether a
//! client may reuse one relayed session for another file.

use haul_proto::nested::{chain, is_nested};
use proptest::prelude::*;

/// One hop: a scheme and an authority (optional user information, a host, an optional port).
fn hop() -> impl Strategy<Value = String> {
    (
        prop_oneof!["ftp", "haul", "gsiftp", "FTP"],
        proptest::option::of("[a-z]{1,6}(:[a-z0-9]{1,6})?@"),
        "[a-z0-9.-]{1,12}",
        proptest::option::of(1u16..),
    )
        .prop_map(|(scheme, user, host, port)| {
            let port = port.map(|p| format!(":{p}")).unwrap_or_default();
            format!("{scheme}://{}{host}{port}", user.unwrap_or_default())
        })
}

/// A file path inside the last hop: `/` and names without `://`.
fn file() -> impl Strategy<Value = String> {
    "(/[a-zA-Z0-9._ -]{0,10}){1,4}"
}

proptest! {
    #[test]
    fn a_chain_is_its_hops_whatever_the_file(
        hops in proptest::collection::vec(hop(), 1..4),
        a in file(),
        b in file(),
        slash in any::<bool>(),
    ) {
        let joined = hops.join("/");
        let lead = if slash { "/" } else { "" };
        let (pa, pb) = (format!("{lead}{joined}{a}"), format!("{lead}{joined}{b}"));
        prop_assert!(is_nested(&pa));
        prop_assert_eq!(chain(&pa), Some(joined.as_str()));
        prop_assert_eq!(chain(&pa), chain(&pb));
    }

    #[test]
    fn different_hops_never_share_a_chain(
        x in proptest::collection::vec(hop(), 1..4),
        y in proptest::collection::vec(hop(), 1..4),
        f in file(),
    ) {
        prop_assume!(x != y);
        let (px, py) = (format!("/{}{f}", x.join("/")), format!("/{}{f}", y.join("/")));
        prop_assert_ne!(chain(&px), chain(&py));
    }

    #[test]
    fn a_path_without_a_scheme_has_no_chain(p in "\\PC{0,40}") {
        prop_assume!(!is_nested(&p));
        prop_assert_eq!(chain(&p), None);
    }

    #[test]
    fn any_chain_is_a_prefix_of_its_path(p in "/?(ftp|haul|gsiftp)://\\PC{0,40}") {
        let c = chain(&p).expect("a nested path has a chain");
        prop_assert!(p.trim_start_matches('/').starts_with(c));
    }
}
