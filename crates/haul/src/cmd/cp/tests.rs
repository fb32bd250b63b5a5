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

/// PLUT starts from the path's history: 90 % of the median over the second half of the latest
/// PLUT copy between the same ends; nothing for TCP, another server, or an empty history.
#[test]
fn plut_starts_from_the_latest_plut_copy_of_the_same_path() {
    use haul_store::{Outcome, Params, Sample, Store, TransferRecord};
    use haul_xfer::Endpoint;
    let dir = tempfile::tempdir().unwrap();
    let hist = dir.path().join("h.sqlite");
    let words = |t: &str| {
        let h = hist.to_str().unwrap().to_string();
        super::args_from([
            "--transport",
            t,
            "--history",
            &h,
            "ftp://dtn:2811/f",
            "/tmp/x",
        ])
        .unwrap()
    };
    let (src, dst) = (
        Endpoint::parse("ftp://dtn:2811/f").unwrap(),
        Endpoint::parse("/tmp/x").unwrap(),
    );
    let start = |t: &str| {
        let args = words(t);
        let opts = super::plan::options(&args, None).unwrap();
        super::plan::plut_start(&args, &src, &dst, &opts)
    };
    assert_eq!(start("plut"), None, "empty history");
    let mut store = Store::open(&hist).unwrap();
    let rec = |host: &str, transport: &str, rates: &[f64]| TransferRecord {
        id: None,
        kind: "cp".into(),
        started_at: crate::cmd::now_unix() - 60.0,
        duration_s: rates.len() as f64,
        source: format!("ftp://{host}/f"),
        destination: "/tmp/x".into(),
        source_host: host.into(),
        destination_host: haul_overlay::gather::LOCAL.into(),
        params: Params {
            transport: Some(transport.into()),
            ..Params::default()
        },
        files: 1,
        bytes: 1,
        outcome: Outcome::Ok,
        error: None,
        samples: rates
            .iter()
            .enumerate()
            .map(|(i, &bps)| Sample {
                t_s: i as f64 + 1.0,
                bytes: (bps / 8.0) as u64,
                bps,
            })
            .collect(),
    };
    // Ramp-up in the first half is ignored; the second half's median is 900 Mbit/s.
    store
        .insert(&rec(
            "dtn:2811",
            "plut",
            &[60e6, 300e6, 700e6, 880e6, 900e6, 950e6],
        ))
        .unwrap();
    store
        .insert(&rec("other:2811", "plut", &[100e6, 100e6]))
        .unwrap();
    store
        .insert(&rec("dtn:2811", "tcp", &[10e6, 10e6]))
        .unwrap();
    assert_eq!(start("plut"), Some((0.9 * 900e6 / 8.0) as u64));
    assert_eq!(start("tcp"), None, "not for TCP");
}

/// Feeds `falling_behind(predicted, alternative, 2 s)` 10 Mb/s every 100 ms for 10 s; when it
/// stops the copy.
fn behind_at(predicted: f64, alternative: f64) -> Option<f64> {
    let mut f = super::falling_behind(predicted, alternative, 2.0);
    (1..=100).map(|i| i as f64 * 0.1).find(|&t| {
        f(&haul_xfer::engine::Sample {
            t_s: t,
            bytes: 125_000,
            bps: 10e6,
        })
        .is_some()
    })
}

#[test]
fn a_copy_falls_behind_only_far_under_its_prediction_with_a_faster_alternative() {
    // Under half of 100 Mb/s, the alternative at 20: judged after 1.5 windows (3 s).
    let t = behind_at(100e6, 20e6).expect("behind");
    assert!((t - 3.0).abs() < 0.05, "{t}");
    // The alternative is not 1.2x faster than what it gets.
    assert_eq!(behind_at(100e6, 11e6), None);
    // It gets more than half its prediction.
    assert_eq!(behind_at(19e6, 100e6), None);
}
