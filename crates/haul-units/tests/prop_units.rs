//! Property tests of the unit grammar: exact round trips of sizes, rates that print to text
//! that parses back, and no input that panics.

use haul_units::{parse_duration, parse_rate, parse_size, Rate};
use proptest::prelude::*;

proptest! {
    #[test]
    fn every_byte_count_parses_exactly(n in any::<u64>()) {
        prop_assert_eq!(parse_size(&n.to_string()), Ok(n));
    }

    #[test]
    fn binary_and_decimal_prefixes_multiply_exactly(n in 0u64..1 << 20, i in 0usize..4) {
        let (bin, dec) = (["K", "M", "G", "T"][i], ["KB", "MB", "GB", "TB"][i]);
        prop_assert_eq!(parse_size(&format!("{n}{bin}")), Ok(n << (10 * (i + 1))));
        prop_assert_eq!(parse_size(&format!("{n}{dec}")), Ok(n * 1000u64.pow(i as u32 + 1)));
    }

    #[test]
    fn a_printed_rate_parses_back(bits in 1.0f64..1e14) {
        let r = Rate::from_bits_per_sec(bits);
        let back = parse_rate(&r.to_string()).unwrap().bits_per_sec();
        // Printed with three decimals of its unit: within 0.05% of the value (or 1 bit/s).
        prop_assert!((back - bits).abs() <= (bits * 5e-4).max(1.0), "{} -> {}", r, back);
    }

    #[test]
    fn bits_and_bytes_differ_by_eight(n in 0u32..100_000, p in prop::sample::select(vec!["k", "M", "G"])) {
        let bits = parse_rate(&format!("{n}{p}b/s")).unwrap().bits_per_sec();
        let bytes = parse_rate(&format!("{n}{p}B/s")).unwrap().bits_per_sec();
        prop_assert_eq!(bytes, bits * 8.0);
    }

    #[test]
    fn no_input_panics(s in "\\PC{0,24}") {
        let _ = parse_size(&s);
        let _ = parse_rate(&s);
        let _ = parse_duration(&s);
    }

    #[test]
    fn errors_name_their_input(s in "[0-9]{1,5}[a-zA-Z/]{1,6}") {
        if let Err(e) = parse_rate(&s) {
            prop_assert_eq!(&e.input, &s);
            prop_assert!(!e.why.is_empty());
        }
    }
}
