//! `haul cp` against a hostile server (`common/hostile.rs`): a PASV reply naming a third host,
//! a data connection injected from another address, a file sent short, and directory trees that
//! never end. Each test names the finding of the client-hardening issue it covers.
mod common;

use common::haul::*;
use common::hostile::{self, Config, Endless, Hostile, OTHER_HOST};

use std::collections::BTreeMap;
use std::fs;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

/// A run that must end: a client looping on hostile input fails the test instead of hanging it.
const LIMIT: Duration = Duration::from_secs(60);

fn run(args: &[&str], dir: &Path) -> Output {
    cp_within(args, &dir.join("h.sqlite"), LIMIT)
}

/// Downloads `/f` from `srv` into `dir/name` with `flags`.
fn fetch(srv: &Hostile, flags: &[&str], dir: &Path, name: &str) -> (Output, PathBuf) {
    let (url, dst) = (srv.url("/f"), dir.join(name));
    let mut args = flags.to_vec();
    args.extend([url.as_str(), dst.to_str().unwrap()]);
    (run(&args, dir), dst)
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Finding 11: an upload connects to the control connection's peer with PASV's port, never to the
/// host the reply names.
#[test]
fn upload_ignores_the_host_a_pasv_reply_names() {
    let dir = tempfile::tempdir().unwrap();
    let data = random_bytes(300_000, 1);
    let src = dir.path().join("src");
    fs::write(&src, &data).unwrap();
    let srv = hostile::start(Config {
        pasv_ip: Some(OTHER_HOST),
        ..Config::default()
    });
    let out = run(
        &["-p", "2", src.to_str().unwrap(), &srv.url("/up")],
        dir.path(),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let log = srv.log();
    assert_eq!(
        log.decoy_hits, 0,
        "the client connected to the third host PASV named"
    );
    assert_eq!(log.stored.get("/up"), Some(&data));
}

/// Finding 11: `--trust-pasv-address` restores connecting where PASV says.
#[test]
fn trust_pasv_address_connects_where_the_reply_says() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    fs::write(&src, random_bytes(10_000, 2)).unwrap();
    let srv = hostile::start(Config {
        pasv_ip: Some(OTHER_HOST),
        ..Config::default()
    });
    let out = run(
        &[
            "-p",
            "2",
            "--trust-pasv-address",
            src.to_str().unwrap(),
            &srv.url("/up"),
        ],
        dir.path(),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        srv.log().decoy_hits,
        2,
        "both streams went to the address PASV named"
    );
}

/// Finding 11: the MLSD listing of `cp -r` also ignores the host PASV names.
#[test]
fn listing_ignores_the_host_a_pasv_reply_names() {
    let dir = tempfile::tempdir().unwrap();
    let data = random_bytes(5_000, 3);
    let srv = hostile::start(Config {
        pasv_ip: Some(OTHER_HOST),
        ..Config::serving("/tree/a", &data)
    });
    let out_dir = dir.path().join("out");
    let out = run(
        &[
            "-r",
            "-c",
            "1",
            &srv.url("/tree"),
            out_dir.to_str().unwrap(),
        ],
        dir.path(),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(srv.log().listings > 0);
    assert_eq!(
        srv.log().decoy_hits,
        0,
        "the listing went to the third host PASV named"
    );
    assert_eq!(fs::read(out_dir.join("a")).unwrap(), data);
}

/// Finding 11: in a server-to-server transfer the source is sent PORT with the destination's
/// control peer address and its PASV port, not the address the destination's PASV named.
#[test]
fn third_party_port_names_the_destination_control_peer() {
    let dir = tempfile::tempdir().unwrap();
    let data = random_bytes(200_000, 4);
    let src = hostile::start(Config::serving("/f", &data));
    let dst = hostile::start(Config {
        pasv_ip: Some(OTHER_HOST),
        ..Config::default()
    });
    let out = run(&["-c", "1", &src.url("/f"), &dst.url("/g")], dir.path());
    assert!(out.status.success(), "{}", stderr(&out));
    let ports = src.log().ports.clone();
    assert!(!ports.is_empty());
    for p in ports {
        assert_eq!(
            p.ip(),
            IpAddr::V4(Ipv4Addr::LOCALHOST),
            "PORT {p} sent to the source"
        );
    }
    assert_eq!(dst.log().decoy_hits, 0);
    assert_eq!(dst.log().stored.get("/g"), Some(&data));
}

/// Finding 12: a data connection from an address other than the control peer is closed and
/// ignored; the download waits for the server's own and gets the real bytes, even unverified.
#[test]
fn download_ignores_a_data_connection_from_another_host() {
    let dir = tempfile::tempdir().unwrap();
    let real = random_bytes(100_000, 5);
    let forged = vec![0x66; real.len()];
    let srv = hostile::start(Config {
        inject: Some((OTHER_HOST, forged)),
        ..Config::serving("/f", &real)
    });
    let (out, dst) = fetch(&srv, &["--no-verify", "-p", "1"], dir.path(), "f");
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        fs::read(&dst).unwrap() == real,
        "injected bytes were written"
    );
    assert!(
        stderr(&out).contains("127.0.0.2"),
        "the rejected connection is logged"
    );
}

/// Finding 13: a server that sends 360 of the 1,000 bytes it announced, then `226` and a
/// checksum of what it sent, fails the file with the missing range named; nothing lands under
/// the final name.
#[test]
fn a_download_sent_short_fails_and_names_the_missing_range() {
    let dir = tempfile::tempdir().unwrap();
    let srv = hostile::start(Config {
        short: Some(360),
        ..Config::serving("/f", &random_bytes(1000, 6))
    });
    for (flags, name) in [
        (&["-p", "1"][..], "verified"),
        (&["-p", "1", "--no-verify"][..], "unverified"),
    ] {
        let (out, dst) = fetch(&srv, flags, dir.path(), name);
        assert!(
            !out.status.success(),
            "a short file was reported as success ({name})"
        );
        assert!(
            stderr(&out).contains("360-1000"),
            "the missing range is named: {}",
            stderr(&out)
        );
        assert!(!dst.exists(), "a short file landed under its final name");
    }
}

fn endless(same_unique: bool) -> Hostile {
    hostile::start(Config {
        endless: Some(Endless {
            path: "/tree".into(),
            same_unique,
        }),
        ..Config::default()
    })
}

/// Finding 14: a directory that contains itself forever stops at the depth limit (64 by
/// default, `--max-depth`), with the path named.
#[test]
fn a_tree_that_never_ends_stops_at_the_depth_limit() {
    let dir = tempfile::tempdir().unwrap();
    let srv = endless(false);
    let out_dir = dir.path().join("out");
    let out = run(
        &["-r", &srv.url("/tree"), out_dir.to_str().unwrap()],
        dir.path(),
    );
    assert!(!out.status.success());
    let deep = format!("/tree{}", "/d".repeat(65));
    assert!(
        stderr(&out).contains(&deep) && stderr(&out).contains("--max-depth"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        srv.log().listings,
        65,
        "the root and 64 levels below it were listed"
    );
    let out = run(
        &[
            "-r",
            "--max-depth",
            "3",
            &srv.url("/tree"),
            out_dir.to_str().unwrap(),
        ],
        dir.path(),
    );
    assert!(!out.status.success());
    assert!(stderr(&out).contains("/tree/d/d/d/d"), "{}", stderr(&out));
}

/// Finding 14: a directory whose `Unique` fact repeats one already walked is a loop, named.
#[test]
fn a_directory_loop_is_refused_with_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let srv = endless(true);
    let out = run(
        &[
            "-r",
            &srv.url("/tree"),
            dir.path().join("out").to_str().unwrap(),
        ],
        dir.path(),
    );
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("loop") && stderr(&out).contains("/tree/d/d"),
        "{}",
        stderr(&out)
    );
    assert!(srv.log().listings <= 3, "the loop was seen at once");
}

/// Finding 14: a listing that names one entry twice is refused, and so is a tree with more
/// entries than `--max-entries`.
#[test]
fn repeated_entries_and_too_many_entries_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let tree: Vec<(String, Vec<u8>)> = (0..20)
        .map(|i| (format!("/tree/f{i:02}"), vec![i as u8; 10]))
        .collect();
    let tree: BTreeMap<String, Vec<u8>> = tree.into_iter().collect();
    let out_dir = dir.path().join("out");
    let srv = hostile::start(Config {
        files: tree.clone(),
        duplicate_entries: true,
        ..Config::default()
    });
    let out = run(
        &["-r", &srv.url("/tree"), out_dir.to_str().unwrap()],
        dir.path(),
    );
    assert!(
        !out.status.success(),
        "a listing that names a file twice was accepted"
    );
    assert!(
        stderr(&out).contains("/tree/f00") && stderr(&out).contains("twice"),
        "{}",
        stderr(&out)
    );
    let srv = hostile::start(Config {
        files: tree,
        ..Config::default()
    });
    let out = run(
        &[
            "-r",
            "--max-entries",
            "10",
            &srv.url("/tree"),
            out_dir.to_str().unwrap(),
        ],
        dir.path(),
    );
    assert!(!out.status.success());
    assert!(stderr(&out).contains("--max-entries"), "{}", stderr(&out));
    let out = run(
        &[
            "-r",
            "--max-entries",
            "20",
            &srv.url("/tree"),
            out_dir.to_str().unwrap(),
        ],
        dir.path(),
    );
    assert!(
        out.status.success(),
        "20 entries are within --max-entries 20: {}",
        stderr(&out)
    );
}

/// Finding 12, PLUT: a download's UDP flow takes datagrams only from the control connection's
/// peer. A sender elsewhere that knows the session id (it travels on the control channel) is
/// dropped, not locked onto, and the server's own flow delivers the file.
#[test]
fn a_plut_download_ignores_a_flow_from_another_host() {
    let dir = tempfile::tempdir().unwrap();
    let real = random_bytes(200_000, 7);
    let forged = vec![0x66; real.len()];
    let srv = hostile::start(Config {
        inject: Some((OTHER_HOST, forged)),
        plut: true,
        ..Config::serving("/f", &real)
    });
    let (out, dst) = fetch(
        &srv,
        &["--no-verify", "--transport", "plut"],
        dir.path(),
        "f",
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        fs::read(&dst).unwrap() == real,
        "the forged flow was written"
    );
}

/// A server that answers RETR and then never opens the data connection (nor sends anything)
/// cannot hold the client forever: the download fails after `--data-timeout`.
#[test]
fn a_server_that_never_connects_times_out() {
    let dir = tempfile::tempdir().unwrap();
    let srv = hostile::start(Config {
        stall: true,
        ..Config::serving("/f", &[1; 1000])
    });
    let started = std::time::Instant::now();
    let (out, _) = fetch(&srv, &["--data-timeout", "1"], dir.path(), "f");
    assert!(!out.status.success());
    assert!(stderr(&out).contains("no data"), "{}", stderr(&out));
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
}

/// One file, TCP or PLUT, logs in once: the session the planner opened to look at the source
/// carries the transfer too, instead of a second login (seven round trips on a long path).
#[test]
fn one_file_logs_in_once() {
    for flags in [
        &["--no-verify"][..],
        &["--no-verify", "--transport", "plut"][..],
    ] {
        let dir = tempfile::tempdir().unwrap();
        let data = random_bytes(100_000, 3);
        let srv = hostile::start(Config {
            plut: true,
            ..Config::serving("/f", &data)
        });
        let (out, dst) = fetch(&srv, flags, dir.path(), "f");
        assert!(out.status.success(), "{flags:?}: {}", stderr(&out));
        assert!(fs::read(&dst).unwrap() == data, "{flags:?}: bytes differ");
        assert_eq!(srv.log().logins, 1, "{flags:?}: logins");
    }
}
