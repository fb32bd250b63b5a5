//! `SITE BTC` lines (what a client reads from servers it does not control) never panic the
//! parser, and every line a server writes reads back as it was.

use haul_proto::btc::{Direction, PeerPrediction};
use proptest::prelude::*;

proptest! {
    #[test]
    fn any_text_parses_or_is_refused_without_panic(s in "\\PC{0,200}") {
        if let Some(p) = PeerPrediction::parse(&s) {
            prop_assert!(p.bps.is_finite() && p.bps >= 0.0 && p.age_s >= 0.0);
            prop_assert!(!p.peer.is_empty());
        }
    }

    #[test]
    fn a_written_line_reads_back(
        peer in "[0-9a-f:.]{1,39}",
        sent in any::<bool>(),
        bps in 0u64..100_000_000_000,
        age in 0u32..1_000_000,
        samples in 0usize..10_000,
        predictor in "[a-z]{1,8}\\([0-9.s]{1,6}\\)",
    ) {
        let p = PeerPrediction {
            peer,
            direction: if sent { Direction::Sent } else { Direction::Received },
            bps: bps as f64,
            predictor,
            age_s: age as f64,
            samples,
        };
        prop_assert_eq!(PeerPrediction::parse(&p.line()), Some(p));
    }
}
