use super::*;

#[test]
fn utc_formatting_matches_known_dates() {
    assert_eq!(format_utc(0.0), "1970-01-01 00:00:00");
    assert_eq!(format_utc(951_782_400.0), "2000-02-29 00:00:00");
    assert_eq!(format_utc(1_700_000_000.5), "2023-11-14 22:13:20");
}

#[test]
fn since_accepts_durations_and_unix_times() {
    assert_eq!(parse_since("1700000000"), Ok(1_700_000_000.0));
    let day_ago = parse_since("24h").expect("24h");
    assert!((now_unix() - 86_400.0 - day_ago).abs() < 5.0);
    assert_eq!(parse_duration("2w"), Ok(1_209_600.0));
    assert!(parse_since("yesterday").is_err());
    assert!(parse_since("5y").is_err());
}

#[test]
fn human_units() {
    assert_eq!(human_bytes(512), "512 B");
    assert_eq!(human_bytes(3 << 29), "1.50 GiB");
    assert_eq!(human_rate(9.4e9), "9.40 Gb/s");
    assert_eq!(human_rate(250e6), "250.0 Mb/s");
    assert_eq!(human_duration(0.25), "250ms");
    assert_eq!(human_duration(245.0), "4m05s");
}
