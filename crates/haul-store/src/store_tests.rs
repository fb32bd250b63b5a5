//! Unit tests of [`Store`] against real SQLite files.

use super::*;
use serde_json::json;

fn record(
    kind: &str,
    src: &str,
    dst: &str,
    started_at: f64,
    bytes: u64,
    duration_s: f64,
) -> TransferRecord {
    TransferRecord {
        id: None,
        kind: kind.into(),
        started_at,
        duration_s,
        source: format!("gsiftp://{src}/data/in"),
        destination: format!("file:///{dst}/out"),
        source_host: src.into(),
        destination_host: dst.into(),
        params: Params {
            parallelism: Some(4),
            concurrency: Some(2),
            pipelining: None,
            tcp_buffer: Some(16 << 20),
            block_size: Some(1 << 20),
            checksum: Some("adler32".into()),
            transport: Some("tcp".into()),
            extra: json!({"tuner": "spsa", "step": 3}),
        },
        files: 10,
        bytes,
        outcome: Outcome::Ok,
        error: None,
        samples: vec![
            Sample {
                t_s: 1.0,
                bytes: bytes / 2,
                bps: 1e9,
            },
            Sample {
                t_s: 2.0,
                bytes: bytes / 2,
                bps: 2e9,
            },
        ],
    }
}

#[test]
fn open_creates_parent_dirs_and_sets_wal_and_version() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("a/b/history.sqlite");
    let store = Store::open(&path).expect("open");
    assert!(path.exists());
    let mode: String = store
        .conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .expect("pragma");
    assert_eq!(mode, "wal");
    let v: i64 = store
        .conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .expect("pragma");
    assert_eq!(v, MIGRATIONS.len() as i64);
    drop(store);
    Store::open(&path).expect("reopening an existing store migrates nothing and succeeds");
}

#[test]
fn commits_and_closing_leave_the_disk_alone_and_lose_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("h.sqlite");
    let mut store = Store::open(&path).expect("open");
    let sync: i64 = store
        .conn
        .query_row("PRAGMA synchronous", [], |r| r.get(0))
        .expect("pragma");
    assert_eq!(sync, 1, "synchronous = NORMAL: a WAL commit does not fsync");
    let r = record("cp", "dtn1:2811", "local", 100.0, 1 << 30, 4.0);
    let id = store.insert(&r).expect("insert");
    drop(store);
    // Closing did not checkpoint (which syncs): the record is still in the log.
    let wal = dir.path().join("h.sqlite-wal");
    let len = std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0);
    assert!(
        len > 0,
        "the write-ahead log is kept at close, not checkpointed"
    );
    let store = Store::open(&path).expect("reopen");
    let got = store
        .get(id)
        .expect("get")
        .expect("the record survives the close");
    assert_eq!(got, TransferRecord { id: Some(id), ..r });
}

#[test]
fn insert_then_get_round_trips_with_samples() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut store = Store::open(&dir.path().join("h.sqlite")).expect("open");
    let r = record("cp", "dtn1:2811", "local", 100.0, 1 << 30, 4.0);
    let id = store.insert(&r).expect("insert");
    let got = store.get(id).expect("get").expect("present");
    assert_eq!(got, TransferRecord { id: Some(id), ..r });
    assert!(store.get(id + 1).expect("get").is_none());
}

#[test]
fn list_filters_and_orders_newest_first() {
    let mut store = Store::open_in_memory().expect("open");
    store
        .insert(&record("cp", "dtn1:2811", "local", 100.0, 10, 1.0))
        .expect("insert");
    store
        .insert(&record("cp", "local", "dtn2:2811", 300.0, 10, 1.0))
        .expect("insert");
    let mut failed = record("profile", "dtn1:2811", "dtn2:2811", 200.0, 10, 1.0);
    failed.outcome = Outcome::Failed;
    failed.error = Some("connection reset".into());
    store.insert(&failed).expect("insert");

    let all = store.list(&Filter::default()).expect("list");
    let times: Vec<f64> = all.iter().map(|r| r.started_at).collect();
    assert_eq!(times, vec![300.0, 200.0, 100.0]);
    assert!(
        all.iter().all(|r| r.samples.is_empty()),
        "samples only when asked"
    );

    let dtn1 = store
        .list(&Filter {
            host: Some("dtn1".into()),
            ..Filter::default()
        })
        .expect("list");
    assert_eq!(dtn1.len(), 2);
    let profiles = store
        .list(&Filter {
            kind: Some("profile".into()),
            ..Filter::default()
        })
        .expect("list");
    assert_eq!(profiles.len(), 1);
    assert_eq!(profiles[0].error.as_deref(), Some("connection reset"));
    let ok = store
        .list(&Filter {
            outcome: Some(Outcome::Ok),
            ..Filter::default()
        })
        .expect("list");
    assert_eq!(ok.len(), 2);
    let recent = store
        .list(&Filter {
            since: Some(200.0),
            ..Filter::default()
        })
        .expect("list");
    assert_eq!(recent.len(), 2);
    let one = store
        .list(&Filter {
            limit: Some(1),
            with_samples: true,
            ..Filter::default()
        })
        .expect("list");
    assert_eq!(one.len(), 1);
    assert_eq!(one[0].samples.len(), 2);
}

#[test]
fn best_for_host_pair_picks_fastest_ok_transfer() {
    let mut store = Store::open_in_memory().expect("open");
    let slow = store
        .insert(&record("cp", "a:2811", "b:2811", 1.0, 100, 10.0))
        .expect("insert");
    let fast = store
        .insert(&record("cp", "a:2811", "b:2811", 2.0, 100, 2.0))
        .expect("insert");
    let mut failed_faster = record("cp", "a:2811", "b:2811", 3.0, 1000, 1.0);
    failed_faster.outcome = Outcome::Failed;
    store.insert(&failed_faster).expect("insert");
    store
        .insert(&record("profile", "a:2811", "b:2811", 4.0, 10_000, 1.0))
        .expect("insert");
    store
        .insert(&record("cp", "b:2811", "a:2811", 5.0, 10_000, 1.0))
        .expect("insert");

    let best = store
        .best_for_host_pair("a:2811", "b:2811", "cp")
        .expect("query")
        .expect("found");
    assert_eq!(best.id, Some(fast));
    assert_ne!(best.id, Some(slow));
    assert_eq!(best.samples.len(), 2);
    assert!(store
        .best_for_host_pair("a:2811", "c:2811", "cp")
        .expect("query")
        .is_none());
}

#[test]
fn invalid_records_are_rejected_without_writing() {
    let mut store = Store::open_in_memory().expect("open");
    let mut r = record("cp", "a", "b", 1.0, 1, 1.0);
    r.duration_s = f64::NAN;
    let e = store.insert(&r).expect_err("NaN duration");
    assert!(e.to_string().contains("duration_s"), "{e}");
    r.duration_s = 1.0;
    r.bytes = u64::MAX;
    let e = store.insert(&r).expect_err("bytes too big");
    assert!(e.to_string().contains("bytes"), "{e}");
    assert!(store.list(&Filter::default()).expect("list").is_empty());
}

#[test]
fn corrupt_file_error_names_the_path() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("garbage.sqlite");
    std::fs::write(&path, vec![0x42u8; 8192]).expect("write");
    let e = Store::open(&path).expect_err("not a database");
    assert!(e.to_string().contains(&path.display().to_string()), "{e}");
}

#[test]
fn newer_schema_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("new.sqlite");
    let store = Store::open(&path).expect("open");
    store
        .conn
        .pragma_update(None, "user_version", 99)
        .expect("pragma");
    drop(store);
    let e = Store::open(&path).expect_err("too new");
    assert!(matches!(e, StoreError::TooNew { found: 99, .. }), "{e}");
}

#[test]
fn default_path_ends_in_haul_history_sqlite() {
    let p = Store::default_path();
    assert!(p.ends_with("haul/history.sqlite"), "{}", p.display());
}
