use super::*;
use crate::cmd::history::{Action, Args};

#[derive(clap::Parser, Debug)]
struct Cli {
    #[command(flatten)]
    args: Args,
}

fn replay_args(extra: &[&str]) -> ReplayArgs {
    use clap::Parser;
    let argv = ["haul-history", "replay"].iter().chain(extra).copied();
    match Cli::try_parse_from(argv).expect("parses").args.action {
        Some(Action::Replay(r)) => r,
        other => panic!("not a replay: {other:?}"),
    }
}

/// A 100 ms `cp` record: `setup` empty intervals, a 0.5 s ramp, then `plateau` bits/s.
fn record(id: i64, setup: usize, plateau: f64, n: usize) -> TransferRecord {
    let samples: Vec<haul_store::Sample> = (0..n)
        .map(|i| {
            let k = i.saturating_sub(setup) as f64;
            let bps = if i < setup {
                0.0
            } else {
                plateau * (k + 1.0).min(5.0) / 5.0
            };
            haul_store::Sample {
                t_s: (i + 1) as f64 * 0.1,
                bytes: (bps * 0.1 / 8.0) as u64,
                bps,
            }
        })
        .collect();
    let bytes = samples.iter().map(|s| s.bytes).sum();
    TransferRecord {
        id: Some(id),
        kind: "cp".into(),
        started_at: 1_700_000_000.0 + id as f64,
        duration_s: n as f64 * 0.1,
        source: "ftp://b:2811/dev/zero".into(),
        destination: "/dev/null".into(),
        source_host: "b:2811".into(),
        destination_host: "local".into(),
        params: haul_store::Params {
            parallelism: Some(4),
            ..haul_store::Params::default()
        },
        files: 1,
        bytes,
        outcome: Outcome::Ok,
        error: None,
        samples,
    }
}

#[test]
fn replay_defaults_and_id_ranges() {
    let a = replay_args(&[]);
    assert_eq!((a.kind.as_str(), a.min_readings, a.theta), ("cp", 20, 0.10));
    assert_eq!(a.min_window, EarlyStop::RECOMMENDED_MIN_WINDOW_S);
    let a = replay_args(&[
        "--ids",
        "1-11,26-30, 40",
        "--min-window",
        "0",
        "--resample-ms",
        "200",
    ]);
    let ids = a.ids.expect("ids");
    assert!(ids.contains(1) && ids.contains(11) && ids.contains(28) && ids.contains(40));
    assert!(!ids.contains(12) && !ids.contains(0));
    assert!(parse_ids("3-1").is_err() && parse_ids("x").is_err() && parse_ids("").is_err());
    use clap::Parser;
    assert!(
        Cli::try_parse_from(["h", "--limit", "3", "replay"]).is_err(),
        "listing flags do not mix with replay"
    );
    assert!(check_replay_args(&replay_args(&["--theta", "0"])).is_err());
}

#[test]
fn replay_runs_every_model_on_qualifying_traces() {
    let records = vec![
        record(3, 15, 800e6, 200),
        record(2, 0, 400e6, 150),
        record(1, 5, 100e6, 12),
    ];
    let out = replay_records(&records, &replay_args(&[]), "mem").expect("replay");
    // Record 1 has only 7 readings after its first byte.
    assert_eq!((out.traces.len(), out.skipped), (2, 1));
    assert_eq!(
        out.traces.iter().map(|t| t.id).collect::<Vec<_>>(),
        vec![Some(2), Some(3)],
        "oldest first"
    );
    assert_eq!(out.reports.len(), 5);
    let ar = &out.reports[0];
    assert_eq!(ar.model, "AR(2)");
    assert_eq!(ar.traces, 2);
    // Clean ramps to a plateau: converged after the 1.5 s window, close to the average.
    assert_eq!(ar.converged_pct, 100.0);
    assert!(ar.mean_time_s > 1.49 && ar.mean_time_s < 3.0, "{ar:?}");
    assert!(
        ar.mean_error_pct < 5.0 && ar.within_bar_pct == 100.0,
        "{ar:?}"
    );
    // Setup intervals are dropped: record 3 starts at its first byte.
    assert_eq!(out.traces[1].readings, 185);
    let kept = replay_records(&records, &replay_args(&["--keep-setup"]), "mem").expect("replay");
    assert_eq!(kept.traces[1].readings, 200);
    assert!(kept.traces[1].average_bps < out.traces[1].average_bps);
    // Resampled to 200 ms, and filtered by interval.
    let r =
        replay_records(&records, &replay_args(&["--resample-ms", "200"]), "mem").expect("replay");
    assert!((r.traces[0].dt - 0.2).abs() < 1e-9 && r.traces[0].readings == 75);
    let none =
        replay_records(&records, &replay_args(&["--sample-ms", "1000"]), "mem").expect("replay");
    assert!(none.traces.is_empty());
    let mut text = Vec::new();
    write_replay(&mut text, &out, true).expect("write");
    let text = String::from_utf8(text).expect("utf-8");
    assert!(
        text.contains("AR(2)")
            && text.contains("oracle (4-point window)")
            && text.contains("<10% BY 3s"),
        "{text}"
    );
    serde_json::to_string(&out).expect("JSON");
}
