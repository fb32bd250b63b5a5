//! Property tests of restart-marker range sets against a naive bitmap model.

use haul_proto::RangeSet;
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
