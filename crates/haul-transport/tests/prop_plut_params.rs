//! Property tests of the PLUT words a server reads on the control channel (docs/protocol.md,
//! "PLUT data channels"): `OPTS HAUL` options and `PLUT PORT` / `PLUT PASV` session ids.

use haul_transport::plut::params::{format_opts, parse_opts, parse_session, Params};
use haul_transport::plut::MAX_MDS;
use proptest::prelude::*;

/// `OPTS HAUL` text as a client may send it: known and unknown keys, hostile values.
fn opts_text() -> impl Strategy<Value = String> {
    let key = prop_oneof![
        Just("Transport"),
        Just("mds"),
        Just("Rate"),
        Just("start"),
        Just("TRANSPORT"),
        Just("Foo")
    ];
    let value = prop_oneof![
        Just("plut".to_string()),
        Just("TCP".to_string()),
        "[-+]?[0-9]{0,22}",
        "[^;]{0,10}"
    ];
    let item = prop_oneof![
        (key, value).prop_map(|(k, v)| format!("{k}={v}")),
        "[^;]{0,10}"
    ];
    prop_oneof![
        prop::collection::vec(item, 0..5).prop_map(|v| v.join(";")),
        ".*"
    ]
}

proptest! {
    #[test]
    fn opts_round_trip(
        mds in 548usize..=MAX_MDS,
        rate in 1_000_000u64..1 << 50,
        start in proptest::option::of(1_000_000u64..1 << 50),
    ) {
        let p = Params { mds, rate: rate as f64, start: start.map(|s| s as f64) };
        prop_assert_eq!(parse_opts(&format_opts(&p)), Ok(Some(p)));
    }

    /// Whatever is accepted lies inside the documented bounds and prints back to itself; a
    /// refusal says why.
    #[test]
    fn opts_accepts_only_bounded_values(s in opts_text()) {
        match parse_opts(&s) {
            Ok(Some(p)) => {
                prop_assert!((548..=MAX_MDS).contains(&p.mds), "mds {}", p.mds);
                prop_assert!(p.rate >= 1e6 && p.rate.fract() == 0.0, "rate {}", p.rate);
                prop_assert!(p.start.is_none_or(|s| s >= 1e6 && s.fract() == 0.0));
                prop_assert_eq!(parse_opts(&format_opts(&p)), Ok(Some(p)));
            }
            Ok(None) => prop_assert!(s.to_ascii_lowercase().contains("transport=tcp")),
            Err(e) => prop_assert!(!e.is_empty()),
        }
    }

    #[test]
    fn session_round_trip(id: u64) {
        prop_assert_eq!(parse_session(&format!("{id:016x}")), Ok(id));
        prop_assert_eq!(parse_session(&format!("{id:X}")), Ok(id));
    }

    /// Only 1 to 16 hex digits are a session id: no sign, space or other character.
    #[test]
    fn session_is_hex_digits_only(s in prop_oneof!["[0-9a-fA-F+ -]{0,18}", ".{0,20}"]) {
        let hex = (1..=16).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_hexdigit());
        prop_assert_eq!(parse_session(&s).is_ok(), hex, "{:?}", s);
    }
}
