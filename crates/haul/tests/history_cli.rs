//! End-to-end tests of `haul history`: records inserted through the library, read by the binary.

use haul_store::{Outcome, Params, Sample, Store, TransferRecord};
use std::path::Path;
use std::process::{Command, Output};

fn haul(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_haul"))
        .args(args)
        .env_remove("HAUL_HISTORY")
        .output()
        .expect("run haul")
}

fn record(src_host: &str, started_at: f64, outcome: Outcome) -> TransferRecord {
    TransferRecord {
        id: None,
        kind: "cp".into(),
        started_at,
        duration_s: 8.0,
        source: format!("ftp://{src_host}/big"),
        destination: "/tmp/big".into(),
        source_host: src_host.into(),
        destination_host: "local".into(),
        params: Params {
            parallelism: Some(8),
            ..Params::default()
        },
        files: 1,
        bytes: 10_000_000_000,
        outcome,
        error: (outcome != Outcome::Ok).then(|| "connection reset by peer".into()),
        samples: vec![Sample {
            t_s: 1.0,
            bytes: 1_250_000_000,
            bps: 1e10,
        }],
    }
}

fn seeded(path: &Path) -> Vec<i64> {
    let mut store = Store::open(path).expect("open store");
    vec![
        store
            .insert(&record(
                "dtn1.example.org:2811",
                1_700_000_000.0,
                Outcome::Ok,
            ))
            .expect("insert"),
        store
            .insert(&record(
                "dtn2.example.org:2811",
                1_700_000_100.0,
                Outcome::Failed,
            ))
            .expect("insert"),
    ]
}

fn json(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "haul failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("stdout is JSON")
}

#[test]
fn json_listing_is_newest_first_and_filters() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("h.sqlite");
    let ids = seeded(&db);
    let db = db.to_str().expect("utf-8 path");

    let all = json(&haul(&["history", "--history", db, "--json"]));
    let listed: Vec<i64> = all
        .as_array()
        .expect("array")
        .iter()
        .map(|r| r["id"].as_i64().expect("id"))
        .collect();
    assert_eq!(listed, vec![ids[1], ids[0]]);
    assert_eq!(all[0]["outcome"], "failed");
    assert_eq!(all[0]["error"], "connection reset by peer");
    assert_eq!(all[1]["params"]["parallelism"], 8);
    assert!(
        all[1].get("samples").is_none(),
        "listings leave samples out"
    );

    let dtn1 = json(&haul(&[
        "history",
        "--history",
        db,
        "--json",
        "--host",
        "dtn1",
    ]));
    assert_eq!(dtn1.as_array().expect("array").len(), 1);
    let ok = json(&haul(&[
        "history",
        "--history",
        db,
        "--json",
        "--outcome",
        "ok",
    ]));
    assert_eq!(ok[0]["id"].as_i64(), Some(ids[0]));
    let recent = json(&haul(&[
        "history",
        "--history",
        db,
        "--json",
        "--since",
        "1700000050",
    ]));
    assert_eq!(recent.as_array().expect("array").len(), 1);
    let limited = json(&haul(&[
        "history",
        "--history",
        db,
        "--json",
        "--limit",
        "1",
    ]));
    assert_eq!(limited.as_array().expect("array").len(), 1);

    let shown = json(&haul(&[
        "history",
        "--history",
        db,
        "--json",
        "--show",
        &ids[0].to_string(),
    ]));
    assert_eq!(shown["samples"][0]["bps"], 1e10);
}

#[test]
fn table_shows_rate_and_hosts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("h.sqlite");
    seeded(&db);
    let out = haul(&["history", "--history", db.to_str().expect("utf-8 path")]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("ftp://dtn1.example.org:2811/big → /tmp/big"),
        "{text}"
    );
    assert!(text.contains("10.00 Gb/s"), "{text}");
    assert!(text.contains("2023-11-14 22:13:20"), "{text}");
}

#[test]
fn empty_and_missing_databases_list_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let empty = dir.path().join("empty.sqlite");
    Store::open(&empty).expect("create empty store");
    let list = json(&haul(&[
        "history",
        "--history",
        empty.to_str().expect("utf-8"),
        "--json",
    ]));
    assert_eq!(list, serde_json::json!([]));

    let missing = dir.path().join("missing.sqlite");
    let out = haul(&["history", "--history", missing.to_str().expect("utf-8")]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("no transfers recorded"));
    assert!(!missing.exists(), "listing must not create a database");
}

#[test]
fn corrupt_database_fails_naming_the_path() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("corrupt.sqlite");
    std::fs::write(&db, vec![0x5a; 4096]).expect("write garbage");
    let out = haul(&[
        "history",
        "--history",
        db.to_str().expect("utf-8"),
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&db.display().to_string()), "{err}");
    assert!(out.stdout.is_empty());
}

#[test]
fn unknown_id_is_an_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("h.sqlite");
    seeded(&db);
    let out = haul(&[
        "history",
        "--history",
        db.to_str().expect("utf-8"),
        "--show",
        "999",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no transfer with id 999"));
}

/// A pair's copies at `bps` each, a minute apart, from `from`.
fn series(store: &mut Store, src_host: &str, from: f64, rates: &[f64]) {
    for (i, &bps) in rates.iter().enumerate() {
        let mut r = record(src_host, from + 60.0 * i as f64, Outcome::Ok);
        r.bytes = (bps * r.duration_s / 8.0) as u64;
        store.insert(&r).expect("insert");
    }
}

#[test]
fn predict_shows_each_pairs_prediction_and_replay_scores_the_predictors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("h.sqlite");
    let mut store = Store::open(&db).expect("open");
    // dtn1: steady at 800 Mb/s; dtn2: 100 Mb/s with a spike every third copy.
    series(&mut store, "dtn1:2811", 1_700_000_000.0, &[8e8; 6]);
    let spiky: Vec<f64> = (0..9).map(|i| if i % 3 == 2 { 1e9 } else { 1e8 }).collect();
    series(&mut store, "dtn2:2811", 1_700_000_000.0, &spiky);
    // Left out: a failed copy and a small one.
    store
        .insert(&record("dtn1:2811", 1_700_001_000.0, Outcome::Failed))
        .expect("insert");
    let mut small = record("dtn1:2811", 1_700_001_100.0, Outcome::Ok);
    small.bytes = 1000;
    store.insert(&small).expect("insert");
    drop(store);
    let db = db.to_str().expect("utf-8 path");

    let now = json(&haul(&["history", "predict", "--history", db, "--json"]));
    let pairs = now["pairs"].as_array().expect("pairs");
    assert_eq!(pairs.len(), 2, "{now}");
    let dtn1 = &pairs[0];
    assert_eq!(dtn1["pair"], "dtn1:2811 → local");
    assert_eq!(dtn1["bps"].as_f64(), Some(8e8));
    assert_eq!(dtn1["recent_error_pct"].as_f64(), Some(0.0));
    assert_eq!(now["corpus"]["used"], 15);
    assert_eq!(now["corpus"]["not_ok"], 1);
    assert_eq!(now["corpus"]["small"], 1);
    // The spikes make the median the pair's best predictor: it predicts the common 100 Mb/s.
    assert_eq!(pairs[1]["predictor"], "median(5)", "{now}");
    assert_eq!(pairs[1]["bps"].as_f64(), Some(1e8));

    let rep = json(&haul(&[
        "history",
        "predict",
        "--history",
        db,
        "--replay",
        "--json",
    ]));
    let preds = rep["predictors"].as_array().expect("predictors");
    let names: Vec<&str> = preds
        .iter()
        .map(|p| p["predictor"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["median(5)", "mavg(5)", "ewma(0.3)", "selector", "hindsight"]
    );
    // 5 + 8 predicted steps, each by every predictor.
    assert!(preds.iter().all(|p| p["steps"] == 13), "{rep}");
    let median = |i: usize| preds[i]["median"].as_f64().expect("median");
    assert!(
        median(0) < median(1),
        "median beats the average on spikes: {rep}"
    );
    assert!(
        median(3) <= median(1),
        "the selector is no worse than the average: {rep}"
    );
    assert!(
        median(4) <= median(3),
        "hindsight, which sees later transfers, is no worse than the selector: {rep}"
    );

    let table = haul(&[
        "history",
        "predict",
        "--history",
        db,
        "--replay",
        "--per-pair",
    ]);
    assert!(table.status.success());
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(text.contains("2 pairs replayed"), "{text}");
    assert!(
        text.contains("MEDIAN ERR") && text.contains("dtn2:2811 → local"),
        "{text}"
    );
}

#[test]
fn predict_pools_databases_and_keeps_their_pairs_apart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (a, b) = (dir.path().join("a.sqlite"), dir.path().join("b.sqlite"));
    series(
        &mut Store::open(&a).expect("open"),
        "dtn1:2811",
        1.7e9,
        &[8e8; 3],
    );
    series(
        &mut Store::open(&b).expect("open"),
        "dtn1:2811",
        1.7e9,
        &[2e8; 3],
    );
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let out = json(&haul(&[
        "history",
        "predict",
        "--history",
        a,
        "--history",
        b,
        "--json",
    ]));
    let pairs: Vec<(String, f64)> = out["pairs"]
        .as_array()
        .expect("pairs")
        .iter()
        .map(|p| {
            (
                p["pair"].as_str().unwrap().to_owned(),
                p["bps"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        pairs,
        [
            ("a: dtn1:2811 → local".to_owned(), 8e8),
            ("b: dtn1:2811 → local".to_owned(), 2e8)
        ]
    );
    let missing = dir.path().join("none.sqlite");
    let out = json(&haul(&[
        "history",
        "predict",
        "--history",
        missing.to_str().unwrap(),
        "--json",
    ]));
    assert_eq!(out["pairs"].as_array().map(Vec::len), Some(0));
    assert!(!missing.exists(), "reading must not create the database");
}
