//! `haul serve --relay-allow` as a split-TCP relay between `haul cp` and haul origins, through
//! one relay and through two: downloads, uploads, listings, checksums and a third-party copy,
//! byte-identical; every refused case with its clear error and nothing moved; and a relay
//! killed mid-file, after which `--resume` through another relay completes the file without
//! re-sending what had arrived, verified end to end.
mod common;

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::haul::*;

/// An origin serving (and accepting uploads into) `root`, anonymous.
fn origin(root: &Path) -> Serve {
    serve(root, &["--anonymous", "--anonymous-write"])
}

/// A relay's flags: anonymous users may relay to loopback next hops.
const RELAY: [&str; 4] = [
    "--anonymous",
    "--relay-allow",
    "127.0.0.1",
    "--relay-anonymous",
];

/// A relay for anonymous users to loopback next hops, with `extra` flags.
fn relay(root: &Path, extra: &[&str]) -> Serve {
    let mut args = RELAY.to_vec();
    args.extend_from_slice(extra);
    serve(root, &args)
}

fn ok(out: &std::process::Output) -> String {
    assert!(
        out.status.success(),
        "haul cp failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn failed(out: &std::process::Output) -> String {
    assert!(!out.status.success(), "haul cp should have failed");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn one_relay_carries_downloads_uploads_listings_and_checksums() {
    let (o, r, local) = (dirs(), dirs(), dirs());
    let hist = local.path().join("h.sqlite");
    let data = random_bytes(9_000_011, 1);
    fs::create_dir(o.path().join("tree")).unwrap();
    fs::write(o.path().join("tree/a.bin"), &data).unwrap();
    fs::write(o.path().join("tree/b.bin"), random_bytes(70_000, 2)).unwrap();
    let (os, rs) = (
        origin(o.path()),
        relay(r.path(), &["--relay-parallelism", "3"]),
    );
    let via = |p: &str| format!("ftp://{}/ftp://{}/{p}", rs.addr, os.addr);

    // Download, 4 streams on the first leg, 3 on the next; verified against the origin's
    // checksum, which the relay passes through.
    let dst = local.path().join("a.bin");
    let s = ok(&cp(
        &["-p", "4", &via("tree/a.bin"), dst.to_str().unwrap()],
        &hist,
    ));
    assert!(s.contains("1 of 1 verified"), "{s}");
    assert!(fs::read(&dst).unwrap() == data, "relayed download differs");

    // Upload through the relay: it lands at the origin, nothing at the relay.
    let s = ok(&cp(&[dst.to_str().unwrap(), &via("up.bin")], &hist));
    assert!(s.contains("1 of 1 verified"), "{s}");
    assert!(
        fs::read(o.path().join("up.bin")).unwrap() == data,
        "relayed upload differs"
    );

    // A recursive download lists the origin's directory through the relay.
    let tree = local.path().join("tree");
    let s = ok(&cp(&["-r", &via("tree/"), tree.to_str().unwrap()], &hist));
    assert!(s.contains("2 of 2 verified"), "{s}");
    assert!(fs::read(tree.join("b.bin")).unwrap() == random_bytes(70_000, 2));

    // The relay kept nothing on its own disk.
    assert_eq!(
        fs::read_dir(r.path()).unwrap().count(),
        0,
        "the relay wrote to disk"
    );

    // SIZE and CKSM answered by the origin, through the relay.
    let mut c = RawControl::connect(&rs.addr);
    assert!(c.cmd("USER anonymous").starts_with("331"));
    assert!(c.cmd("PASS x@").starts_with("230"));
    let size = c.cmd(&format!("SIZE /ftp://{}/tree/a.bin", os.addr));
    assert_eq!(size, format!("213 {}", data.len()));
    let ck = c.cmd(&format!("CKSM MD5 0 -1 /ftp://{}/tree/a.bin", os.addr));
    let mut direct = RawControl::connect(&os.addr);
    direct.cmd("USER anonymous");
    direct.cmd("PASS x@");
    assert_eq!(ck, direct.cmd("CKSM MD5 0 -1 /tree/a.bin"));
}

/// A relayed file costs one login at the relay and one at the origin: the session `haul cp`
/// opened to look at the file (and the relay's session to the origin behind it) carries the
/// transfer too, where a second login cost both legs about five round trips each.
#[test]
fn a_relayed_file_logs_in_once_at_each_hop() {
    let (o, r, local) = (dirs(), dirs(), dirs());
    let data = random_bytes(3_000_017, 5);
    fs::write(o.path().join("f.bin"), &data).unwrap();
    let (os, om) = serve_with_metrics(o.path(), &["--anonymous"]);
    let (rs, rm) = serve_with_metrics(r.path(), &RELAY);
    let dst = local.path().join("f.bin");
    let url = format!("ftp://{}/ftp://{}/f.bin", rs.addr, os.addr);
    let s = ok(&cp(
        &["-p", "2", &url, dst.to_str().unwrap()],
        &local.path().join("h.sqlite"),
    ));
    assert!(s.contains("1 of 1 verified"), "{s}");
    assert!(fs::read(&dst).unwrap() == data, "relayed download differs");
    for (who, m) in [("relay", &rm), ("origin", &om)] {
        let opened = metric(&http_get(m, "/metrics"), "haul_serve_sessions_opened_total");
        assert_eq!(opened, 1.0, "{who}: sessions opened");
    }
}

#[test]
fn two_relays_in_a_row_carry_both_directions_and_a_mode_s_client() {
    let (o, r1, r2, local) = (dirs(), dirs(), dirs(), dirs());
    let hist = local.path().join("h.sqlite");
    let data = random_bytes(5_000_000, 3);
    fs::write(o.path().join("f.bin"), &data).unwrap();
    let os = origin(o.path());
    let (s1, s2) = (relay(r1.path(), &[]), relay(r2.path(), &[]));
    let via = |p: &str| format!("ftp://{}/ftp://{}/ftp://{}/{p}", s1.addr, s2.addr, os.addr);
    let dst = local.path().join("f.bin");
    let s = ok(&cp(
        &["-p", "2", "--json", &via("f.bin"), dst.to_str().unwrap()],
        &hist,
    ));
    let j: serde_json::Value = serde_json::from_str(&s).unwrap();
    assert_eq!(j["verified_files"], 1);
    let hops: Vec<String> = [&s1.addr, &s2.addr, &os.addr]
        .iter()
        .map(|a| format!("ftp://{a}"))
        .collect();
    assert_eq!(j["route"]["source"], serde_json::json!(hops), "{s}");
    assert_eq!(j["route"]["destination"], serde_json::json!(["local"]));
    assert!(
        fs::read(&dst).unwrap() == data,
        "download over two relays differs"
    );
    // The history keeps the route.
    let show = Command::new(env!("CARGO_BIN_EXE_haul"))
        .args(["history", "--show", "1", "--history"])
        .arg(&hist)
        .output()
        .unwrap();
    let show = String::from_utf8_lossy(&show.stdout);
    let want = format!("route        source via {}", hops.join(" -> "));
    assert!(show.contains(&want), "{show}");
    let s = ok(&cp(&[dst.to_str().unwrap(), &via("back.bin")], &hist));
    assert!(s.contains("1 of 1 verified"), "{s}");
    assert!(fs::read(o.path().join("back.bin")).unwrap() == data);

    // A MODE S client (RFC 959 stream mode) through two relays gets the bytes in order.
    let mut c = RawControl::connect(&s1.addr);
    c.cmd("USER anonymous");
    c.cmd("PASS x@");
    assert!(c.cmd("TYPE I").starts_with("200"));
    let pasv = c.cmd("PASV");
    let addr = haul_proto::hostport::find_in_reply(&pasv).expect("PASV address");
    let mut conn = std::net::TcpStream::connect(addr).unwrap();
    let retr = c.cmd(&format!("RETR /ftp://{}/ftp://{}/f.bin", s2.addr, os.addr));
    assert!(retr.starts_with("150"), "{retr}");
    let mut got = Vec::new();
    std::io::Read::read_to_end(&mut conn, &mut got).unwrap();
    let end = c.reply();
    assert!(end.starts_with("226"), "{end}");
    assert!(got == data, "MODE S bytes over two relays differ");
}

#[test]
fn a_third_party_copy_into_a_relayed_destination() {
    let (a, b, r, local) = (dirs(), dirs(), dirs(), dirs());
    let hist = local.path().join("h.sqlite");
    let data = random_bytes(3_000_000, 4);
    fs::write(a.path().join("src.bin"), &data).unwrap();
    let (sa, sb) = (origin(a.path()), origin(b.path()));
    let rs = relay(r.path(), &[]);
    let src = format!("ftp://{}/src.bin", sa.addr);
    let dst = format!("ftp://{}/ftp://{}/dst.bin", rs.addr, sb.addr);
    ok(&cp(&[&src, &dst], &hist));
    assert!(
        fs::read(b.path().join("dst.bin")).unwrap() == data,
        "third-party copy differs"
    );
}

/// A file at an origin, a relay in front of it, and the nested URL of the file.
struct Refusal {
    _dirs: Vec<tempfile::TempDir>,
    _origin: Serve,
    relay: Serve,
    url: String,
    dst: std::path::PathBuf,
    hist: std::path::PathBuf,
}

fn refusal(relay_flags: &[&str]) -> Refusal {
    let (o, r, local) = (dirs(), dirs(), dirs());
    fs::write(o.path().join("f.bin"), b"not to be moved").unwrap();
    let os = origin(o.path());
    let rs = serve(r.path(), relay_flags);
    let url = format!("ftp://{}/ftp://{}/f.bin", rs.addr, os.addr);
    let (dst, hist) = (local.path().join("f.bin"), local.path().join("h.sqlite"));
    Refusal {
        _dirs: vec![o, r, local],
        _origin: os,
        relay: rs,
        url,
        dst,
        hist,
    }
}

#[test]
fn every_refused_case_says_why_and_moves_nothing() {
    // Relaying off: a plain server.
    let t = refusal(&["--anonymous"]);
    let e = failed(&cp(&[&t.url, t.dst.to_str().unwrap()], &t.hist));
    assert!(
        e.contains("does not relay") && e.contains("--relay-allow"),
        "{e}"
    );
    assert!(!t.dst.exists());

    // PLUT is not relayed: the client says so before anything moves.
    let t = refusal(&[
        "--anonymous",
        "--relay-allow",
        "127.0.0.1",
        "--relay-anonymous",
    ]);
    let e = failed(&cp(
        &["--transport", "plut", &t.url, t.dst.to_str().unwrap()],
        &t.hist,
    ));
    assert!(e.contains("not carried through relays"), "{e}");
    assert!(!t.dst.exists());

    // Anonymous users without --relay-anonymous.
    let t = refusal(&["--anonymous", "--relay-allow", "127.0.0.1"]);
    let e = failed(&cp(&[&t.url, t.dst.to_str().unwrap()], &t.hist));
    assert!(
        e.contains("anonymous") && e.contains("--relay-anonymous"),
        "{e}"
    );
    assert!(!t.dst.exists());

    // A named user without the `relay` permission.
    let users = dirs();
    let file = users.path().join("users");
    let hash = Command::new(env!("CARGO_BIN_EXE_haul"))
        .args(["serve", "--hash-password"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().unwrap().write_all(b"pw\n")?;
            c.wait_with_output()
        })
        .unwrap();
    let hash = String::from_utf8(hash.stdout).unwrap();
    fs::write(&file, format!("bob:{}:rw\n", hash.trim())).unwrap();
    let t = refusal(&[
        "--users",
        file.to_str().unwrap(),
        "--relay-allow",
        "127.0.0.1",
    ]);
    let url = t.url.replacen("ftp://", "ftp://bob:pw@", 1);
    let e = failed(&cp(&[&url, t.dst.to_str().unwrap()], &t.hist));
    assert!(e.contains("bob may not relay"), "{e}");

    // A next hop off the allow-list.
    let t = refusal(&[
        "--anonymous",
        "--relay-anonymous",
        "--relay-allow",
        "10.255.255.1",
    ]);
    let e = failed(&cp(&[&t.url, t.dst.to_str().unwrap()], &t.hist));
    assert!(e.contains("not on this relay's allow-list"), "{e}");
    assert!(!t.dst.exists());

    // Too many relaying sessions: one session holds the only place.
    let t = refusal(&[
        "--anonymous",
        "--relay-anonymous",
        "--relay-allow",
        "127.0.0.1",
        "--relay-sessions",
        "1",
    ]);
    let mut holder = RawControl::connect(&t.relay.addr);
    holder.cmd("USER anonymous");
    holder.cmd("PASS x@");
    let inner = t.url.split_once("/ftp://").unwrap().1;
    assert!(holder
        .cmd(&format!("SIZE /ftp://{inner}"))
        .starts_with("213"));
    let e = failed(&cp(&[&t.url, t.dst.to_str().unwrap()], &t.hist));
    assert!(
        e.contains("Relay busy") && e.contains("--relay-sessions"),
        "{e}"
    );
    assert!(!t.dst.exists());
    // The place is free again once the holder leaves.
    holder.cmd("QUIT");
    drop(holder);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let out = cp(&[&t.url, t.dst.to_str().unwrap()], &t.hist);
        if out.status.success() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the relay place was never given back"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_relay_killed_mid_file_then_resume_through_another_completes_verified() {
    let (o, r1, r2, local) = (dirs(), dirs(), dirs(), dirs());
    let hist = local.path().join("h.sqlite");
    let size = 48 << 20;
    let data = random_bytes(size, 5);
    fs::write(o.path().join("big.bin"), &data).unwrap();
    let os = origin(o.path());
    let mut first = relay(r1.path(), &[]);
    let second = relay(r2.path(), &[]);
    let dst = local.path().join("big.bin");
    let journal = local.path().join("big.bin.haul-part.ranges");
    // 12 MiB/s: the 48 MiB file takes ~4 s, so the kill lands mid-file.
    let url1 = format!("ftp://{}/ftp://{}/big.bin", first.addr, os.addr);
    let mut child = Command::new(env!("CARGO_BIN_EXE_haul"))
        .args(["cp", "-p", "4", "--max-rate", "12MiB/s", &url1])
        .arg(&dst)
        .arg("--history")
        .arg(&hist)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while held(&journal) < 8 << 20 {
        assert!(Instant::now() < deadline, "download never reached 8 MiB");
        assert!(
            child.try_wait().unwrap().is_none(),
            "haul cp ended too soon"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    first.kill();
    let out = child.wait_with_output().unwrap();
    let e = failed(&out);
    eprintln!("haul cp after the relay died: {e}");
    assert!(!dst.exists(), "an unverified file must not appear: {e}");
    let had = held(&journal);
    assert!(
        had > 0 && had < size as u64,
        "journal holds part of the file: {had}"
    );

    let url2 = format!("ftp://{}/ftp://{}/big.bin", second.addr, os.addr);
    let out = cp(
        &[
            "--resume",
            "--json",
            "-p",
            "4",
            &url2,
            dst.to_str().unwrap(),
        ],
        &hist,
    );
    let j: serde_json::Value = serde_json::from_str(&ok(&out)).unwrap();
    let moved = j["bytes"].as_u64().unwrap();
    assert!(
        moved <= size as u64 - had,
        "resume moved {moved}, {had} were held"
    );
    assert_eq!(j["verified_files"], 1);
    assert!(fs::read(&dst).unwrap() == data, "resumed file differs");
}

fn held(journal: &Path) -> u64 {
    fs::read_to_string(journal)
        .ok()
        .and_then(|s| haul_proto::RangeSet::parse(&s).ok())
        .map_or(0, |r| r.covered())
}

fn dirs() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

#[test]
fn tls_and_plain_legs_nest_in_any_order() {
    let (o, r, local) = (dirs(), dirs(), dirs());
    let hist = local.path().join("h.sqlite");
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let (cert, key) = (local.path().join("cert.pem"), local.path().join("key.pem"));
    fs::write(&cert, ck.cert.pem()).unwrap();
    fs::write(&key, ck.key_pair.serialize_pem()).unwrap();
    let (cert_s, key_s) = (cert.to_str().unwrap(), key.to_str().unwrap());
    let data = random_bytes(4_000_000, 6);
    fs::write(o.path().join("f.bin"), &data).unwrap();
    let tls = ["--tls-cert", cert_s, "--tls-key", key_s];
    let os = serve(
        o.path(),
        &[&["--anonymous", "--anonymous-write"][..], &tls].concat(),
    );
    let rs = relay(r.path(), &[&tls[..], &["--relay-ca", cert_s]].concat());
    let port = |s: &Serve| s.addr.rsplit(':').next().unwrap().to_string();
    let (op, rp) = (port(&os), port(&rs));
    for (outer, inner) in [("haul", "haul"), ("ftp", "haul"), ("haul", "ftp")] {
        let url = format!("{outer}://localhost:{rp}/{inner}://localhost:{op}/f.bin");
        let dst = local.path().join(format!("{outer}-{inner}.bin"));
        let s = ok(&cp(&["--ca", cert_s, &url, dst.to_str().unwrap()], &hist));
        assert!(s.contains("1 of 1 verified"), "{url}: {s}");
        assert!(fs::read(&dst).unwrap() == data, "{url}: bytes differ");
        let up = format!("{outer}://localhost:{rp}/{inner}://localhost:{op}/up-{outer}-{inner}");
        ok(&cp(&["--ca", cert_s, dst.to_str().unwrap(), &up], &hist));
        let stored = fs::read(o.path().join(format!("up-{outer}-{inner}"))).unwrap();
        assert!(stored == data, "{up}: bytes differ");
    }
}

#[test]
fn a_plut_leg_carries_downloads_to_a_tcp_client() {
    let (o, r, local) = (dirs(), dirs(), dirs());
    let hist = local.path().join("h.sqlite");
    let data = random_bytes(6_000_000, 7);
    fs::write(o.path().join("f.bin"), &data).unwrap();
    let os = origin(o.path());
    let plut = ["--relay-plut", "127.0.0.1", "--relay-plut-rate", "2gbit"];
    let rs = relay(r.path(), &plut);
    let url = format!("ftp://{}/ftp://{}/f.bin", rs.addr, os.addr);
    let dst = local.path().join("f.bin");
    let s = ok(&cp(&["-p", "4", &url, dst.to_str().unwrap()], &hist));
    assert!(s.contains("1 of 1 verified"), "{s}");
    assert!(
        fs::read(&dst).unwrap() == data,
        "bytes over the PLUT leg differ"
    );

    // The leg really is PLUT: an origin that refuses PLUT (it requires TLS) fails the
    // download with its refusal, where a TCP leg would have carried it.
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let (cert, key) = (local.path().join("cert.pem"), local.path().join("key.pem"));
    fs::write(&cert, ck.cert.pem()).unwrap();
    fs::write(&key, ck.key_pair.serialize_pem()).unwrap();
    let (c, k) = (cert.to_str().unwrap(), key.to_str().unwrap());
    let tls_origin = serve(
        o.path(),
        &[
            "--anonymous",
            "--tls-cert",
            c,
            "--tls-key",
            k,
            "--require-tls",
        ],
    );
    let port = tls_origin.addr.rsplit(':').next().unwrap();
    let rs = relay(r.path(), &[&plut[..], &["--relay-ca", c]].concat());
    let url = format!("ftp://{}/haul://localhost:{port}/f.bin", rs.addr);
    let e = failed(&cp(
        &[&url, local.path().join("g.bin").to_str().unwrap()],
        &hist,
    ));
    assert!(e.contains("PLUT"), "{e}");
}
