//! Fuzzes the GFD.020 markers: `RangeSet::parse` (REST's range list, which the server reads, and
//! the journal of a resumed download), `parse_range_marker` (`111 Range Marker …`, which the
//! client reads) and `PerfMarker::from_lines` (`112-Perf Marker`). A parsed set must be sorted,
//! disjoint and separated, consistent in `covered` / `missing` / `covers`, independent of the
//! order its ranges are inserted, and print back to text that parses to the same set; a parsed
//! performance marker must print to lines that parse back to the same marker.

#![no_main]

use haul_proto::markers::parse_range_marker;
use haul_proto::{PerfMarker, RangeSet};
use libfuzzer_sys::fuzz_target;

/// Checks everything a parsed range set promises.
fn check_set(set: &RangeSet) {
    let r = set.ranges();
    for &(a, b) in r {
        assert!(a < b, "empty or reversed range {a}-{b} in {set:?}");
    }
    for w in r.windows(2) {
        assert!(
            w[0].1 < w[1].0,
            "ranges not sorted, disjoint and separated: {set:?}"
        );
    }
    let total: u128 = r.iter().map(|&(a, b)| u128::from(b - a)).sum();
    assert_eq!(u128::from(set.covered()), total);
    assert_eq!(set.is_empty(), r.is_empty());

    let shown = set.to_string();
    assert_eq!(
        RangeSet::parse(&shown).as_ref(),
        Ok(set),
        "{shown:?} does not parse back"
    );
    assert_eq!(
        parse_range_marker(&format!("Range Marker {shown}")).as_ref(),
        Some(set)
    );

    let mut reversed = RangeSet::new();
    for &(a, b) in r.iter().rev() {
        reversed.insert(a, b);
    }
    assert_eq!(&reversed, set, "insertion order changed the set");

    // `missing(len)` is the complement of the set inside [0, len), for a len inside, at and past
    // the end of the last range.
    let end = r.last().map_or(0, |&(_, b)| b);
    for len in [end / 2, end, end.saturating_add(1)] {
        let gaps = set.missing(len);
        let mut at = 0u64;
        let mut gap_total = 0u128;
        for &(a, b) in &gaps {
            assert!(
                at <= a && a < b && b <= len,
                "gap {a}-{b} out of order or outside 0-{len}"
            );
            assert!(
                !r.iter().any(|&(x, y)| x < b && a < y),
                "gap {a}-{b} overlaps {set:?}"
            );
            gap_total += u128::from(b - a);
            at = b;
        }
        let held: u128 = r
            .iter()
            .map(|&(a, b)| u128::from(b.min(len).saturating_sub(a.min(len))))
            .sum();
        assert_eq!(
            held + gap_total,
            u128::from(len),
            "set and gaps do not tile 0-{len}"
        );
        assert_eq!(set.covers(len), gaps.is_empty());
    }
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(set) = RangeSet::parse(&text) {
        check_set(&set);
    }
    if let Some(set) = parse_range_marker(&text) {
        check_set(&set);
    }
    let lines: Vec<String> = text.split('\n').map(str::to_string).collect();
    if let Some(m) = PerfMarker::from_lines(&lines) {
        let again = PerfMarker::from_lines(&m.to_lines()).expect("a printed marker parses");
        assert_eq!(
            (again.stripe_index, again.stripe_bytes, again.total_stripes),
            (m.stripe_index, m.stripe_bytes, m.total_stripes)
        );
        // The timestamp is printed to 0.1 s: printing what was read back changes nothing more.
        assert_eq!(again.to_lines(), m.to_lines());
    }
});
