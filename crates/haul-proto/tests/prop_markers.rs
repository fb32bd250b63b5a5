//! Property tests of restart-marker range sets against a naive bitmap model, and of the 111 / 112
//! marker replies a client reads.

use haul_proto::markers::parse_range_marker;
use haul_proto::{PerfMarker, RangeSet};
use proptest::prelude::*;

/// Bit space of the model; ranges are drawn inside it.
const SPACE: u64 = 200;

fn range() -> impl Strategy<Value = (u64, u64)> {
    (0..SPACE, 0..SPACE).prop_map(|(a, b)| (a.min(b), a.max(b)))
}

fn bitmap(ranges: &[(u64, u64)]) -> Vec<bool> {
    let mut bits = vec![false; SPACE as usize];
    for &(a, b) in ranges {
        for bit in &mut bits[a as usize..b as usize] {
            *bit = true;
        }
    }
    bits
}

fn build(ranges: &[(u64, u64)]) -> RangeSet {
    let mut r = RangeSet::new();
    for &(a, b) in ranges {
        r.insert(a, b);
    }
    r
}

proptest! {
    #[test]
    fn insert_order_does_not_matter(
        (ranges, shuffled) in prop::collection::vec(range(), 0..20)
            .prop_flat_map(|v| (Just(v.clone()), Just(v).prop_shuffle())),
    ) {
        let forward = build(&ranges);
        prop_assert_eq!(&build(&shuffled), &forward);
        let mut halves = build(&ranges[..ranges.len() / 2]);
        halves.union(&build(&ranges[ranges.len() / 2..]));
        prop_assert_eq!(halves, forward);
    }

    #[test]
    fn matches_bitmap_model(ranges in prop::collection::vec(range(), 0..20), len in 0..SPACE + 20) {
        let set = build(&ranges);
        let bits = bitmap(&ranges);
        prop_assert_eq!(set.covered(), bits.iter().filter(|&&b| b).count() as u64);
        prop_assert_eq!(set.is_empty(), !bits.contains(&true));

        // Sorted, disjoint, non-touching, non-empty ranges.
        for w in set.ranges().windows(2) {
            prop_assert!(w[0].1 < w[1].0, "ranges {:?} not disjoint and separated", set.ranges());
        }
        for &(a, b) in set.ranges() {
            prop_assert!(a < b);
            prop_assert!(bits[a as usize..b as usize].iter().all(|&x| x));
        }

        // missing(len) is exactly the complement within [0, len), as maximal gaps in order.
        let missing = set.missing(len);
        let mut gap_bits = vec![false; len as usize];
        let mut last_end = None;
        for &(a, b) in &missing {
            prop_assert!(a < b && b <= len, "gap {a}..{b} outside 0..{len}");
            if let Some(e) = last_end {
                prop_assert!(e < a, "gaps {:?} not separated", missing);
            }
            last_end = Some(b);
            for bit in &mut gap_bits[a as usize..b as usize] {
                *bit = true;
            }
        }
        for (i, &gap) in gap_bits.iter().enumerate() {
            let held = bits.get(i).copied().unwrap_or(false);
            prop_assert_eq!(gap, !held, "byte {} held {} but gap {}", i, held, gap);
        }
        prop_assert_eq!(set.covers(len), missing.is_empty());
    }

    #[test]
    fn display_parse_round_trip(ranges in prop::collection::vec((any::<u64>(), any::<u64>()), 0..10)) {
        let mut set = RangeSet::new();
        for (a, b) in ranges {
            set.insert(a.min(b), a.max(b));
        }
        prop_assert_eq!(RangeSet::parse(&set.to_string()), Ok(set));
    }

    #[test]
    fn parse_never_panics(s in prop_oneof!["[0-9, -]{0,40}", "[0-9]{18,25}-[0-9]{18,25}", ".*"]) {
        if let Ok(set) = RangeSet::parse(&s) {
            prop_assert_eq!(RangeSet::parse(&set.to_string()), Ok(set));
        }
    }
}

/// Lines of a `112` reply: the fields in any order, among other lines, with hostile values.
fn perf_lines() -> impl Strategy<Value = Vec<String>> {
    let value = prop_oneof![
        any::<u64>().prop_map(|v| v.to_string()),
        any::<f64>().prop_map(|v| v.to_string()),
        "[-+]?[0-9.eE]{0,30}",
        "(NaN|inf|-inf|infinity)",
        ".*",
    ];
    let field = prop::sample::select(vec![
        "Timestamp",
        "Stripe Index",
        "Stripe Bytes Transferred",
        "Total Stripe Count",
        "timestamp",
    ]);
    let line = prop_oneof![
        (field, " {0,3}", value).prop_map(|(f, sp, v)| format!(" {f}:{sp}{v}")),
        ".*",
        Just("Perf Marker".to_string()),
    ];
    prop::collection::vec(line, 0..8)
}

proptest! {
    /// A marker haul writes parses back to itself (the timestamp to its printed 0.1 s).
    #[test]
    fn perf_marker_round_trip(timestamp in 0.0f64..4e9, stripe_index: u32, stripe_bytes: u64, total_stripes: u32) {
        let m = PerfMarker { timestamp, stripe_index, stripe_bytes, total_stripes };
        let back = PerfMarker::from_lines(&m.to_lines()).expect("a written marker parses");
        prop_assert_eq!((back.stripe_index, back.stripe_bytes, back.total_stripes), (stripe_index, stripe_bytes, total_stripes));
        prop_assert!((back.timestamp - timestamp).abs() <= 0.05 + 1e-6, "{} read as {}", timestamp, back.timestamp);
    }

    /// Whatever a server sends as a `112`, a marker read from it prints to lines that read back
    /// to the same marker (NaN and infinite timestamps included).
    #[test]
    fn perf_marker_from_hostile_lines(lines in perf_lines()) {
        if let Some(m) = PerfMarker::from_lines(&lines) {
            let again = PerfMarker::from_lines(&m.to_lines()).expect("a printed marker parses");
            prop_assert_eq!(again.to_lines(), m.to_lines());
        }
    }

    /// `111 Range Marker` carries a range list: the text after the words parses exactly as REST's.
    #[test]
    fn range_marker_is_a_range_list(s in prop_oneof!["[0-9, -]{0,40}", ".*"], pad in " {0,2}") {
        let text = format!("{pad}Range Marker {s}");
        prop_assert_eq!(parse_range_marker(&text), RangeSet::parse(&s).ok());
        if !s.trim().starts_with("Range Marker") {
            prop_assert_eq!(parse_range_marker(&s), None);
        }
    }
}
