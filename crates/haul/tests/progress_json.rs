//! `haul cp --progress json` against `haul serve`, both as real binaries: a tree downloaded and
//! uploaded gives one `start` first, one `end` last, one `file` event per file with its size
//! and `ok`, intervals in order and an `end` whose bytes are the files' sizes; with `--json` the
//! events go to stderr; a refused upload and a download that cannot land give a `failed` file
//! event and an `end` that counts it; a copy refused before planning prints its `end` alone.
mod common;

use common::haul::*;

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use serde_json::Value;

/// The events of one run: every line of `text` that is a JSON object with an `event`.
fn events(text: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(text)
        .lines()
        .filter(|l| l.starts_with("{\"event\""))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}

/// Every line of stdout is an event.
fn stdout_events(out: &std::process::Output) -> Vec<Value> {
    let text = String::from_utf8_lossy(&out.stdout);
    for l in text.lines() {
        let v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}"));
        assert!(v["event"].is_string(), "not an event: {l}");
    }
    events(&out.stdout)
}

fn of_kind<'a>(ev: &'a [Value], kind: &str) -> Vec<&'a Value> {
    ev.iter().filter(|e| e["event"] == kind).collect()
}

/// Checks the events of a copy that moved every file of `sizes` (by destination name, the
/// path's last component) and returns the `end` event.
fn check_ok(ev: &[Value], sizes: &BTreeMap<String, u64>) -> Value {
    assert!(ev.len() >= 3, "{ev:?}");
    let (start, end) = (&ev[0], &ev[ev.len() - 1]);
    assert_eq!(start["event"], "start");
    assert_eq!(end["event"], "end");
    assert_eq!(of_kind(ev, "start").len(), 1);
    assert_eq!(of_kind(ev, "end").len(), 1);
    let total: u64 = sizes.values().sum();
    assert_eq!(start["files"], sizes.len());
    assert_eq!(start["bytes"], total);
    assert_eq!(start["transport"], "tcp");
    let files = of_kind(ev, "file");
    let mut seen = BTreeMap::new();
    for f in &files {
        let name = f["destination"]
            .as_str()
            .unwrap()
            .rsplit('/')
            .next()
            .unwrap();
        assert_eq!(f["outcome"], "ok", "{f}");
        assert_eq!(f["size"], sizes[name], "{f}");
        assert_eq!(f["bytes"], sizes[name], "{f}");
        assert_eq!(f["checksum"]["algorithm"], "XXHC", "{f}");
        assert_eq!(f["resumed"], false);
        assert!(f["elapsed_s"].as_f64().unwrap() >= 0.0);
        assert!(seen.insert(name.to_string(), ()).is_none(), "twice: {name}");
    }
    assert_eq!(
        seen.len(),
        sizes.len(),
        "one file event per file: {files:?}"
    );
    let intervals = of_kind(ev, "interval");
    assert!(!intervals.is_empty(), "at least the last sample");
    for w in intervals.windows(2) {
        assert!(w[0]["t"].as_f64() <= w[1]["t"].as_f64(), "{w:?}");
        assert!(w[0]["bytes"].as_u64() <= w[1]["bytes"].as_u64(), "{w:?}");
        assert!(w[0]["files"].as_u64() <= w[1]["files"].as_u64(), "{w:?}");
    }
    assert_eq!(intervals.last().unwrap()["bytes"], total);
    let ts: Vec<f64> = ev.iter().map(|e| e["t"].as_f64().unwrap()).collect();
    assert!(ts.windows(2).all(|w| w[0] <= w[1]), "t in order: {ts:?}");
    assert_eq!(end["status"], "ok");
    assert_eq!(end["exit_code"], 0);
    assert_eq!(end["files"], sizes.len());
    assert_eq!(end["files_ok"], sizes.len());
    assert_eq!(end["files_failed"], 0);
    assert_eq!(end["files_skipped"], 0);
    assert_eq!(end["bytes"], total);
    assert_eq!(end["verified_files"], sizes.len());
    assert!(end["error"].is_null());
    end.clone()
}

/// A tree of four files (one empty, one in a subdirectory) under `dir`; their sizes by name.
fn tree(dir: &Path) -> BTreeMap<String, u64> {
    fs::create_dir_all(dir.join("sub")).unwrap();
    let files = [
        ("a", 100_000usize),
        ("sub/b", 1_500_000),
        ("sub/c", 0),
        ("d", 3_000_000),
    ];
    let mut sizes = BTreeMap::new();
    for (i, (name, n)) in files.iter().enumerate() {
        fs::write(dir.join(name), random_bytes(*n, 7 + i as u64)).unwrap();
        sizes.insert(name.rsplit('/').next().unwrap().to_string(), *n as u64);
    }
    sizes
}

#[test]
fn a_tree_down_and_up_reports_every_file_once_between_start_and_end() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let sizes = tree(&root.join("t"));
    let s = serve(&root, &["--anonymous", "--anonymous-write"]);
    let hist = dir.path().join("h.sqlite");
    let dl = dir.path().join("dl");
    let url = format!("ftp://{}/t", s.addr);
    // Slowed so that the transfer spans several sample intervals.
    let out = cp(
        &[
            "-r",
            "--progress",
            "json",
            "--sample-ms",
            "100",
            "--max-rate",
            "20MB/s",
            &url,
            dl.to_str().unwrap(),
        ],
        &hist,
    );
    assert!(out.status.success());
    let ev = stdout_events(&out);
    check_ok(&ev, &sizes);
    assert_eq!(ev[0]["source"], url);
    assert!(
        of_kind(&ev, "interval").len() >= 2,
        "several intervals: {ev:?}"
    );
    assert_eq!(
        fs::read(dl.join("sub/b")).unwrap(),
        fs::read(root.join("t/sub/b")).unwrap()
    );

    // Up, with --json: the summary keeps stdout and the events go to stderr.
    let up = format!("ftp://{}/up", s.addr);
    let out = cp(
        &[
            "-r",
            "--progress",
            "json",
            "--json",
            dl.to_str().unwrap(),
            &up,
        ],
        &hist,
    );
    assert!(out.status.success());
    let summary: Value = serde_json::from_slice(&out.stdout).expect("the --json summary");
    assert_eq!(summary["files"], sizes.len());
    let ev = events(&out.stderr);
    let end = check_ok(&ev, &sizes);
    assert_eq!(end["bytes"], summary["bytes"]);
    assert_eq!(
        fs::read(root.join("up/d")).unwrap(),
        fs::read(root.join("t/d")).unwrap()
    );
}

/// Checks the events of a copy of the files of `sizes` that failed on the one named `bad` and
/// exited with `code`; returns the failed file event.
fn check_failed(ev: &[Value], sizes: &BTreeMap<String, u64>, bad: &str, code: i32) -> Value {
    assert_eq!(ev[0]["event"], "start");
    assert_eq!(of_kind(ev, "start").len(), 1);
    let end = &ev[ev.len() - 1];
    assert_eq!(end["event"], "end");
    assert_eq!(of_kind(ev, "end").len(), 1);
    assert_eq!(end["status"], "failed");
    assert_eq!(end["exit_code"], code);
    let files = of_kind(ev, "file");
    assert_eq!(
        files.len(),
        sizes.len(),
        "one file event per file: {files:?}"
    );
    let failed: Vec<_> = files.iter().filter(|f| f["outcome"] == "failed").collect();
    assert_eq!(failed.len(), 1, "{files:?}");
    let f = failed[0];
    assert!(f["destination"].as_str().unwrap().ends_with(bad), "{f}");
    assert_eq!(f["size"], sizes[bad]);
    assert_eq!(end["error"], f["error"]);
    for ok in files.iter().filter(|f| f["outcome"] == "ok") {
        let name = ok["destination"]
            .as_str()
            .unwrap()
            .rsplit('/')
            .next()
            .unwrap();
        assert_eq!(ok["bytes"], sizes[name], "{ok}");
    }
    let n = |k: &str| end[k].as_u64().unwrap();
    assert_eq!(n("files_failed"), 1);
    assert_eq!(n("files"), sizes.len() as u64);
    assert_eq!(
        n("files_ok") + n("files_failed") + n("files_skipped"),
        sizes.len() as u64,
        "every planned file is counted once: {end}"
    );
    let by = |o: &str| files.iter().filter(|f| f["outcome"] == o).count() as u64;
    assert_eq!(
        (by("ok"), by("skipped")),
        (n("files_ok"), n("files_skipped"))
    );
    (*f).clone()
}

#[test]
fn refused_and_unwritable_files_are_reported_failed_and_counted_at_the_end() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let sizes = tree(&root.join("t"));
    // On the server, /up/sub/b is a directory: its STOR is refused.
    fs::create_dir_all(root.join("up/sub/b/x")).unwrap();
    let s = serve(&root, &["--anonymous", "--anonymous-write"]);
    let hist = dir.path().join("h.sqlite");
    let src = root.join("t");
    let up = format!("ftp://{}/up", s.addr);
    let out = cp(
        &[
            "-r",
            "-c",
            "1",
            "--progress",
            "json",
            src.to_str().unwrap(),
            &up,
        ],
        &hist,
    );
    let code = out.status.code().unwrap();
    assert_ne!(code, 0);
    let f = check_failed(&stdout_events(&out), &sizes, "b", code);
    assert!(
        f["error"]
            .as_str()
            .unwrap()
            .contains("refused `STOR /up/sub/b`"),
        "{f}"
    );

    // Locally, dl/sub/b is a directory: the downloaded file cannot take its place.
    let dl = dir.path().join("dl");
    fs::create_dir_all(dl.join("sub/b/x")).unwrap();
    let url = format!("ftp://{}/t", s.addr);
    let out = cp(
        &["-r", "--progress", "json", &url, dl.to_str().unwrap()],
        &hist,
    );
    let code = out.status.code().unwrap();
    assert_eq!(code, 1);
    let f = check_failed(&stdout_events(&out), &sizes, "b", code);
    assert_eq!(f["error_kind"], "other");

    // A copy that fails before anything is planned prints its end event alone.
    let ro = serve(&root, &["--anonymous"]);
    let out = cp(
        &[
            "-r",
            "--progress",
            "json",
            src.to_str().unwrap(),
            &format!("ftp://{}/new", ro.addr),
        ],
        &hist,
    );
    assert_eq!(out.status.code(), Some(6));
    let ev = stdout_events(&out);
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert_eq!(ev[0]["event"], "end");
    assert_eq!(ev[0]["error_kind"], "permission_denied");
    assert_eq!(ev[0]["exit_code"], 6);
    assert_eq!(ev[0]["files"], 0);
}
