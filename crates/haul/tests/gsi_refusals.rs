//! Refusals under GSI (`gsiftp://`), with the real `globus-url-copy`, `grid-proxy-init` and
//! `openssl` against `haul serve`: an expired proxy, a revoked user, a proxy chain deeper than
//! `--gsi-max-proxies` and malformed chains are refused at `AUTH GSSAPI` (`535`, the reason
//! named), for downloads and uploads alike, and nothing moves; a data connection presenting
//! another identity is refused while the session's own transfer goes on intact, and `DCAU S`
//! with the right subject passes; a grid-mapfile rewritten and reloaded by `SIGHUP` lets the
//! newly mapped user in and the unmapped one out, while a transfer running across the reload
//! completes byte for byte.
mod common;

use std::fs;
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::globus::*;
use common::gsi::*;
use common::haul::*;

/// The PKI, or None (with `SKIP name: why` printed) when the tools are missing.
fn setup(name: &str) -> Option<Pki> {
    if let Some(why) = globus_available() {
        eprintln!("SKIP {name}: {why}");
        return None;
    }
    let pki = pki();
    if pki.is_none() {
        eprintln!("SKIP {name}: openssl or grid-proxy-init is missing");
    }
    pki
}

/// The extensions of a user certificate.
const USER_EXT: &str = "basicConstraints=critical,CA:false\n\
                        keyUsage=critical,digitalSignature,keyEncipherment,dataEncipherment\n";

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Nothing moved: `path` is absent or empty (globus-url-copy creates its local destination
/// before it connects).
fn nothing_at(path: &Path) {
    assert!(
        !path.exists() || fs::metadata(path).unwrap().len() == 0,
        "{} received bytes",
        path.display()
    );
}

/// A download of `f.bin` and an upload to `up-<tag>.bin` as the holder of `proxy` both fail
/// with a `535` naming `reason`, nothing moves, and the server's log names it too.
fn refused_both_ways(
    pki: &Pki,
    s: &LoggedServe,
    root: &Path,
    proxy: &Path,
    tag: &str,
    reason: &str,
) {
    let local = tempfile::tempdir().unwrap();
    let dl = local.path().join("dl.bin");
    let src = local.path().join("src.bin");
    fs::write(&src, b"bytes that must not land").unwrap();
    let up = format!("up-{tag}.bin");
    for (what, args) in [
        ("download", [s.url("f.bin"), file_url(&dl)]),
        ("upload", [file_url(&src), s.url(&up)]),
    ] {
        let out = guc(pki, proxy, &[&args[0], &args[1]]);
        let err = stderr(&out);
        assert!(!out.status.success(), "{tag} {what} was let in");
        assert!(
            err.contains("535") && err.contains(reason),
            "{tag} {what}: {err}"
        );
    }
    nothing_at(&dl);
    assert!(!root.join(&up).exists(), "{tag}: the upload landed");
    assert_eq!(fs::read(root.join("f.bin")).unwrap(), b"the served file");
    s.wait_log(reason);
}

#[test]
fn an_expired_proxy_is_refused_and_nothing_moves() {
    let Some(pki) = setup("an_expired_proxy_is_refused_and_nothing_moves") else {
        return;
    };
    let root = tempfile::tempdir().unwrap();
    fs::write(root.path().join("f.bin"), b"the served file").unwrap();
    let s = serve_gsi_logged(&pki, root.path(), &[]);
    // A proxy that ends 3 s from now: globus-url-copy checks it (still valid) when it starts
    // the GSS exchange, and a relay holds its handshake until the proxy has expired, so it is
    // haul serve that sees an expired certificate.
    let expiring = proxy_by_hand(&pki, "user", &utc_in(-3600), &utc_in(3));
    let until = Instant::now() + Duration::from_millis(4500);
    let local = tempfile::tempdir().unwrap();
    let dl = local.path().join("dl.bin");
    let src = local.path().join("src.bin");
    fs::write(&src, b"bytes that must not land").unwrap();
    let down = format!("gsiftp://127.0.0.1:{}/f.bin", gated_relay(&s.addr, until));
    let upto = format!("gsiftp://127.0.0.1:{}/up.bin", gated_relay(&s.addr, until));
    let attempts = [
        ("download", [down, file_url(&dl)]),
        ("upload", [file_url(&src), upto]),
    ];
    let outs: Vec<(&str, Output)> = std::thread::scope(|sc| {
        let hs: Vec<_> = attempts
            .iter()
            .map(|(what, a)| {
                let (pki, expiring) = (&pki, &expiring);
                sc.spawn(move || (*what, guc(pki, expiring, &[&a[0], &a[1]])))
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (what, out) in &outs {
        let err = stderr(out);
        assert!(
            !out.status.success(),
            "{what} with an expired proxy was let in"
        );
        assert!(
            err.contains("535") && err.contains("expired at"),
            "{what}: {err}"
        );
    }
    nothing_at(&dl);
    assert!(!root.path().join("up.bin").exists());
    s.wait_log("CN=Test User/CN=4242 expired at");

    // The same proxy's user with a fresh proxy is let in: the refusal was the expiry.
    let fresh = proxy(&pki, "user");
    let out = guc(&pki, &fresh, &[&s.url("f.bin"), &file_url(&dl)]);
    assert_success(&out, "download with a fresh proxy");
}

#[test]
fn a_revoked_user_is_refused_and_nothing_moves() {
    let Some(pki) = setup("a_revoked_user_is_refused_and_nothing_moves") else {
        return;
    };
    issue(
        pki.dir.path(),
        "trusted",
        "revoked",
        "Revoked User",
        USER_EXT,
    );
    map_users(
        &pki,
        &[("Test User", "gsiuser"), ("Revoked User", "revoked")],
    );
    let revoked = proxy(&pki, "revoked");
    let user = proxy(&pki, "user");
    revoke(&pki, "revoked");
    let root = tempfile::tempdir().unwrap();
    fs::write(root.path().join("f.bin"), b"the served file").unwrap();
    let s = serve_gsi_logged(&pki, root.path(), &[]);
    refused_both_ways(
        &pki,
        &s,
        root.path(),
        &revoked,
        "revoked",
        "certificate /O=Grid/OU=haul test/CN=Revoked User was revoked by /O=Grid/OU=haul test/CN=trusted",
    );
    // A user the CRL does not list still gets in.
    let local = tempfile::tempdir().unwrap();
    let out = guc(
        &pki,
        &user,
        &[&s.url("f.bin"), &file_url(&local.path().join("ok"))],
    );
    assert_success(&out, "download by a user the CRL does not list");
}

#[test]
fn too_deep_and_malformed_chains_are_refused_and_nothing_moves() {
    let Some(pki) = setup("too_deep_and_malformed_chains_are_refused_and_nothing_moves") else {
        return;
    };
    let user = proxy(&pki, "user");
    // A proxy of the proxy, by grid-proxy-init signing with the first proxy.
    let deep = pki.path("deep-proxy.pem");
    run(Command::new("grid-proxy-init")
        .env("X509_CERT_DIR", pki.certs())
        .arg("-cert")
        .arg(&user)
        .arg("-key")
        .arg(&user)
        .arg("-out")
        .arg(&deep)
        .args(["-hours", "1", "-q"]));
    // The proxy and its key followed by another user's certificate (the client's TLS then
    // sends the proxy alone: a file with no certificate after the key crashes
    // globus-url-copy 10.12), and by a certificate of the user's name that did not sign it.
    let blocks = pem_blocks(&user);
    assert_eq!(blocks.len(), 3, "proxy, key, user certificate");
    let other = fs::read_to_string(pki.path("strangercert.pem")).unwrap();
    let orphan = pki.path("orphan-proxy.pem");
    write_private(
        &orphan,
        format!("{}{}{other}", blocks[0], blocks[1]).as_bytes(),
    );
    issue(pki.dir.path(), "trusted", "twin", "Test User", USER_EXT);
    let forged = pki.path("forged-proxy.pem");
    let twin = fs::read_to_string(pki.path("twincert.pem")).unwrap();
    write_private(
        &forged,
        format!("{}{}{twin}", blocks[0], blocks[1]).as_bytes(),
    );

    let root = tempfile::tempdir().unwrap();
    fs::write(root.path().join("f.bin"), b"the served file").unwrap();
    let s = serve_gsi_logged(&pki, root.path(), &["--gsi-max-proxies", "1"]);
    // One proxy is within the limit, though the proxy it delegates makes two.
    let local = tempfile::tempdir().unwrap();
    let ok = local.path().join("ok.bin");
    let out = guc(&pki, &user, &[&s.url("f.bin"), &file_url(&ok)]);
    assert_success(&out, "download with one proxy under --gsi-max-proxies 1");
    assert_eq!(fs::read(&ok).unwrap(), b"the served file");

    let root = root.path();
    let cases = [
        (
            &deep,
            "deep",
            "proxy chain too deep: 2 proxies, at most 1 accepted",
        ),
        (
            &orphan,
            "orphan",
            "its issuer's certificate was not presented",
        ),
        (
            &forged,
            "forged",
            "signature does not verify with the key of /O=Grid/OU=haul test/CN=Test User",
        ),
    ];
    for (proxy, tag, reason) in cases {
        refused_both_ways(&pki, &s, root, proxy, tag, reason);
    }
}

/// `openssl s_client` connecting to `port` as the holder of `proxy` and sending a line
/// `INTRUDER BYTES`; what it printed.
fn intruder(pki: &Pki, port: u16, proxy: &Path) -> Output {
    let mut cmd = Command::new("sh");
    cmd.args([
        "-c",
        "echo INTRUDER BYTES | openssl s_client -quiet -connect \"127.0.0.1:$0\" \
         -cert \"$1\" -key \"$1\" -cert_chain \"$1\" -CApath \"$2\"",
    ])
    .arg(port.to_string())
    .arg(proxy)
    .arg(pki.certs());
    run_killed_after(cmd, Duration::from_secs(20)).0
}

#[test]
fn dcau_refuses_another_identity_and_passes_the_named_subject() {
    let Some(pki) = setup("dcau_refuses_another_identity_and_passes_the_named_subject") else {
        return;
    };
    map_users(&pki, &[("Test User", "gsiuser"), ("Stranger", "stranger")]);
    let user = proxy(&pki, "user");
    let stranger = proxy(&pki, "stranger");
    let root = tempfile::tempdir().unwrap();
    let data = random_bytes(2 << 20, 5);
    fs::write(root.path().join("f.bin"), &data).unwrap();
    let dport = free_port();
    let ports = format!("{dport}-{dport}");
    let s = serve_gsi_logged(&pki, root.path(), &["--data-ports", &ports]);

    // DCAU S with the right subject: globus-url-copy names the other side's subject in a
    // third-party transfer between two identities (-sc / -dc).
    let out = guc(
        &pki,
        &user,
        &[
            "-dbg",
            "-sc",
            &user.display().to_string(),
            "-dc",
            &stranger.display().to_string(),
            &s.url("f.bin"),
            &s.url("tp.bin"),
        ],
    );
    assert_success(&out, "third-party with DCAU S");
    let err = stderr(&out);
    assert!(
        err.contains("DCAU S /O=Grid/OU=haul test/CN=Stranger"),
        "{err}"
    );
    assert!(
        err.contains("DCAU S /O=Grid/OU=haul test/CN=Test User"),
        "{err}"
    );
    assert_eq!(fs::read(root.path().join("tp.bin")).unwrap(), data);

    // An upload (DCAU A, two streams) held open by its source; meanwhile another identity
    // connects to the session's data port. It is refused, and only the client's bytes land.
    let bin = globus_url_copy_bin().unwrap();
    let mut up = Command::new(bin)
        .env("X509_CERT_DIR", pki.certs())
        .env("X509_USER_PROXY", &user)
        .args(["-p", "2", "-", &s.url("up.bin")])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut feed = up.stdin.take().unwrap();
    feed.write_all(&data).unwrap();
    feed.flush().unwrap();
    let end = Instant::now() + Duration::from_secs(30);
    while !fs::read_dir(root.path()).unwrap().flatten().any(|e| {
        e.file_name() != "f.bin" && e.file_name() != "tp.bin" && e.metadata().unwrap().len() > 0
    }) {
        assert!(Instant::now() < end, "the upload never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    let intr = intruder(&pki, dport, &stranger);
    s.wait_log("data connection authenticated as /O=Grid/OU=haul test/CN=Stranger");
    feed.write_all(&data).unwrap();
    drop(feed);
    let out = up.wait_with_output().unwrap();
    assert_success(&out, "the upload beside the intruder");
    let landed = fs::read(root.path().join("up.bin")).unwrap();
    assert!(
        landed == [data.clone(), data.clone()].concat(),
        "the upload differs"
    );
    assert!(
        !String::from_utf8_lossy(&intr.stdout).contains("INTRUDER"),
        "the intruder was answered"
    );
}

#[test]
fn sighup_reloads_the_grid_mapfile_while_a_transfer_runs() {
    let Some(pki) = setup("sighup_reloads_the_grid_mapfile_while_a_transfer_runs") else {
        return;
    };
    let user = proxy(&pki, "user");
    let stranger = proxy(&pki, "stranger");
    let root = tempfile::tempdir().unwrap();
    let big = random_bytes(48 << 20, 9);
    fs::write(root.path().join("big.bin"), &big).unwrap();
    fs::write(root.path().join("f.bin"), b"the served file").unwrap();
    let s = serve_gsi_logged(&pki, root.path(), &[]);
    let local = tempfile::tempdir().unwrap();

    let before = local.path().join("before.bin");
    let out = guc(&pki, &stranger, &[&s.url("f.bin"), &file_url(&before)]);
    assert!(!out.status.success(), "an unmapped user was let in");
    assert!(stderr(&out).contains("Login incorrect"), "{}", stderr(&out));
    nothing_at(&before);

    // The user's download to stdout, read slowly until the reload is done.
    let bin = globus_url_copy_bin().unwrap();
    let mut dl = Command::new(bin)
        .env("X509_CERT_DIR", pki.certs())
        .env("X509_USER_PROXY", &user)
        .args([&s.url("big.bin"), "-"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut pipe = dl.stdout.take().unwrap();
    let slow = Arc::new(AtomicBool::new(true));
    let got = Arc::new(AtomicUsize::new(0));
    let reader = {
        let (slow, got) = (slow.clone(), got.clone());
        std::thread::spawn(move || {
            let mut all = Vec::new();
            let mut buf = vec![0u8; 64 << 10];
            loop {
                let n = pipe.read(&mut buf).unwrap();
                if n == 0 {
                    break all;
                }
                all.extend_from_slice(&buf[..n]);
                got.store(all.len(), Ordering::SeqCst);
                if slow.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
        })
    };
    let end = Instant::now() + Duration::from_secs(30);
    while got.load(Ordering::SeqCst) < 1 << 20 {
        assert!(Instant::now() < end, "the download never started");
        std::thread::sleep(Duration::from_millis(20));
    }

    // The map now lists the stranger only; written beside and renamed, as an admin would.
    let tmp = pki.path("grid-mapfile.new");
    fs::write(&tmp, "\"/O=Grid/OU=haul test/CN=Stranger\" stranger\n").unwrap();
    fs::rename(&tmp, pki.path("grid-mapfile")).unwrap();
    s.hup();
    s.wait_log("reloaded");

    let after = local.path().join("after.bin");
    let out = guc(&pki, &stranger, &[&s.url("f.bin"), &file_url(&after)]);
    assert_success(&out, "the newly mapped user after SIGHUP");
    assert_eq!(fs::read(&after).unwrap(), b"the served file");
    let gone = local.path().join("gone.bin");
    let out = guc(&pki, &user, &[&s.url("f.bin"), &file_url(&gone)]);
    assert!(!out.status.success(), "a user no longer mapped was let in");
    assert!(stderr(&out).contains("Login incorrect"), "{}", stderr(&out));
    nothing_at(&gone);

    let read = got.load(Ordering::SeqCst);
    assert!(read < big.len(), "the download ended before the reload");
    slow.store(false, Ordering::SeqCst);
    let all = reader.join().unwrap();
    let status = dl.wait().unwrap();
    assert!(status.success(), "the download across the reload failed");
    assert!(all == big, "the download across the reload differs");
}
