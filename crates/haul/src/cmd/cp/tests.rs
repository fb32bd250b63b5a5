use haul_tune::concurrency::Utility;
use haul_xfer::autotune::SampleEstimate;
use haul_xfer::plan::Job;

use super::args::{parse_bandwidth, parse_estimate, parse_utility};
use super::plan::auto_piece;

#[test]
fn bandwidth_is_in_bits_per_second() {
    // 10gbit was read as 1.25e9 (bytes per second) where the BDP wants bits: 8x too small.
    assert_eq!(parse_bandwidth("10gbit"), Ok(1e10));
    assert_eq!(parse_bandwidth("1Gb/s"), Ok(1e9));
    assert!(parse_bandwidth("0gbit").is_err());
}

#[test]
fn tune_utility_and_estimate_flags_parse() {
    assert_eq!(
        parse_utility("gamma"),
        Ok(Utility::Gamma { tolerance: 0.10 })
    );
    assert_eq!(
        parse_utility("GAMMA:0.2"),
        Ok(Utility::Gamma { tolerance: 0.2 })
    );
    assert_eq!(
        parse_utility("cost:1.03"),
        Ok(Utility::ChannelCost { k: 1.03 })
    );
    for bad in [
        "cost:0.5", "cost:x", "gamma:0", "gamma:-1", "cost:inf", "cost", "falcon", "",
    ] {
        assert!(parse_utility(bad).is_err(), "{bad:?} accepted");
    }
    assert_eq!(parse_estimate("mean"), Ok(SampleEstimate::Mean));
    assert_eq!(parse_estimate("Forecast"), Ok(SampleEstimate::Forecast));
    assert!(parse_estimate("median").is_err());
}

#[test]
fn auto_pieces_only_when_few_files_are_big() {
    let big = |n: usize| {
        (0..n)
            .map(|i| Job::new(format!("s{i}"), format!("d{i}"), 300 << 20))
            .collect::<Vec<_>>()
    };
    assert_eq!(auto_piece(64 << 20, &big(5)), Some(64 << 20));
    assert_eq!(auto_piece(64 << 20, &big(20)), None);
    let mut mixed = big(3);
    mixed.extend((0..40).map(|i| Job::new(format!("t{i}"), format!("e{i}"), 1 << 20)));
    assert_eq!(
        auto_piece(64 << 20, &mixed),
        Some(64 << 20),
        "small files do not count"
    );
}
