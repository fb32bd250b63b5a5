//! `SITE BTC` reply lines, which a client reads from servers it does not control: no input
//! panics the parser, and what it accepts is sane and writes back to a line that reads the same.
#![no_main]

use haul_proto::btc::PeerPrediction;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Some(p) = PeerPrediction::parse(text) {
        assert!(p.bps.is_finite() && p.bps >= 0.0 && p.age_s >= 0.0);
        assert!(p.err_pct.is_none_or(|e| e.is_finite() && e >= 0.0));
        assert!(!p.peer.is_empty());
        if !p.peer.contains(';') && !p.predictor.contains(';') {
            let again = PeerPrediction::parse(&p.line()).expect("a written line reads back");
            assert_eq!(again.peer, p.peer);
            assert_eq!(again.samples, p.samples);
            assert_eq!(again.err_pct.is_some(), p.err_pct.is_some());
        }
    }
});
