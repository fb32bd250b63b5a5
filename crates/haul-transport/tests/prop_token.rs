//! Property tests of the `DTOK` reply's token as a client reads it (`DataToken::from_hex`):
//! exactly 32 hex digits (padding trimmed, any case) and nothing else, and a round trip.

use haul_transport::token::DataToken;
use proptest::prelude::*;

proptest! {
    #[test]
    fn only_32_hex_digits_are_a_token(s in prop_oneof!["[ \t]?[0-9a-fA-F]{30,34}[ \t]?", "[0-9a-fA-F+ -]{28,36}", ".{0,40}"]) {
        let t = s.trim();
        let hex = t.len() == 32 && t.bytes().all(|b| b.is_ascii_hexdigit());
        match DataToken::from_hex(&s) {
            Some(tok) => {
                prop_assert!(hex, "{:?} read as a token", s);
                prop_assert_eq!(tok.to_hex(), t.to_ascii_lowercase());
                prop_assert_eq!(DataToken::from_hex(&tok.to_hex()), Some(tok));
            }
            None => prop_assert!(!hex, "{:?} refused", s),
        }
    }
}
