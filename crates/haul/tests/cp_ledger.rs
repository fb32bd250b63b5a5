//! A session that dies mid-transfer: `haul cp` exits non-zero and names every file it did not
//! move, downloads and uploads alike (the engine's ledger, `haul_xfer::ledger`). The engine's
//! `xfer::batch_taken` fail point, built into this test's `haul` through the `failpoints`
//! feature, panics the session that takes the second batch, with its files in hand.
mod common;

use common::haul::*;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;

const FILES: usize = 6;
/// The first batch goes through; the session taking the next one panics.
const DIE_ON_SECOND_BATCH: (&str, &str) = (
    "FAILPOINTS",
    "xfer::batch_taken=1*off->panic(session killed by the test)",
);

fn names() -> Vec<String> {
    (0..FILES).map(|i| format!("f{i}.bin")).collect()
}

fn content(name: &str) -> Vec<u8> {
    random_bytes(100_000 + name.len() * 7, name.bytes().map(u64::from).sum())
}

/// Each file either arrived whole at `landed(name)` or is named in the error (as `said(name)`),
/// never both, and at least one is named.
fn check(out: &Output, landed: impl Fn(&str) -> PathBuf, said: impl Fn(&str) -> String) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "a session died mid-transfer, yet haul cp succeeded: {err}"
    );
    assert!(
        err.contains(&format!("of {FILES} files not moved")),
        "the error counts the files not moved: {err}"
    );
    let mut missing = 0;
    for n in names() {
        let (p, named) = (landed(&n), err.contains(&said(&n)));
        if p.exists() {
            assert!(!named, "{n} arrived but is named as not moved: {err}");
            assert_eq!(fs::read(&p).unwrap(), content(&n), "{n} arrived whole");
        } else {
            assert!(
                named,
                "{n} did not arrive and the error does not name it: {err}"
            );
            missing += 1;
        }
    }
    assert!(missing > 0, "the session that died held files");
}

fn tree(dir: &Path) {
    fs::create_dir_all(dir).unwrap();
    for n in names() {
        fs::write(dir.join(&n), content(&n)).unwrap();
    }
}

/// `haul cp -r` of a served tree into `dir/dl`, one session moving one file per batch.
fn download(dir: &Path, env: &[(&str, &str)]) -> (Output, PathBuf) {
    let root = dir.join("root");
    tree(&root.join("tree"));
    let s = serve(&root, &["--anonymous"]);
    let dl = dir.join("dl");
    let url = format!("ftp://{}/tree", s.addr);
    let args = [
        "-r",
        "-c",
        "1",
        "--pipeline",
        "1",
        &url,
        dl.to_str().unwrap(),
    ];
    (cp_env(&args, &dir.join("h.sqlite"), env), dl)
}

#[test]
fn a_session_dying_mid_download_fails_the_transfer_and_names_the_files_not_moved() {
    let dir = tempfile::tempdir().unwrap();
    let (out, dl) = download(dir.path(), &[DIE_ON_SECOND_BATCH]);
    check(&out, |n| dl.join(n), |n| dl.join(n).display().to_string());
}

#[test]
fn a_session_dying_mid_upload_fails_the_transfer_and_names_the_files_not_moved() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    fs::create_dir(&root).unwrap();
    let src = dir.path().join("src");
    tree(&src);
    let s = serve(&root, &["--anonymous", "--anonymous-write"]);
    let url = format!("ftp://{}/up", s.addr);
    let args = [
        "-r",
        "-c",
        "1",
        "--pipeline",
        "1",
        src.to_str().unwrap(),
        &url,
    ];
    let out = cp_env(&args, &dir.path().join("h.sqlite"), &[DIE_ON_SECOND_BATCH]);
    check(&out, |n| root.join("up").join(n), |n| format!("/up/{n}"));
}

#[test]
fn without_a_fault_the_same_copy_succeeds() {
    let dir = tempfile::tempdir().unwrap();
    let (out, dl) = download(dir.path(), &[]);
    assert!(out.status.success());
    for n in names() {
        assert_eq!(fs::read(dl.join(&n)).unwrap(), content(&n));
    }
}
