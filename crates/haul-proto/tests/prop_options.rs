//! Property tests of the `OPTS RETR` option list a server reads (GFD.020): it never panics,
//! accepts parallelism only inside 1..=1024, and keeps every `key=value` pair in order.

use haul_proto::command::RetrOptions;
use proptest::prelude::*;

/// Option text as a client may send it.
fn options() -> impl Strategy<Value = String> {
    let value = prop_oneof![
        "[0-9]{1,6}(,[0-9]{1,6}){0,2}",
        "[-+]?[0-9]{0,25}",
        "[^;]{0,12}"
    ];
    let key = prop_oneof![
        Just("Parallelism".to_string()),
        Just("parallelism".to_string()),
        "[A-Za-z]{1,10}",
        "[^;=]{0,8}"
    ];
    let item = prop_oneof![
        (key, " {0,2}", value).prop_map(|(k, sp, v)| format!("{k}{sp}={sp}{v}")),
        "[^;]{0,10}"
    ];
    prop_oneof![
        prop::collection::vec(item, 0..5).prop_map(|v| v.join(";")),
        ".*"
    ]
}

proptest! {
    #[test]
    fn parse_keeps_pairs_and_bounds(s in options()) {
        match RetrOptions::parse(&s) {
            Ok(o) => {
                if let Some(p) = o.parallelism {
                    prop_assert!((1..=1024).contains(&p), "parallelism {}", p);
                }
                prop_assert_eq!(o.pairs.len(), s.split(';').filter(|i| !i.trim().is_empty()).count());
                let shown: String = o.pairs.iter().map(|(k, v)| format!("{k}={v};")).collect();
                prop_assert_eq!(RetrOptions::parse(&shown), Ok(o));
            }
            Err(e) => prop_assert!(!e.to_string().is_empty()),
        }
    }

    #[test]
    fn parallelism_round_trip(n in 1u32..=1024, extra in "[A-Za-z]{1,8}=[0-9]{1,4}") {
        let o = RetrOptions::parse(&format!("{extra};Parallelism={n},{n},{n};")).expect("valid options");
        prop_assert_eq!(o.parallelism, Some(n));
        prop_assert_eq!(o.pairs.len(), 2);
    }

    #[test]
    fn parallelism_out_of_range_is_refused(n in prop_oneof![Just(0u64), 1025u64..u64::MAX]) {
        let refused = RetrOptions::parse(&format!("Parallelism={n},1,1;")).is_err();
        prop_assert!(refused, "parallelism {} accepted", n);
    }
}
