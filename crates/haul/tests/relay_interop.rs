//! Interop of the split-TCP relay (`haul serve --relay-allow`, 002's GridFTP overlay) with the
//! real Globus and gfal2 programs, every file compared byte for byte at the far end:
//! * `globus-url-copy` through a haul relay from and to a haul origin, in stream mode and with
//!   `-p 4` (MODE E), and partial reads (`ERET`);
//! * gfal2 (Python bindings, gridftp plugin, `ftp://` URLs) through a haul relay to a haul origin
//!   and to a `globus-gridftp-server` origin: stat, listdir, checksum, reads, writes, MKD, RMD,
//!   DELE and third-party copies out of and into the relay;
//! * a haul relay in front of `globus-gridftp-server`: `haul cp` and `globus-url-copy` both ways;
//! * two haul relays in a row in front of `globus-gridftp-server`.
//!
//! Each test skips, saying why, when a program it needs is missing. Every relay logs at
//! `HAUL_LOG=info` into a file, which is printed when a test fails; the tests read its
//! `relay leg done` lines to check which leg moved what with how many streams.
mod common;

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::thread;
use std::time::Duration;

use common::globus::*;
use common::haul::*;

/// How long one gfal2 script may run before it is killed.
const GFAL2_TIMEOUT: Duration = Duration::from_secs(60);
/// How long one `globus-url-copy` here may run before it is killed.
const GUC_LIMIT: Duration = Duration::from_secs(40);
/// TCP streams each relay opens on its next leg (`--relay-parallelism`).
const RELAY_STREAMS: u32 = 3;

/// A `haul serve` child whose `HAUL_LOG=info` log goes to a file; killed on drop, its log
/// printed then when the test is failing.
struct Node {
    child: Child,
    name: String,
    /// `127.0.0.1:PORT`.
    addr: String,
    log: PathBuf,
}

impl Node {
    /// Starts `haul serve --root ROOT EXTRA...` on a free loopback port, logging to
    /// `logs/NAME.log`.
    fn start(name: &str, root: &Path, logs: &Path, extra: &[&str]) -> Node {
        let log = logs.join(format!("{name}.log"));
        let mut child = Command::new(env!("CARGO_BIN_EXE_haul"))
            .args(["serve", "--no-history", "--listen", "127.0.0.1:0", "--root"])
            .arg(root)
            .args(extra)
            .env("HAUL_LOG", "info")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(fs::File::create(&log).expect("create the log")))
            .spawn()
            .expect("start haul serve");
        let mut line = String::new();
        let _ = BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut line);
        let Some(addr) = line.trim().strip_prefix("haul serve: listening on ") else {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{name}: no listen line ({line:?})\n{}",
                fs::read_to_string(&log).unwrap_or_default()
            );
        };
        Node {
            addr: addr.to_string(),
            child,
            name: name.to_string(),
            log,
        }
    }

    /// A haul origin for anonymous users, who may write.
    fn origin(name: &str, root: &Path, logs: &Path) -> Node {
        Node::start(name, root, logs, &["--anonymous", "--anonymous-write"])
    }

    /// A relay to loopback next hops, open to anonymous users, `RELAY_STREAMS` streams on its
    /// next leg, with `extra` flags.
    fn relay(name: &str, root: &Path, logs: &Path, extra: &[&str]) -> Node {
        let streams = RELAY_STREAMS.to_string();
        let mut args = vec![
            "--anonymous",
            "--relay-allow",
            "127.0.0.1",
            "--relay-anonymous",
            "--relay-parallelism",
            &streams,
        ];
        args.extend_from_slice(extra);
        Node::start(name, root, logs, &args)
    }

    /// `ftp://ADDR`.
    fn url(&self) -> String {
        format!("ftp://{}", self.addr)
    }

    /// The log so far, without terminal colours.
    fn log(&self) -> String {
        strip_ansi(&fs::read_to_string(&self.log).unwrap_or_default())
    }

    /// The stream counts of the `relay leg done` lines for `what` (`fetch` or `store`) of
    /// `path` on the next hop that moved exactly `bytes`, in log order.
    fn legs(&self, what: &str, path: &str, bytes: usize) -> Vec<u32> {
        let (w, p, b) = (
            format!("what=\"{what}\""),
            format!(" path={path} "),
            format!(" bytes={bytes} "),
        );
        self.log()
            .lines()
            .filter(|l| l.contains("relay leg done") && l.contains(&w))
            .filter(|l| l.contains(&p) && l.contains(&b))
            .filter_map(|l| {
                l.split("streams=")
                    .nth(1)?
                    .split_whitespace()
                    .next()?
                    .parse()
                    .ok()
            })
            .collect()
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if thread::panicking() {
            eprintln!("--- {} log ({}) ---\n{}", self.name, self.addr, self.log());
        }
    }
}

/// `text` without ANSI escape sequences (`ESC [ ... letter`).
fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\u{1b}' {
            out.push(c);
            continue;
        }
        for d in chars.by_ref() {
            if d.is_ascii_alphabetic() {
                break;
            }
        }
    }
    out
}

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

/// Panics unless `path` holds exactly `want`.
fn assert_file(path: &Path, want: &[u8], what: &str) {
    let got = fs::read(path).unwrap_or_else(|e| panic!("{what}: read {}: {e}", path.display()));
    assert!(
        got == want,
        "{what}: {} holds {} bytes, not the {} sent (or they differ)",
        path.display(),
        got.len(),
        want.len()
    );
}

/// Panics unless the relay's own root is still empty: a relay keeps nothing on disk.
fn assert_empty(root: &Path) {
    let left: Vec<_> = fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(
        left.is_empty(),
        "the relay left files in its root: {left:?}"
    );
}

/// `globus-url-copy ARGS`, killed after `GUC_LIMIT`, that must succeed.
fn guc(args: &[&str], what: &str) {
    let out = globus_url_copy_timeout(args, GUC_LIMIT);
    assert_success(&out, &format!("{what}: globus-url-copy {args:?}"));
}

/// `haul cp ARGS` that must succeed and report `verified`; its summary line.
fn haul_cp(args: &[&str], hist: &Path) -> String {
    let out = cp(args, hist);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "haul cp {args:?} failed ({}): {}{}",
        out.status,
        stdout,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("1 of 1 verified"),
        "haul cp {args:?} did not verify: {stdout}"
    );
    stdout
}

/// Adler-32 (RFC 1950) of `data`.
fn adler32(data: &[u8]) -> u32 {
    let (mut a, mut b) = (1u32, 0u32);
    for chunk in data.chunks(5552) {
        for &x in chunk {
            a += u32::from(x);
            b += a;
        }
        a %= 65521;
        b %= 65521;
    }
    (b << 16) | a
}

/// Runs `cmd`, killing it after `limit` (the test then fails).
fn run_within(cmd: Command, limit: Duration) -> Output {
    let shown = format!("{cmd:?}");
    let (out, killed) = run_killed_after(cmd, limit);
    assert!(
        !killed,
        "{shown} still running after {limit:?}; stderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

// ---------------------------------------------------------------------------------------------
// gfal2

/// What the gfal2 script does, through `base` (the relayed URL of the origin's root, ending in
/// `/`); `direct` is the origin's own URL of the same root, for the third-party copies. The
/// origin holds `data.bin`, `dir/{a,b,sub/}` and `gone.bin`; `local_src` is uploaded as
/// `up.bin` (and `up-file.bin`), downloads go to `local_dst` (and `local_dst.file`). Prints one
/// JSON object.
const GFAL2_SCRIPT: &str = r#"
import gfal2, json, stat, sys
base, direct, local_src, local_dst = sys.argv[1:5]
ctx = gfal2.creat_context()
# ftp:// URLs log in with FTP:USER / FTP:PASSWORD (gfal2's default is anonymous too).
ctx.set_opt_string("FTP", "USER", "anonymous")
ctx.set_opt_string("FTP", "PASSWORD", "anonymous")
out = {}

st = ctx.stat(base + "data.bin")
out["size"] = st.st_size
out["is_file"] = stat.S_ISREG(st.st_mode)
out["dir_is_dir"] = stat.S_ISDIR(ctx.stat(base + "dir").st_mode)
out["listdir"] = sorted(n for n in ctx.listdir(base + "dir") if n not in (".", ".."))
out["adler32"] = ctx.checksum(base + "data.bin", "ADLER32")
try:
    ctx.stat(base + "missing.bin")
    out["missing_errno"] = 0
except gfal2.GError as e:
    out["missing_errno"] = e.code

# Download and upload with gfal2's own reads and writes (RETR and STOR through the relay).
f = ctx.open(base + "data.bin", "r")
with open(local_dst, "wb") as o:
    while True:
        b = f.read_bytes(1 << 20)
        if not b:
            break
        o.write(b)
del f
w = ctx.open(base + "up.bin", "w")
with open(local_src, "rb") as i:
    while True:
        b = i.read(1 << 20)
        if not b:
            break
        w.write(b)
del w

# Namespace commands on the next hop: MKD, RMD, DELE.
ctx.mkdir(base + "made", 0o755)
ctx.mkdir(base + "gone-dir", 0o755)
ctx.rmdir(base + "gone-dir")
ctx.unlink(base + "gone.bin")

# Third-party copies, 4 streams, ADLER32 compared at both ends: out of the relay, and into it.
p = ctx.transfer_parameters()
p.overwrite = True
p.nbstreams = 4
p.timeout = 50
p.set_checksum(gfal2.checksum_mode.both, "ADLER32", "")
ctx.filecopy(p, base + "data.bin", direct + "tpc-out.bin")
ctx.filecopy(p, direct + "data.bin", base + "tpc-in.bin")

# file:// copies need gfal2-plugin-file.
out["file_plugin"] = any(n.startswith("file") for n in ctx.get_plugin_names())
if out["file_plugin"]:
    ctx.filecopy(p, base + "data.bin", "file://" + local_dst + ".file")
    ctx.filecopy(p, "file://" + local_src, base + "up-file.bin")
print(json.dumps(out))
"#;

/// Lays out the files the gfal2 script expects under `root` (the origin's), with `data`.
fn gfal2_tree(root: &Path, data: &[u8]) {
    fs::write(root.join("data.bin"), data).unwrap();
    fs::create_dir_all(root.join("dir/sub")).unwrap();
    fs::write(root.join("dir/a"), random_bytes(70_001, 31)).unwrap();
    fs::write(root.join("dir/b"), random_bytes(1_234, 32)).unwrap();
    fs::write(root.join("gone.bin"), b"to be deleted through the relay").unwrap();
}

/// Runs the gfal2 script through `base` and checks every outcome at the origin's `root`.
fn gfal2_through(py: &str, base: &str, direct: &str, root: &Path, data: &[u8], up: &[u8]) {
    let local = tmp();
    let src = local.path().join("src.bin");
    let dst = local.path().join("dst.bin");
    fs::write(&src, up).unwrap();
    let mut cmd = Command::new(py);
    let script = format!("{GFAL2_SCRIPT}{GFAL2_EXIT}");
    cmd.args(["-c", &script, base, direct]).arg(&src).arg(&dst);
    let out = run_within(cmd, GFAL2_TIMEOUT);
    assert_success(&out, &format!("gfal2 script through {base}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let j: serde_json::Value = serde_json::from_str(stdout.trim().lines().last().unwrap_or(""))
        .unwrap_or_else(|e| panic!("gfal2 script printed no JSON ({e}): {stdout}"));

    assert_eq!(j["size"], data.len(), "stat size");
    assert_eq!(j["is_file"], true, "stat: a regular file");
    assert_eq!(j["dir_is_dir"], true, "stat: a directory");
    assert_eq!(
        j["listdir"],
        serde_json::json!(["a", "b", "sub"]),
        "listdir"
    );
    let sum = j["adler32"].as_str().expect("checksum");
    assert_eq!(
        u32::from_str_radix(sum, 16).ok(),
        Some(adler32(data)),
        "ADLER32 through the relay is {sum}"
    );
    assert_eq!(j["missing_errno"], 2, "stat of a missing file: ENOENT");

    assert_file(&dst, data, "gfal2 read through the relay");
    assert_file(&root.join("up.bin"), up, "gfal2 write through the relay");
    assert!(root.join("made").is_dir(), "MKD through the relay");
    assert!(!root.join("gone-dir").exists(), "RMD through the relay");
    assert!(!root.join("gone.bin").exists(), "DELE through the relay");
    assert_file(
        &root.join("tpc-out.bin"),
        data,
        "third-party copy out of the relay",
    );
    assert_file(
        &root.join("tpc-in.bin"),
        data,
        "third-party copy into the relay",
    );
    if j["file_plugin"] == true {
        assert_file(
            &local.path().join("dst.bin.file"),
            data,
            "gfal2 copy to file://",
        );
        assert_file(&root.join("up-file.bin"), up, "gfal2 copy from file://");
    } else {
        eprintln!(
            "note: gfal2-plugin-file is not installed: gfal2 copies to and from file:// were \
             not tried (reads and writes through gfal2's open() were)"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// 1. globus-url-copy through a haul relay, haul origin

#[test]
fn guc_downloads_through_a_haul_relay_from_a_haul_origin() {
    if skip_without_globus("guc_downloads_through_a_haul_relay_from_a_haul_origin") {
        return;
    }
    let (o, r, local, logs) = (tmp(), tmp(), tmp(), tmp());
    let data = random_bytes(4_000_037, 101);
    fs::write(o.path().join("f.bin"), &data).unwrap();
    let origin = Node::origin("origin", o.path(), logs.path());
    let relay = Node::relay("relay", r.path(), logs.path(), &[]);
    let url = format!("{}/{}/f.bin", relay.url(), origin.url());

    // Stream mode (no -p): the bytes reach the client in order over one connection, and the
    // relay fetches them in order too, one stream.
    let s = local.path().join("stream.bin");
    guc(&[&url, &file_url(&s)], "download, stream mode");
    assert_file(&s, &data, "download through the relay, stream mode");
    assert_eq!(relay.legs("fetch", "/f.bin", data.len()), [1]);

    // MODE E with 4 streams to the client, RELAY_STREAMS on the next leg.
    let e = local.path().join("p4.bin");
    guc(&["-p", "4", &url, &file_url(&e)], "download, -p 4");
    assert_file(&e, &data, "download through the relay, -p 4");
    assert_eq!(
        relay.legs("fetch", "/f.bin", data.len()),
        [1, RELAY_STREAMS]
    );
    assert_empty(r.path());
}

#[test]
fn guc_uploads_through_a_haul_relay_to_a_haul_origin() {
    if skip_without_globus("guc_uploads_through_a_haul_relay_to_a_haul_origin") {
        return;
    }
    let (o, r, local, logs) = (tmp(), tmp(), tmp(), tmp());
    let data = random_bytes(3_500_009, 102);
    let src = local.path().join("src.bin");
    fs::write(&src, &data).unwrap();
    let origin = Node::origin("origin", o.path(), logs.path());
    let relay = Node::relay("relay", r.path(), logs.path(), &[]);

    for (name, p) in [("up-stream.bin", None), ("up-p4.bin", Some("4"))] {
        let url = format!("{}/{}/{name}", relay.url(), origin.url());
        let mut args = Vec::new();
        if let Some(p) = p {
            args.extend(["-p", p]);
        }
        let srcu = file_url(&src);
        args.extend([srcu.as_str(), url.as_str()]);
        guc(&args, &format!("upload {name}"));
        assert_file(&o.path().join(name), &data, &format!("upload {name}"));
        assert!(
            !o.path().join(format!(".{name}.haul-part")).exists(),
            "the origin left the part file of {name} behind"
        );
        assert_eq!(
            relay.legs("store", &format!("/{name}"), data.len()),
            [RELAY_STREAMS],
            "one store leg of {name}"
        );
    }
    assert_empty(r.path());
}

/// `-partial-offset/-partial-length` is `ERET P`; globus-url-copy writes the range at its
/// offset in the local file.
fn partial_through_relay(mode_e: bool) {
    let (o, r, local, logs) = (tmp(), tmp(), tmp(), tmp());
    let data = random_bytes(3_000_017, 103);
    fs::write(o.path().join("f.bin"), &data).unwrap();
    let origin = Node::origin("origin", o.path(), logs.path());
    let relay = Node::relay("relay", r.path(), logs.path(), &[]);
    let url = format!("{}/{}/f.bin", relay.url(), origin.url());
    let (off, len) = (1_000_003usize, 1_500_001usize);
    let dst = local.path().join("part.bin");
    let (offs, lens, dstu) = (off.to_string(), len.to_string(), file_url(&dst));
    let mut args = vec!["-partial-offset", &offs, "-partial-length", &lens];
    if mode_e {
        args.extend(["-p", "2"]);
    }
    args.extend([url.as_str(), dstu.as_str()]);
    guc(&args, "partial read");
    let got = fs::read(&dst).unwrap();
    assert_eq!(got.len(), off + len, "the range ends the local file");
    assert!(
        got[off..] == data[off..off + len],
        "the range read through the relay differs"
    );
}

#[test]
fn guc_partial_read_in_mode_e_through_a_haul_relay() {
    if skip_without_globus("guc_partial_read_in_mode_e_through_a_haul_relay") {
        return;
    }
    partial_through_relay(true);
}

#[test]
fn guc_partial_read_in_stream_mode_through_a_haul_relay() {
    if skip_without_globus("guc_partial_read_in_stream_mode_through_a_haul_relay") {
        return;
    }
    partial_through_relay(false);
}

// ---------------------------------------------------------------------------------------------
// 2. gfal2 through a haul relay

#[test]
fn gfal2_through_a_haul_relay_to_a_haul_origin() {
    let Some(py) = gfal2_or_skip("gfal2_through_a_haul_relay_to_a_haul_origin") else {
        return;
    };
    let (o, r, logs) = (tmp(), tmp(), tmp());
    let data = random_bytes(3_000_029, 201);
    gfal2_tree(o.path(), &data);
    let origin = Node::origin("origin", o.path(), logs.path());
    let relay = Node::relay("relay", r.path(), logs.path(), &[]);
    let base = format!("{}/{}/", relay.url(), origin.url());
    let direct = format!("{}/", origin.url());
    gfal2_through(
        &py,
        &base,
        &direct,
        o.path(),
        &data,
        &random_bytes(2_000_003, 202),
    );
    assert!(
        !relay.legs("fetch", "/data.bin", data.len()).is_empty(),
        "the relay fetched data.bin"
    );
    assert_empty(r.path());
}

#[test]
fn gfal2_through_a_haul_relay_to_a_globus_origin() {
    if skip_without_globus("gfal2_through_a_haul_relay_to_a_globus_origin") {
        return;
    }
    let Some(py) = gfal2_or_skip("gfal2_through_a_haul_relay_to_a_globus_origin") else {
        return;
    };
    let (o, r, logs) = (tmp(), tmp(), tmp());
    let data = random_bytes(3_000_029, 203);
    gfal2_tree(o.path(), &data);
    let g = GlobusServer::start(o.path()).expect("start globus-gridftp-server");
    let relay = Node::relay("relay", r.path(), logs.path(), &[]);
    let base = format!("{}/{}", relay.url(), g.url("/"));
    gfal2_through(
        &py,
        &base,
        &g.url("/"),
        g.root(),
        &data,
        &random_bytes(2_000_003, 204),
    );
    assert_empty(r.path());
}

// ---------------------------------------------------------------------------------------------
// 3. A haul relay in front of globus-gridftp-server

/// `haul cp` down from and up to the Globus origin `g` through `via` (the relays' URL prefix,
/// ending in `/`), with `--checksum ALG` when given; every file byte-identical and verified.
fn haul_cp_through(via: &str, g: &GlobusServer, checksum: Option<&str>) {
    let local = tmp();
    let hist = local.path().join("h.sqlite");
    let data = random_bytes(4_000_037, 301);
    fs::write(g.root().join("f.bin"), &data).unwrap();
    share_tree(g.root()).unwrap();
    let mut opts = vec!["-p", "4"];
    if let Some(a) = checksum {
        opts.extend(["--checksum", a]);
    }

    let dst = local.path().join("f.bin");
    let down = format!("{via}{}", g.url("f.bin"));
    let args: Vec<&str> = opts
        .iter()
        .copied()
        .chain([&*down, dst.to_str().unwrap()])
        .collect();
    let s = haul_cp(&args, &hist);
    assert_file(&dst, &data, "haul cp download through the relay");

    let up = format!("{via}{}", g.url("up.bin"));
    let args: Vec<&str> = opts
        .iter()
        .copied()
        .chain([dst.to_str().unwrap(), &*up])
        .collect();
    let t = haul_cp(&args, &hist);
    assert_file(
        &g.root().join("up.bin"),
        &data,
        "haul cp upload through the relay",
    );
    if let Some(a) = checksum {
        let want = format!("verified ({})", a.to_uppercase());
        assert!(s.contains(&want) && t.contains(&want), "{s}{t}");
        assert!(
            g.log_contents()
                .contains(&format!("CKSM {}", a.to_uppercase())),
            "the Globus origin computed the {a} checksums"
        );
    }
}

#[test]
fn haul_cp_through_a_haul_relay_to_a_globus_origin() {
    if skip_without_globus("haul_cp_through_a_haul_relay_to_a_globus_origin") {
        return;
    }
    let (o, r, logs) = (tmp(), tmp(), tmp());
    let g = GlobusServer::start(o.path()).expect("start globus-gridftp-server");
    let relay = Node::relay("relay", r.path(), logs.path(), &[]);
    haul_cp_through(&format!("{}/", relay.url()), &g, None);
}

#[test]
fn haul_cp_md5_through_a_haul_relay_to_a_globus_origin() {
    if skip_without_globus("haul_cp_md5_through_a_haul_relay_to_a_globus_origin") {
        return;
    }
    let (o, r, logs) = (tmp(), tmp(), tmp());
    let g = GlobusServer::start(o.path()).expect("start globus-gridftp-server");
    let relay = Node::relay("relay", r.path(), logs.path(), &[]);
    haul_cp_through(&format!("{}/", relay.url()), &g, Some("md5"));
    let path = g.root().join("f.bin");
    assert_eq!(
        relay.legs("fetch", path.to_str().unwrap(), 4_000_037),
        [RELAY_STREAMS]
    );
    assert_empty(r.path());
}

#[test]
fn guc_through_a_haul_relay_to_a_globus_origin() {
    if skip_without_globus("guc_through_a_haul_relay_to_a_globus_origin") {
        return;
    }
    let (o, r, local, logs) = (tmp(), tmp(), tmp(), tmp());
    let data = random_bytes(4_000_037, 302);
    fs::write(o.path().join("f.bin"), &data).unwrap();
    let g = GlobusServer::start(o.path()).expect("start globus-gridftp-server");
    let relay = Node::relay("relay", r.path(), logs.path(), &[]);
    let via = |rel: &str| format!("{}/{}", relay.url(), g.url(rel));

    for (p, name) in [(None, "stream"), (Some("4"), "p4")] {
        let dst = local.path().join(format!("{name}.bin"));
        let up = format!("up-{name}.bin");
        let (down_url, up_url, dstu) = (via("f.bin"), via(&up), file_url(&dst));
        let lead: Vec<&str> = p.map(|p| vec!["-p", p]).unwrap_or_default();
        let args: Vec<&str> = lead.iter().copied().chain([&*down_url, &*dstu]).collect();
        guc(&args, &format!("download ({name})"));
        assert_file(
            &dst,
            &data,
            &format!("download from Globus through the relay ({name})"),
        );
        let args: Vec<&str> = lead.iter().copied().chain([&*dstu, &*up_url]).collect();
        guc(&args, &format!("upload ({name})"));
        assert_file(
            &g.root().join(&up),
            &data,
            &format!("upload to Globus through the relay ({name})"),
        );
    }
    let path = g.root().join("f.bin");
    assert_eq!(
        relay.legs("fetch", path.to_str().unwrap(), data.len()),
        [1, RELAY_STREAMS]
    );
    assert_empty(r.path());
}

// ---------------------------------------------------------------------------------------------
// 4. Two haul relays in a row, Globus origin

/// Two relays, the first chained to the second; the prefix `ftp://r1/ftp://r2/`.
fn two_relays(logs: &Path) -> (tempfile::TempDir, tempfile::TempDir, Node, Node) {
    let (d1, d2) = (tmp(), tmp());
    let r1 = Node::relay("relay1", d1.path(), logs, &[]);
    let r2 = Node::relay("relay2", d2.path(), logs, &[]);
    (d1, d2, r1, r2)
}

#[test]
fn haul_cp_through_two_haul_relays_to_a_globus_origin() {
    if skip_without_globus("haul_cp_through_two_haul_relays_to_a_globus_origin") {
        return;
    }
    let (o, logs) = (tmp(), tmp());
    let g = GlobusServer::start(o.path()).expect("start globus-gridftp-server");
    let (_d1, _d2, r1, r2) = two_relays(logs.path());
    haul_cp_through(&format!("{}/{}/", r1.url(), r2.url()), &g, None);
}

#[test]
fn haul_cp_md5_through_two_haul_relays_to_a_globus_origin() {
    if skip_without_globus("haul_cp_md5_through_two_haul_relays_to_a_globus_origin") {
        return;
    }
    let (o, local, logs) = (tmp(), tmp(), tmp());
    let g = GlobusServer::start(o.path()).expect("start globus-gridftp-server");
    let (d1, d2, r1, r2) = two_relays(logs.path());
    let via = format!("{}/{}/", r1.url(), r2.url());
    haul_cp_through(&via, &g, Some("md5"));

    // The first relay's next hop is the second relay (the path it asks there is still nested);
    // the second's is the Globus origin.
    let path = g.root().join("f.bin");
    let path = path.to_str().unwrap();
    let nested = format!("/{}", g.url("f.bin"));
    assert_eq!(r1.legs("fetch", &nested, 4_000_037), [RELAY_STREAMS]);
    assert_eq!(r2.legs("fetch", path, 4_000_037), [RELAY_STREAMS]);
    assert!(
        r1.log().contains(&format!("next_hop={}", r2.url())),
        "relay 1 chained to relay 2"
    );

    // globus-url-copy, -p 4, through the same two relays.
    let dst = local.path().join("guc.bin");
    guc(
        &[
            "-p",
            "4",
            &format!("{via}{}", g.url("f.bin")),
            &file_url(&dst),
        ],
        "download through two relays",
    );
    assert_file(
        &dst,
        &fs::read(path).unwrap(),
        "globus-url-copy through two relays",
    );
    assert_empty(d1.path());
    assert_empty(d2.path());
}
