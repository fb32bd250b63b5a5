//! `haul cp --transport udt` against `haul serve`, both as real binaries over loopback: MODE E
//! over UDT4 connections (Debian's libudt), asked for with `SITE SETNETSTACK udt`. A tree
//! downloaded and uploaded byte for byte and verified end to end, several streams per file, and
//! a clear error where UDT cannot be had.
mod common;

use common::haul::*;

use std::fs;
use std::process::Output;

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Whether Globus's UDT XIO driver is installed (scripts/test.sh installs it); prints why a
/// test skips when it is not.
fn globus_udt_driver() -> bool {
    let found = [
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib/aarch64-linux-gnu",
        "/usr/lib64",
        "/usr/lib",
    ]
    .iter()
    .any(|d| {
        std::path::Path::new(d)
            .join("libglobus_xio_udt_driver.so")
            .exists()
    });
    if !found {
        eprintln!("SKIP: Globus's UDT XIO driver is not installed (apt-get install libglobus-xio-udt-driver)");
    }
    found
}

/// Whether this build has UDT4; prints why a test skips when it has not.
fn udt_built() -> bool {
    if haul_transport::udt::AVAILABLE {
        return true;
    }
    eprintln!("SKIP: haul was built without UDT4 (libudt-dev not installed at build time)");
    false
}

#[test]
fn udt_download_and_upload_are_exact_and_verified() {
    if !udt_built() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    fs::create_dir_all(root.join("tree/sub")).unwrap();
    let big = random_bytes((24 << 20) + 4321, 7);
    fs::write(root.join("tree/big"), &big).unwrap();
    for i in 0..20 {
        fs::write(
            root.join(format!("tree/sub/s{i}")),
            random_bytes(1000 + i * 5000, i as u64),
        )
        .unwrap();
    }
    let s = serve(&root, &["--anonymous", "--anonymous-write"]);
    let hist = dir.path().join("h.sqlite");
    let dl = dir.path().join("dl");
    let url = format!("ftp://{}/tree", s.addr);
    let out = cp(
        &[
            "--transport",
            "udt",
            "-r",
            "-p",
            "3",
            "--json",
            &url,
            dl.to_str().unwrap(),
        ],
        &hist,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let j = json(&out);
    assert_eq!(j["transport"], "udt");
    assert_eq!(j["files"], 21);
    assert_eq!(j["verified_files"], 21);
    assert!(
        fs::read(dl.join("big")).unwrap() == big,
        "download byte-exact"
    );
    for i in 0..20 {
        let name = format!("sub/s{i}");
        assert_eq!(
            fs::read(dl.join(&name)).unwrap(),
            fs::read(root.join("tree").join(&name)).unwrap(),
            "{name}"
        );
    }
    let out = cp(
        &[
            "--transport",
            "udt",
            "-r",
            "-p",
            "2",
            "--json",
            dl.to_str().unwrap(),
            &format!("ftp://{}/up", s.addr),
        ],
        &hist,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(json(&out)["verified_files"], 21);
    assert!(
        fs::read(root.join("up/big")).unwrap() == big,
        "upload byte-exact"
    );
}

#[test]
fn udt_memory_to_memory_moves_every_byte() {
    if !udt_built() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let s = serve(dir.path(), &["--anonymous"]);
    let out = cp(
        &[
            "--transport",
            "udt",
            "--json",
            "--len",
            "64M",
            &format!("ftp://{}/dev/zero", s.addr),
            "/dev/null",
        ],
        &dir.path().join("h.sqlite"),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(json(&out)["bytes"], 64 << 20);
}

#[test]
fn setnetstack_names_tcp_or_udt_and_nothing_else() {
    if !udt_built() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let s = serve(dir.path(), &["--anonymous"]);
    let mut c = RawControl::connect(&s.addr);
    assert!(c.cmd("USER anonymous").starts_with("331"));
    assert!(c.cmd("PASS x").starts_with("230"));
    // Globus names a stack by its XIO drivers, bottom up (`tcp,gsi`); `gsi` is DCAU's.
    assert!(c.cmd("SITE SETNETSTACK udt").starts_with("200"));
    assert!(c.cmd("SITE SETNETSTACK gsi,tcp").starts_with("200"));
    let r = c.cmd("SITE SETNETSTACK carrier-pigeon");
    assert!(r.starts_with("501") && r.contains("tcp and udt"), "{r}");
    // PASV after SETNETSTACK udt offers a UDP port that a UDT client reaches.
    assert!(c.cmd("SITE SETNETSTACK udt").starts_with("200"));
    assert!(c.cmd("EPSV").starts_with("229"));
}

#[test]
fn udt_downloads_from_the_real_globus_server_and_its_udt_driver() {
    use common::globus::{skip_without_globus, GlobusServer};
    if !udt_built() || skip_without_globus("cp_udt") || !globus_udt_driver() {
        return;
    }
    let srv_dir = tempfile::tempdir().unwrap();
    let local = tempfile::tempdir().unwrap();
    let hist = local.path().join("h.sqlite");
    let data = random_bytes((16 << 20) + 99, 11);
    fs::write(srv_dir.path().join("src.bin"), &data).unwrap();
    // Globus loads its UDT XIO driver (libglobus-xio-udt-driver) once it is whitelisted.
    let srv = GlobusServer::start_with(srv_dir.path(), &["-dc-whitelist", "udt,tcp"])
        .expect("start globus-gridftp-server");
    let dl = local.path().join("dl.bin");
    let args = ["--transport", "udt", "-p", "2", "--json"];
    let out = cp(
        &[&args[..], &[&srv.url("src.bin"), dl.to_str().unwrap()]].concat(),
        &hist,
    );
    assert!(
        out.status.success(),
        "{}\n{}",
        stderr(&out),
        srv.diagnostics()
    );
    assert!(fs::read(&dl).unwrap() == data, "download differs");
    assert_eq!(json(&out)["verified_files"], 1);
    // Uploads are not exercised: Globus 13.24 accepts haul's UDT connections to its passive
    // port but never reads them (docs/protocol.md, "UDT data channels").
    let log = srv.log_contents();
    assert!(log.contains("SITE SETNETSTACK udt"), "{log}");

    // A Globus server that does not allow UDT refuses, and haul says so.
    let plain = GlobusServer::start(srv_dir.path()).expect("start globus-gridftp-server");
    let out = cp(
        &[
            "--transport",
            "udt",
            &plain.url("src.bin"),
            dl.to_str().unwrap(),
        ],
        &hist,
    );
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("does not offer udt data channels"), "{err}");
}

#[test]
fn udt_third_party_from_the_real_globus_server_into_haul_serve() {
    use common::globus::{skip_without_globus, GlobusServer};
    if !udt_built() || skip_without_globus("cp_udt") || !globus_udt_driver() {
        return;
    }
    let groot = tempfile::tempdir().unwrap();
    let hroot = tempfile::tempdir().unwrap();
    let data = random_bytes((8 << 20) + 5, 17);
    fs::write(groot.path().join("g.bin"), &data).unwrap();
    let globus = GlobusServer::start_with(groot.path(), &["-dc-whitelist", "udt,tcp"])
        .expect("start globus-gridftp-server");
    let haul = serve(hroot.path(), &["--anonymous", "--anonymous-write"]);
    // haul serve listens (PASV, a UDT listener) and Globus connects to it and sends: both
    // servers were told SITE SETNETSTACK udt by the client in the middle.
    let out = cp(
        &[
            "--transport",
            "udt",
            "-p",
            "2",
            "--json",
            &globus.url("g.bin"),
            &format!("ftp://{}/in.bin", haul.addr),
        ],
        &hroot.path().join("h.sqlite"),
    );
    assert!(
        out.status.success(),
        "{}\n{}",
        stderr(&out),
        globus.diagnostics()
    );
    assert!(
        fs::read(hroot.path().join("in.bin")).unwrap() == data,
        "third-party copy differs"
    );
    assert_eq!(json(&out)["verified_files"], 1);
    assert!(globus.log_contents().contains("SITE SETNETSTACK udt"));
}
