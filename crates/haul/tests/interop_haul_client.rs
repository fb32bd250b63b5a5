//! `haul cp` against the real globus-gridftp-server: downloads, uploads, trees and
//! third-party transfers in MODE E with 8 streams, every file compared byte for byte.
mod common;

use common::haul::*;

use std::fs;
use std::path::Path;
use std::process::{Command, Output};

use common::globus::*;

fn haul(args: &[&str], history: &Path) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_haul"))
        .args(args)
        .arg("--history")
        .arg(history)
        .output()
        .expect("run haul");
    eprintln!(
        "haul {args:?}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn download_and_upload_mode_e_8_streams() {
    if skip_without_globus("interop_haul_client") {
        return;
    }
    let srv_dir = tempfile::tempdir().unwrap();
    let local = tempfile::tempdir().unwrap();
    let hist = local.path().join("h.sqlite");
    let data = random_bytes(24 << 20, 7);
    fs::write(srv_dir.path().join("src.bin"), &data).unwrap();
    let srv = GlobusServer::start(srv_dir.path()).expect("start globus-gridftp-server");

    let dl = local.path().join("dl.bin");
    let out = haul(
        &[
            "cp",
            "-p",
            "8",
            "--json",
            &srv.url("src.bin"),
            dl.to_str().unwrap(),
        ],
        &hist,
    );
    assert!(out.status.success(), "{}", srv.diagnostics());
    assert_eq!(fs::read(&dl).unwrap(), data, "download differs");
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["verified_files"], 1);
    assert_eq!(j["checksum"], "MD5", "Globus offers MD5, not haul's XXHC");
    assert!(
        srv.log_contents().contains("Parallelism=8"),
        "client asked for 8 streams"
    );

    let out = haul(
        &["cp", "-p", "8", dl.to_str().unwrap(), &srv.url("up.bin")],
        &hist,
    );
    assert!(out.status.success(), "{}", srv.diagnostics());
    assert_eq!(
        fs::read(srv_dir.path().join("up.bin")).unwrap(),
        data,
        "upload differs"
    );
}

#[test]
fn trees_both_ways_with_concurrency_and_pipelining() {
    if skip_without_globus("interop_haul_client") {
        return;
    }
    let srv_dir = tempfile::tempdir().unwrap();
    let local = tempfile::tempdir().unwrap();
    let hist = local.path().join("h.sqlite");
    let tree = srv_dir.path().join("tree");
    for i in 0..60u64 {
        let d = tree.join(format!("d{}", i % 3));
        fs::create_dir_all(&d).unwrap();
        fs::write(
            d.join(format!("f{i}")),
            random_bytes((i as usize * 7919) % 300_000, i + 1),
        )
        .unwrap();
    }
    fs::create_dir_all(tree.join("empty")).unwrap();
    let srv = GlobusServer::start(srv_dir.path()).expect("start globus-gridftp-server");

    let dl = local.path().join("tree");
    let out = haul(
        &[
            "cp",
            "-r",
            "-c",
            "4",
            "--pipeline",
            "8",
            "-p",
            "2",
            &srv.url("tree"),
            dl.to_str().unwrap(),
        ],
        &hist,
    );
    assert!(out.status.success(), "{}", srv.diagnostics());
    assert_trees_equal(&tree, &dl);

    let out = haul(
        &[
            "cp",
            "-r",
            "-c",
            "3",
            "--pipeline",
            "4",
            dl.to_str().unwrap(),
            &srv.url("back"),
        ],
        &hist,
    );
    assert!(out.status.success(), "{}", srv.diagnostics());
    assert_trees_equal(&dl, &srv_dir.path().join("back"));
}

#[test]
fn a_file_split_in_pieces_comes_from_globus_by_eret_and_verifies_whole() {
    if skip_without_globus("interop_haul_client") {
        return;
    }
    let srv_dir = tempfile::tempdir().unwrap();
    let local = tempfile::tempdir().unwrap();
    let hist = local.path().join("h.sqlite");
    let data = random_bytes((21 << 20) / 2, 11);
    fs::write(srv_dir.path().join("big.bin"), &data).unwrap();
    let srv = GlobusServer::start(srv_dir.path()).expect("start globus-gridftp-server");
    let dl = local.path().join("big.bin");
    let out = haul(
        &[
            "cp",
            "-c",
            "3",
            "-p",
            "2",
            "--piece-size",
            "1M",
            "--json",
            &srv.url("big.bin"),
            dl.to_str().unwrap(),
        ],
        &hist,
    );
    assert!(out.status.success(), "{}", srv.diagnostics());
    assert_eq!(fs::read(&dl).unwrap(), data, "pieces reassembled wrong");
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["pieces"], 10, "10.5 MiB in 1 MiB pieces");
    assert_eq!(
        j["verified_files"], 1,
        "Globus's MD5 of the whole file matches ours"
    );
    assert!(
        srv.log_contents().contains("ERET"),
        "pieces are ERETs: {}",
        srv.diagnostics()
    );
    // With 8 MiB pieces the file is planned whole (under two pieces), and the end-of-transfer
    // cut hands it out in shares of at least 1 MiB over the three channels instead.
    fs::remove_file(&dl).unwrap();
    let out = haul(
        &[
            "cp",
            "-c",
            "3",
            "--piece-size",
            "8M",
            "--json",
            &srv.url("big.bin"),
            dl.to_str().unwrap(),
        ],
        &hist,
    );
    assert!(out.status.success(), "{}", srv.diagnostics());
    assert_eq!(fs::read(&dl).unwrap(), data, "cut shares reassembled wrong");
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        j["pieces"].as_u64().unwrap() >= 2,
        "the whole file was not cut: {}",
        j["pieces"]
    );
    assert_eq!(j["verified_files"], 1);
}

#[test]
fn third_party_between_two_globus_servers() {
    if skip_without_globus("interop_haul_client") {
        return;
    }
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    let hist = a.path().join("h.sqlite");
    let data = random_bytes(9 << 20, 3);
    fs::write(a.path().join("src.bin"), &data).unwrap();
    let sa = GlobusServer::start(a.path()).expect("start server a");
    let sb = GlobusServer::start(b.path()).expect("start server b");
    let out = haul(
        &["cp", "-p", "4", &sa.url("src.bin"), &sb.url("dst.bin")],
        &hist,
    );
    assert!(
        out.status.success(),
        "{}\n{}",
        sa.diagnostics(),
        sb.diagnostics()
    );
    assert_eq!(fs::read(b.path().join("dst.bin")).unwrap(), data);
}

#[test]
fn missing_path_and_refused_connection_name_the_cause() {
    if skip_without_globus("interop_haul_client") {
        return;
    }
    let srv_dir = tempfile::tempdir().unwrap();
    let local = tempfile::tempdir().unwrap();
    let hist = local.path().join("h.sqlite");
    let srv = GlobusServer::start(srv_dir.path()).expect("start globus-gridftp-server");
    let out = haul(
        &[
            "cp",
            &srv.url("nope.bin"),
            local.path().join("x").to_str().unwrap(),
        ],
        &hist,
    );
    assert_eq!(out.status.code(), Some(5), "no such path exit code");
    assert!(String::from_utf8_lossy(&out.stderr).contains("No such file"));
    assert!(!local.path().join("x").exists());
    let port = free_port();
    let out = haul(
        &[
            "cp",
            &format!("ftp://127.0.0.1:{port}/x"),
            local.path().join("x").to_str().unwrap(),
        ],
        &hist,
    );
    assert_eq!(out.status.code(), Some(3), "connection refused exit code");
    assert!(String::from_utf8_lossy(&out.stderr).contains("refused"));
}

fn assert_trees_equal(a: &Path, b: &Path) {
    let mut n = 0;
    for e in fs::read_dir(a).unwrap() {
        let e = e.unwrap();
        let other = b.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            assert!(other.is_dir(), "{} missing", other.display());
            assert_trees_equal(&e.path(), &other);
        } else {
            assert_eq!(
                fs::read(e.path()).unwrap(),
                fs::read(&other).unwrap(),
                "{} differs",
                other.display()
            );
            n += 1;
        }
    }
    let count = fs::read_dir(b)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_type().unwrap().is_file())
        .count();
    assert_eq!(n, count, "{} has extra files", b.display());
}
