use std::time::Duration;

use haul_xfer::checksum::Algorithm;
use haul_xfer::{ErrorKind, Summary};

use super::*;

fn lines(buf: &Mutex<Vec<u8>>) -> Vec<Value> {
    String::from_utf8(buf.lock().unwrap().clone())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}

fn report(dst: &str, outcome: FileOutcome) -> FileReport {
    FileReport {
        src: format!("/src{dst}"),
        dst: dst.into(),
        size: 100,
        bytes: 100,
        elapsed_s: 0.5,
        checksum: Some((Algorithm::Xxhc, "00ff".into())),
        resumed: false,
        outcome,
    }
}

#[test]
fn every_line_starts_with_the_event_and_its_times() {
    let at = UNIX_EPOCH + Duration::from_millis(951_827_696_789);
    let line = event_line("file", 1.23456, at, &json!({"size": 3, "a": null}));
    assert!(
        line.starts_with(r#"{"event":"file","t":1.235,"time":"2000-02-29T12:34:56.789Z","#),
        "{line}"
    );
    let v: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["size"], 3);
    assert!(v["a"].is_null());
    let bare = event_line("end", 0.0, UNIX_EPOCH, &json!({}));
    assert_eq!(
        bare,
        r#"{"event":"end","t":0.0,"time":"1970-01-01T00:00:00.000Z"}"#
    );
}

#[test]
fn rfc3339_dates_cross_years_and_leap_days() {
    let at = |s: u64| rfc3339(UNIX_EPOCH + Duration::from_secs(s));
    assert_eq!(at(1_798_761_599), "2026-12-31T23:59:59.000Z");
    assert_eq!(at(1_798_761_600), "2027-01-01T00:00:00.000Z");
    assert_eq!(at(951_782_400), "2000-02-29T00:00:00.000Z");
    assert_eq!(at(951_868_800), "2000-03-01T00:00:00.000Z");
}

#[test]
fn file_fields_say_ok_or_failed_with_the_cause() {
    let ok = file_fields(&report("/d/a", FileOutcome::Ok));
    assert_eq!(ok["outcome"], "ok");
    assert_eq!(ok["source"], "/src/d/a");
    assert_eq!(ok["bytes_per_s"], 200.0);
    assert_eq!(ok["checksum"]["algorithm"], "XXHC");
    assert_eq!(ok["checksum"]["value"], "00ff");
    assert!(ok.get("error").is_none());
    let failed = file_fields(&report(
        "/d/b",
        FileOutcome::Failed {
            error: "no such file".into(),
            kind: ErrorKind::NoSuchPath,
        },
    ));
    assert_eq!(failed["outcome"], "failed");
    assert_eq!(failed["error"], "no such file");
    assert_eq!(failed["error_kind"], "no_such_path");
    let skipped = skipped_fields(&Job::new("/s/c", "/d/c", 7), "stopped");
    assert_eq!(skipped["outcome"], "skipped");
    assert_eq!(skipped["size"], 7);
    assert_eq!(skipped["bytes"], 0);
    assert_eq!(skipped["reason"], "stopped");
}

#[test]
fn interval_rates_are_bytes_per_second() {
    let s = Sample {
        t_s: 2.0,
        bytes: 1000,
        bps: 8000.0,
    };
    let v = interval_fields(&s, 3000, 4, 2, 1);
    assert_eq!(v["bytes"], 3000);
    assert_eq!(v["files"], 4);
    assert_eq!(v["bytes_per_s"], 1000.0);
    assert_eq!(v["avg_bytes_per_s"], 1500.0);
    assert_eq!(v["active_files"], 2);
    assert_eq!(v["sessions"], 1);
}

/// A copy's events in order: one start, intervals, a file event per file (failed ones not
/// repeated as skipped), one end with the counts and the exit code.
#[test]
fn a_failed_copy_counts_every_planned_file_once() {
    let buf = Arc::new(Mutex::new(Vec::new()));
    let ev = Arc::new(Events::to(Out::Buffer(buf.clone())));
    let args = crate::cmd::cp::args_from(["ftp://h/s", "/d"]).unwrap();
    ev.start(&args, &Options::default(), 3, 300);
    let s = Sample {
        t_s: 1.0,
        bytes: 150,
        bps: 1200.0,
    };
    ev.interval(&s, 2, 2);
    let observer = ev.observer();
    (observer.0)(&report("/d/a", FileOutcome::Ok));
    let gone = XferError::Refused {
        host: "h".into(),
        command: "RETR /s/b".into(),
        reply: "550 no".into(),
        kind: ErrorKind::NoSuchPath,
    };
    (observer.0)(&report(
        "/d/b",
        FileOutcome::Failed {
            error: gone.to_string(),
            kind: gone.kind(),
        },
    ));
    let jobs = [
        Job::new("/s/a", "/d/a", 100),
        Job::new("/s/b", "/d/b", 100),
        Job::new("/s/c", "/d/c", 100),
    ];
    ev.skipped(&jobs, &["/d/b".into(), "/d/c".into()], "stopped");
    ev.end(&Err(gone.into()));
    let v = lines(&buf);
    let kinds: Vec<&str> = v.iter().map(|l| l["event"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["start", "interval", "file", "file", "file", "end"]);
    assert_eq!(v[0]["files"], 3);
    assert_eq!(v[0]["transport"], "tcp");
    assert_eq!(v[1]["files"], 0, "no file had ended at the interval");
    assert_eq!(v[4]["destination"], "/d/c");
    assert_eq!(v[4]["outcome"], "skipped");
    let end = &v[5];
    assert_eq!(end["status"], "failed");
    assert_eq!(end["exit_code"], 5);
    assert_eq!(end["error_kind"], "no_such_path");
    assert_eq!(
        (
            &end["files_ok"],
            &end["files_failed"],
            &end["files_skipped"]
        ),
        (&json!(1), &json!(1), &json!(1))
    );
    assert_eq!(end["bytes"], 150, "what the samples counted");
    assert_eq!(end["verified_files"], 1);
    assert_eq!(end["checksum"], "XXHC");
    let ts: Vec<f64> = v.iter().map(|l| l["t"].as_f64().unwrap()).collect();
    assert!(ts.windows(2).all(|w| w[0] <= w[1]), "{ts:?}");
}

#[test]
fn a_finished_copy_ends_with_the_summary() {
    let buf = Arc::new(Mutex::new(Vec::new()));
    let ev = Events::to(Out::Buffer(buf.clone()));
    let args = crate::cmd::cp::args_from(["/s", "ftp://h/d"]).unwrap();
    let copied = Copied {
        args,
        opts: Options::default(),
        summary: Summary {
            files: 2,
            bytes: 4000,
            duration_s: 2.0,
            verified: 2,
            retransferred: 0,
            chunks_resent_bytes: 0,
            checksum: Some("XXHC".into()),
            samples: Vec::new(),
            clusters: Vec::new(),
            pieces: 0,
        },
        tuning: Vec::new(),
        stopped: None,
    };
    ev.end(&Ok(copied));
    let end = &lines(&buf)[0];
    assert_eq!(end["status"], "ok");
    assert_eq!(end["exit_code"], 0);
    assert_eq!(end["bytes"], 4000);
    assert_eq!(end["avg_bytes_per_s"], 2000.0);
    assert_eq!(end["verified_files"], 2);
    assert_eq!(end["checksum"], "XXHC");
    assert!(end["error"].is_null());
}
