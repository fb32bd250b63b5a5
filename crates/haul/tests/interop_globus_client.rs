//! Interop: the real `globus-url-copy` against `haul serve` (the built binary): downloads and
//! uploads with `-p 1` and `-p 8`, a 200-file tree with `-cc 4 -pp -r` both ways, and
//! `-verify-checksum` (MD5, and SHA1 / SHA256 / SHA512 with `-checksum-alg`), `-fsstack`; every
//! file compared byte for byte.
mod common;

use common::haul::*;

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use common::globus::*;

/// A `haul serve` process on an ephemeral port, killed on drop.
struct HaulServe {
    child: Child,
    port: u16,
}

impl HaulServe {
    fn start(root: &Path) -> HaulServe {
        let mut child = Command::new(env!("CARGO_BIN_EXE_haul"))
            .args(["serve", "--no-history", "--root"])
            .arg(root)
            .args([
                "--listen",
                "127.0.0.1:0",
                "--anonymous",
                "--anonymous-write",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn haul serve");
        let mut line = String::new();
        let stdout = child.stdout.take().expect("stdout");
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("read haul serve stdout");
        let addr = line
            .trim()
            .strip_prefix("haul serve: listening on ")
            .unwrap_or_else(|| {
                let _ = child.kill();
                panic!("unexpected first line from haul serve: {line:?}")
            });
        let port = addr
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .expect("port in listen line");
        HaulServe { child, port }
    }

    fn url(&self, rel: &str) -> String {
        format!("ftp://127.0.0.1:{}/{rel}", self.port)
    }
}

impl Drop for HaulServe {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn assert_same(a: &Path, b: &Path) {
    let x = fs::read(a).unwrap_or_else(|e| panic!("read {}: {e}", a.display()));
    let y = fs::read(b).unwrap_or_else(|e| panic!("read {}: {e}", b.display()));
    assert!(
        x == y,
        "{} ({} bytes) differs from {} ({} bytes)",
        a.display(),
        x.len(),
        b.display(),
        y.len()
    );
}

/// Every regular file under `dir`, relative, sorted.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p.strip_prefix(dir).unwrap().to_path_buf());
            }
        }
    }
    out.sort();
    out
}

fn make_tree(dir: &Path) {
    for i in 0..200u64 {
        let sub = dir.join(format!("d{}", i % 5));
        fs::create_dir_all(&sub).unwrap();
        let len = if i == 0 {
            0
        } else {
            ((i * 7919) % 60_000) as usize
        };
        fs::write(sub.join(format!("f{i:03}")), random_bytes(len, i + 1)).unwrap();
    }
}

fn assert_trees_equal(a: &Path, b: &Path) {
    let fa = files(a);
    assert_eq!(fa.len(), 200, "source tree has 200 files");
    assert_eq!(
        fa,
        files(b),
        "same file names in {} and {}",
        a.display(),
        b.display()
    );
    for f in fa {
        assert_same(&a.join(&f), &b.join(&f));
    }
}

#[test]
fn download_and_upload_p1_p8() {
    if skip_without_globus("interop_globus_client") {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let local = tempfile::tempdir().unwrap();
    let src = local.path().join("src.bin");
    fs::write(&src, random_bytes(20 << 20, 7)).unwrap();
    fs::copy(&src, root.path().join("big.bin")).unwrap();
    let srv = HaulServe::start(root.path());
    for p in ["1", "8"] {
        let dl = local.path().join(format!("dl{p}.bin"));
        let out = globus_url_copy(&["-p", p, &srv.url("big.bin"), &file_url(&dl)]);
        assert_success(&out, &format!("download -p {p}"));
        assert_same(&src, &dl);

        let name = format!("up{p}.bin");
        let out = globus_url_copy(&["-p", p, &file_url(&src), &srv.url(&name)]);
        assert_success(&out, &format!("upload -p {p}"));
        assert_same(&src, &root.path().join(&name));
        assert!(
            !root.path().join(format!(".{name}.haul-part")).exists(),
            "part file renamed away"
        );
    }
}

#[test]
fn tree_of_200_files_cc4_pp_both_ways() {
    if skip_without_globus("interop_globus_client") {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let local = tempfile::tempdir().unwrap();
    make_tree(&root.path().join("tree"));
    let srv = HaulServe::start(root.path());

    let dst = local.path().join("down");
    let out = globus_url_copy(&[
        "-cc",
        "4",
        "-pp",
        "-r",
        "-cd",
        &srv.url("tree/"),
        &format!("{}/", file_url(&dst)),
    ]);
    assert_success(&out, "tree download -cc 4 -pp -r");
    assert_trees_equal(&root.path().join("tree"), &dst);

    let out = globus_url_copy(&[
        "-cc",
        "4",
        "-pp",
        "-r",
        "-cd",
        &format!("{}/", file_url(&dst)),
        &srv.url("up/"),
    ]);
    assert_success(&out, "tree upload -cc 4 -pp -r -cd");
    assert_trees_equal(&dst, &root.path().join("up"));

    // `-fast`: MLSD in MODE E over the data connections, then every RETR reuses them (125).
    let fast = local.path().join("fast");
    let out = globus_url_copy(&[
        "-fast",
        "-p",
        "2",
        "-r",
        "-cd",
        &srv.url("tree/"),
        &format!("{}/", file_url(&fast)),
    ]);
    assert_success(&out, "tree download -fast -p 2");
    assert_trees_equal(&root.path().join("tree"), &fast);
}

#[test]
fn verify_checksum_both_ways() {
    if skip_without_globus("interop_globus_client") {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let local = tempfile::tempdir().unwrap();
    let src = local.path().join("src.bin");
    fs::write(&src, random_bytes(3 << 20, 11)).unwrap();
    fs::copy(&src, root.path().join("c.bin")).unwrap();
    let srv = HaulServe::start(root.path());

    let dl = local.path().join("dl.bin");
    let out = globus_url_copy(&[
        "-dbg",
        "-verify-checksum",
        "-p",
        "4",
        &srv.url("c.bin"),
        &file_url(&dl),
    ]);
    assert_success(&out, "download -verify-checksum");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("CKSM MD5 0 -1 /c.bin"),
        "client asked for the checksum"
    );
    assert_same(&src, &dl);

    let out = globus_url_copy(&[
        "-dbg",
        "-verify-checksum",
        "-p",
        "4",
        &file_url(&src),
        &srv.url("cu.bin"),
    ]);
    assert_success(&out, "upload -verify-checksum");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("CKSM MD5 0 -1 /cu.bin"),
        "client asked for the checksum"
    );
    assert_same(&src, &root.path().join("cu.bin"));

    // globus-url-copy itself can only hash MD5-family digests locally (it refuses
    // `-checksum-alg ADLER32` before asking the server), so other algorithms are
    // covered by the server's own CKSM tests.
}

#[test]
fn memory_to_memory_dev_zero_and_dev_null() {
    if skip_without_globus("interop_globus_client") {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let srv = HaulServe::start(root.path());
    let len = (64u64 << 20).to_string();
    let out = globus_url_copy(&[
        "-p",
        "4",
        "-len",
        &len,
        &srv.url("dev/zero"),
        "file:///dev/null",
    ]);
    assert_success(&out, "ERET /dev/zero -> local /dev/null");
    let out = globus_url_copy(&[
        "-p",
        "4",
        "-len",
        &len,
        "file:///dev/zero",
        &srv.url("dev/null"),
    ]);
    assert_success(&out, "local /dev/zero -> ESTO /dev/null");
    assert!(
        fs::read_dir(root.path()).unwrap().next().is_none(),
        "nothing written into the root"
    );
}

#[test]
fn third_party_between_haul_and_globus_server() {
    if skip_without_globus("interop_globus_client") {
        return;
    }
    let hroot = tempfile::tempdir().unwrap();
    let groot = tempfile::tempdir().unwrap();
    let data = random_bytes(8 << 20, 13);
    fs::write(hroot.path().join("h.bin"), &data).unwrap();
    let haul = HaulServe::start(hroot.path());
    let globus = GlobusServer::start(groot.path()).expect("start globus-gridftp-server");

    let out = globus_url_copy(&["-p", "4", &haul.url("h.bin"), &globus.url("from-haul.bin")]);
    assert_success(&out, "third-party haul -> globus");
    assert_eq!(fs::read(groot.path().join("from-haul.bin")).unwrap(), data);

    let out = globus_url_copy(&[
        "-p",
        "4",
        &globus.url("from-haul.bin"),
        &haul.url("back.bin"),
    ]);
    assert_success(&out, "third-party globus -> haul");
    assert_eq!(fs::read(hroot.path().join("back.bin")).unwrap(), data);

    // Pipelined third-party tree copies: each server gets its STORs / RETRs back-to-back.
    make_tree(&hroot.path().join("tree"));
    let out = globus_url_copy(&[
        "-pp",
        "-cc",
        "1",
        "-r",
        "-cd",
        &haul.url("tree/"),
        &globus.url("tree/"),
    ]);
    assert_success(&out, "third-party tree haul -> globus -pp");
    assert_trees_equal(&hroot.path().join("tree"), &groot.path().join("tree"));
    let out = globus_url_copy(&[
        "-pp",
        "-cc",
        "1",
        "-r",
        "-cd",
        &globus.url("tree/"),
        &haul.url("tree2/"),
    ]);
    assert_success(&out, "third-party tree globus -> haul -pp");
    assert_trees_equal(&groot.path().join("tree"), &hroot.path().join("tree2"));
}

/// Issue 21, finding 7, with the real client: `globus-url-copy` (MODE S) killed in the middle of
/// an upload leaves the target as it was, and the next upload of the same file goes ahead. (The
/// server before the fix failed this in one of two runs here, depending on which of the killed
/// client's two connections it saw close first; `uploads.rs` pins the order down.)
#[test]
fn globus_url_copy_killed_mid_upload_leaves_the_target() {
    if skip_without_globus("globus_url_copy_killed_mid_upload_leaves_the_target") {
        return;
    }
    let src_dir = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let big = src_dir.path().join("big");
    // 8 GiB of holes: far longer to send than the test waits before the kill.
    fs::File::create(&big).unwrap().set_len(8 << 30).unwrap();
    fs::write(root.path().join("t"), b"the original").unwrap();
    let srv = HaulServe::start(root.path());
    let bin = globus_url_copy_bin().unwrap_or_else(|| PathBuf::from("globus-url-copy"));
    let mut guc = Command::new(bin)
        .args([file_url(&big), srv.url("t")])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn globus-url-copy");
    let part = root.path().join(".t.haul-part");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while fs::metadata(&part).map_or(0, |m| m.len()) < (16 << 20)
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let under_way = fs::metadata(&part).map_or(0, |m| m.len());
    guc.kill().unwrap();
    guc.wait().unwrap();
    assert!(
        under_way >= 16 << 20,
        "the upload was under way when killed ({under_way} bytes)"
    );
    // The server sees the data connection close as a MODE S end of file; it must not take it
    // for one (a server that did renamed the truncated data over the target within a few ms).
    let watch = std::time::Instant::now();
    while watch.elapsed() < std::time::Duration::from_secs(2) {
        assert_eq!(
            fs::read(root.path().join("t")).unwrap(),
            b"the original",
            "the target was replaced"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // Once the server has noticed, a new upload of the same file is accepted and completes.
    let small = src_dir.path().join("small");
    fs::write(&small, b"the next upload").unwrap();
    let out = globus_url_copy(&[&file_url(&small), &srv.url("t")]);
    assert_success(&out, "the upload after the killed one");
    assert_eq!(fs::read(root.path().join("t")).unwrap(), b"the next upload");
}

/// `-checksum-alg SHA1|SHA256|SHA512` (the client hashes its copy with the same digest and
/// compares) and `-fsstack` (`SITE SETDISKSTACK`): `file` is accepted, another driver fails the
/// copy, as with a Globus server.
#[test]
fn sha_checksums_and_the_file_system_stack() {
    if skip_without_globus("interop_globus_client") {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let local = tempfile::tempdir().unwrap();
    let src = local.path().join("src.bin");
    fs::write(&src, random_bytes(1 << 20, 27)).unwrap();
    fs::copy(&src, root.path().join("s.bin")).unwrap();
    let srv = HaulServe::start(root.path());
    for alg in ["SHA1", "SHA256", "SHA512"] {
        let dl = local.path().join(format!("dl-{alg}"));
        let out = globus_url_copy(&[
            "-dbg",
            "-verify-checksum",
            "-checksum-alg",
            alg,
            &srv.url("s.bin"),
            &file_url(&dl),
        ]);
        assert_success(&out, &format!("download -checksum-alg {alg}"));
        let asked = format!("CKSM {alg} 0 -1 /s.bin");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(&asked),
            "client asked for {asked}"
        );
        assert_same(&src, &dl);
        let up = format!("up-{alg}");
        let out = globus_url_copy(&[
            "-verify-checksum",
            "-checksum-alg",
            alg,
            &file_url(&src),
            &srv.url(&up),
        ]);
        assert_success(&out, &format!("upload -checksum-alg {alg}"));
        assert_same(&src, &root.path().join(&up));
    }

    let fs_dl = local.path().join("fsstack.bin");
    let out = globus_url_copy(&[
        "-dbg",
        "-fsstack",
        "file",
        &srv.url("s.bin"),
        &file_url(&fs_dl),
    ]);
    assert_success(&out, "download -fsstack file");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("SITE SETDISKSTACK file"),
        "client set the stack"
    );
    assert_same(&src, &fs_dl);
    let bad = local.path().join("bad.bin");
    let out = globus_url_copy(&["-fsstack", "remote", &srv.url("s.bin"), &file_url(&bad)]);
    assert!(
        !out.status.success(),
        "a driver haul does not have fails the copy: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!bad.exists() || fs::read(&bad).unwrap().is_empty());
}

/// gfal2's gridftp plugin (the Globus client library) sets a mode with `SITE CHMOD`, which it
/// finds in `SITE HELP`; a set-user-ID mode is refused and the file keeps its mode.
#[test]
fn gfal2_chmod_through_site_chmod() {
    let Some(py) = gfal2_or_skip("gfal2_chmod_through_site_chmod") else {
        return;
    };
    let root = tempfile::tempdir().unwrap();
    let f = root.path().join("f");
    fs::write(&f, b"hi").unwrap();
    let srv = HaulServe::start(root.path());
    let script = "import gfal2, sys\n\
                  ctx = gfal2.creat_context()\n\
                  ctx.set_opt_string('FTP', 'USER', 'anonymous')\n\
                  ctx.set_opt_string('FTP', 'PASSWORD', 'anonymous')\n\
                  ctx.chmod(sys.argv[1], 0o600)\n\
                  try:\n    ctx.chmod(sys.argv[1], 0o4755)\n    print('setuid set')\n\
                  except gfal2.GError as e:\n    print('refused:', e.message)\n";
    let script = format!("{script}{GFAL2_EXIT}");
    let out = Command::new(&py)
        .args(["-c", &script, &srv.url("f")])
        .output()
        .expect("run gfal2");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "gfal2 chmod: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("refused:") && stdout.contains("501"),
        "{stdout}"
    );
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        fs::metadata(&f).unwrap().permissions().mode() & 0o7777,
        0o600
    );
}
