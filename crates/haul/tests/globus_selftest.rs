//! Checks the Globus test harness itself against the real Globus programs.
mod common;

use common::haul::*;

use common::globus::*;
use std::fs;

#[test]
fn globus_url_copy_download_and_upload_p8() {
    if skip_without_globus("globus_selftest") {
        return;
    }
    let srv_dir = tempfile::tempdir().unwrap();
    let local = tempfile::tempdir().unwrap();
    let data = random_bytes(10 << 20, 0x9E37_79B9_7F4A_7C15);
    fs::write(srv_dir.path().join("src.bin"), &data).unwrap();

    let srv = GlobusServer::start(srv_dir.path()).expect("start globus-gridftp-server");
    assert!(srv.port() > 0);

    // download, MODE E with 8 streams
    let dl = local.path().join("dl.bin");
    let out = globus_url_copy(&["-p", "8", &srv.url("src.bin"), &file_url(&dl)]);
    if !out.status.success() {
        eprintln!("{}", srv.diagnostics());
    }
    assert_success(&out, "download -p 8");
    assert!(fs::read(&dl).unwrap() == data, "downloaded bytes differ");

    // upload, MODE E with 8 streams
    let out = globus_url_copy(&["-p", "8", &file_url(&dl), &srv.url("up.bin")]);
    if !out.status.success() {
        eprintln!("{}", srv.diagnostics());
    }
    assert_success(&out, "upload -p 8");
    assert!(
        fs::read(srv.root().join("up.bin")).unwrap() == data,
        "uploaded bytes differ"
    );

    // the server log records the dialogue
    assert!(
        srv.log_contents().contains("RETR"),
        "server log lacks RETR:\n{}",
        srv.diagnostics()
    );
}

#[test]
fn two_servers_third_party() {
    if skip_without_globus("globus_selftest") {
        return;
    }
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    let data = random_bytes(3 << 20, 42);
    fs::write(a.path().join("f"), &data).unwrap();
    let sa = GlobusServer::start(a.path()).unwrap();
    let sb = GlobusServer::start(b.path()).unwrap();
    assert_ne!(sa.port(), sb.port());
    let out = globus_url_copy(&["-p", "4", &sa.url("f"), &sb.url("g")]);
    assert_success(&out, "third-party copy");
    assert!(fs::read(sb.root().join("g")).unwrap() == data);
}

#[test]
fn free_port_is_bindable() {
    let p = free_port();
    assert!(p > 0);
    std::net::TcpListener::bind(("127.0.0.1", p)).unwrap();
}
