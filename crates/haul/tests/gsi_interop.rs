//! Interop under GSI (`gsiftp://`): a test CA made with `openssl`, a real proxy from
//! `grid-proxy-init`, and the real `globus-url-copy` with its defaults (GSI, delegation,
//! `DCAU A`) against `haul serve`: download, upload with `-p 8`, `-dcpriv`,
//! `-verify-checksum`, a tree with `-cc 4 -pp -r`; third-party copies both ways with
//! `globus-gridftp-server` under GSI; gfal2 (stat, listing, ADLER32, MD5, read, write); and
//! the refusals: a proxy from a CA the server does not
//! trust, and a subject the grid-mapfile does not list, with nothing moved.
mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::globus::*;
use common::haul::*;

/// A test PKI in a temporary directory.
struct Pki {
    dir: tempfile::TempDir,
}

impl Pki {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn certs(&self) -> PathBuf {
        self.path("certificates")
    }
}

fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert_success(&out, &format!("{cmd:?}"));
    out
}

/// Makes a CA named `ca` in `dir` (key `ca.key`, cert `ca.pem`).
fn make_ca(dir: &Path, name: &str) {
    run(Command::new("openssl").current_dir(dir).args([
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        &format!("{name}.key"),
        "-out",
        &format!("{name}.pem"),
        "-days",
        "2",
        "-subj",
        &format!("/O=Grid/OU=haul test/CN={name}"),
        "-addext",
        "basicConstraints=critical,CA:true",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
    ]));
}

/// Issues `<out>cert.pem` / `<out>key.pem` for `cn` from the CA `ca` in `dir`.
fn issue(dir: &Path, ca: &str, out: &str, cn: &str, ext: &str) {
    run(Command::new("openssl").current_dir(dir).args([
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        &format!("{out}key.pem"),
        "-out",
        &format!("{out}.csr"),
        "-subj",
        &format!("/O=Grid/OU=haul test/CN={cn}"),
    ]));
    fs::write(dir.join(format!("{out}.ext")), ext).unwrap();
    run(Command::new("openssl").current_dir(dir).args([
        "x509",
        "-req",
        "-in",
        &format!("{out}.csr"),
        "-CA",
        &format!("{ca}.pem"),
        "-CAkey",
        &format!("{ca}.key"),
        "-CAcreateserial",
        "-out",
        &format!("{out}cert.pem"),
        "-days",
        "2",
        "-extfile",
        &format!("{out}.ext"),
    ]));
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(
        dir.join(format!("{out}key.pem")),
        fs::Permissions::from_mode(0o600),
    )
    .unwrap();
}

/// A proxy of `<user>cert.pem` made by `grid-proxy-init`, trusting `certs`.
fn proxy(pki: &Pki, user: &str) -> PathBuf {
    let out = pki.path(&format!("{user}-proxy.pem"));
    run(Command::new("grid-proxy-init")
        .env("X509_CERT_DIR", pki.certs())
        .arg("-cert")
        .arg(pki.path(&format!("{user}cert.pem")))
        .arg("-key")
        .arg(pki.path(&format!("{user}key.pem")))
        .arg("-out")
        .arg(&out)
        .args(["-hours", "2", "-q"]));
    out
}

/// The CA `trusted`, a host certificate for localhost, users `user` (mapped) and `stranger`
/// (not mapped) from it, and `rogue`, a user of a CA nobody trusts; or why not.
fn pki() -> Option<Pki> {
    for tool in ["openssl", "grid-proxy-init"] {
        if Command::new(tool).arg("-version").output().is_err() {
            eprintln!("SKIP gsi_interop: {tool} is not installed (scripts/test.sh installs it)");
            return None;
        }
    }
    let pki = Pki {
        dir: tempfile::tempdir().unwrap(),
    };
    let d = pki.dir.path();
    make_ca(d, "trusted");
    make_ca(d, "rogueca");
    fs::create_dir(pki.certs()).unwrap();
    let hash = run(Command::new("openssl").current_dir(d).args([
        "x509",
        "-in",
        "trusted.pem",
        "-noout",
        "-hash",
    ]));
    let hash = String::from_utf8_lossy(&hash.stdout).trim().to_string();
    fs::copy(d.join("trusted.pem"), pki.certs().join(format!("{hash}.0"))).unwrap();
    fs::write(
        pki.certs().join(format!("{hash}.signing_policy")),
        "access_id_CA X509 '/O=Grid/OU=haul test/CN=trusted'\n\
         pos_rights globus CA:sign\n\
         cond_subjects globus '\"/O=Grid/OU=haul test/*\"'\n",
    )
    .unwrap();
    let user_ext = "basicConstraints=critical,CA:false\n\
                    keyUsage=critical,digitalSignature,keyEncipherment,dataEncipherment\n";
    issue(
        d,
        "trusted",
        "host",
        "localhost",
        "basicConstraints=critical,CA:false\nkeyUsage=critical,digitalSignature,keyEncipherment\n\
         subjectAltName=DNS:localhost,IP:127.0.0.1\n",
    );
    issue(d, "trusted", "user", "Test User", user_ext);
    issue(d, "trusted", "stranger", "Stranger", user_ext);
    issue(d, "rogueca", "rogue", "Test User", user_ext);
    fs::write(
        pki.path("grid-mapfile"),
        "\"/O=Grid/OU=haul test/CN=Test User\" gsiuser\n",
    )
    .unwrap();
    Some(pki)
}

/// `haul serve` offering GSI with the PKI's files.
fn serve_gsi(pki: &Pki, root: &Path) -> Serve {
    let p = |n: &str| pki.path(n).display().to_string();
    serve(
        root,
        &[
            "--gsi-cert",
            &p("hostcert.pem"),
            "--gsi-key",
            &p("hostkey.pem"),
            "--gsi-cert-dir",
            &pki.certs().display().to_string(),
            "--gridmap",
            &p("grid-mapfile"),
        ],
    )
}

/// `globus-url-copy` with `args` as the holder of `proxy`.
fn guc(pki: &Pki, proxy: &Path, args: &[&str]) -> Output {
    let bin = globus_url_copy_bin().unwrap_or_else(|| PathBuf::from("globus-url-copy"));
    let mut cmd = Command::new(bin);
    cmd.env("X509_CERT_DIR", pki.certs())
        .env("X509_USER_PROXY", proxy)
        .args(args);
    run_killed_after(cmd, std::time::Duration::from_secs(120)).0
}

fn port_of(s: &Serve) -> &str {
    s.addr.rsplit(':').next().unwrap()
}

fn same(a: &Path, b: &Path) {
    assert!(
        fs::read(a).unwrap() == fs::read(b).unwrap(),
        "{} differs from {}",
        a.display(),
        b.display()
    );
}

#[test]
fn globus_url_copy_with_its_defaults_against_haul_serve() {
    if skip_without_globus("globus_url_copy_with_its_defaults_against_haul_serve") {
        return;
    }
    let Some(pki) = pki() else { return };
    let proxy = proxy(&pki, "user");
    let root = tempfile::tempdir().unwrap();
    let local = tempfile::tempdir().unwrap();
    fs::write(root.path().join("f.bin"), random_bytes(6 << 20, 1)).unwrap();
    fs::create_dir_all(root.path().join("tree/a/b")).unwrap();
    for i in 0..12 {
        let dir = if i % 2 == 0 { "tree/a" } else { "tree/a/b" };
        fs::write(
            root.path().join(format!("{dir}/f{i}")),
            random_bytes(10_000 * (i + 1), i as u64),
        )
        .unwrap();
    }
    let s = serve_gsi(&pki, root.path());
    let url = |rel: &str| format!("gsiftp://127.0.0.1:{}/{rel}", port_of(&s));
    let dl = local.path().join("dl.bin");
    let out = guc(&pki, &proxy, &[&url("f.bin"), &file_url(&dl)]);
    assert_success(&out, "download, DCAU A");
    same(&dl, &root.path().join("f.bin"));

    let out = guc(&pki, &proxy, &["-p", "8", &file_url(&dl), &url("up.bin")]);
    assert_success(&out, "upload -p 8");
    same(&root.path().join("up.bin"), &dl);

    let priv_dl = local.path().join("priv.bin");
    let out = guc(
        &pki,
        &proxy,
        &["-dcpriv", "-p", "4", &url("f.bin"), &file_url(&priv_dl)],
    );
    assert_success(&out, "download -dcpriv -p 4");
    same(&priv_dl, &root.path().join("f.bin"));

    let ck = local.path().join("ck.bin");
    let out = guc(
        &pki,
        &proxy,
        &["-verify-checksum", &url("f.bin"), &file_url(&ck)],
    );
    assert_success(&out, "download -verify-checksum");
    same(&ck, &root.path().join("f.bin"));

    let tree = local.path().join("tree");
    let out = guc(
        &pki,
        &proxy,
        &[
            "-cc",
            "4",
            "-pp",
            "-r",
            "-cd",
            &url("tree/"),
            &format!("{}/", file_url(&tree)),
        ],
    );
    assert_success(&out, "tree -cc 4 -pp -r");
    for i in 0..12 {
        let dir = if i % 2 == 0 { "a" } else { "a/b" };
        same(
            &tree.join(format!("{dir}/f{i}")),
            &root.path().join(format!("tree/{dir}/f{i}")),
        );
    }
}

#[test]
fn refused_clients_move_nothing() {
    if skip_without_globus("refused_clients_move_nothing") {
        return;
    }
    let Some(pki) = pki() else { return };
    let root = tempfile::tempdir().unwrap();
    fs::write(root.path().join("f.bin"), b"secret").unwrap();
    let s = serve_gsi(&pki, root.path());
    let url = format!("gsiftp://127.0.0.1:{}/f.bin", port_of(&s));
    for (who, expect) in [("stranger", "Login incorrect"), ("rogue", "")] {
        // The rogue's proxy is made trusting its own CA, so grid-proxy-init accepts it.
        if who == "rogue" {
            let certs = pki.certs();
            let hash = run(Command::new("openssl").current_dir(pki.dir.path()).args([
                "x509",
                "-in",
                "rogueca.pem",
                "-noout",
                "-hash",
            ]));
            let hash = String::from_utf8_lossy(&hash.stdout).trim().to_string();
            let tmp = certs.join(format!("{hash}.0"));
            fs::copy(pki.path("rogueca.pem"), &tmp).unwrap();
            let p = proxy(&pki, who);
            fs::remove_file(&tmp).unwrap();
            let dest = root.path().join(format!("{who}.bin"));
            let out = guc(&pki, &p, &[&url, &file_url(&dest)]);
            assert!(!out.status.success(), "a rogue CA's proxy was let in");
            assert!(!dest.exists() || fs::read(&dest).unwrap().is_empty());
            continue;
        }
        let p = proxy(&pki, who);
        let dest = root.path().join(format!("{who}.bin"));
        let out = guc(&pki, &p, &[&url, &file_url(&dest)]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{who} was let in");
        assert!(err.contains(expect), "{who}: {err}");
        assert!(!dest.exists() || fs::read(&dest).unwrap().is_empty());
    }
}

#[test]
fn third_party_with_globus_gridftp_server_under_gsi() {
    if skip_without_globus("third_party_with_globus_gridftp_server_under_gsi") {
        return;
    }
    let Some(pki) = pki() else { return };
    let Some(gfs) = globus_server_bin() else {
        return;
    };
    if euid() != 0 {
        eprintln!("SKIP third_party_with_globus_gridftp_server_under_gsi: globus-gridftp-server maps GSI users to accounts only as root");
        return;
    }
    let proxy = proxy(&pki, "user");
    let haul_root = tempfile::tempdir().unwrap();
    let gfs_root = tempfile::tempdir().unwrap();
    share_tree(gfs_root.path()).unwrap();
    let data = random_bytes(3 << 20, 7);
    fs::write(haul_root.path().join("src.bin"), &data).unwrap();
    // The Globus server maps the user to `nobody`; haul maps it to gsiuser.
    let gmap = pki.path("gfs-grid-mapfile");
    fs::write(&gmap, "\"/O=Grid/OU=haul test/CN=Test User\" nobody\n").unwrap();
    let port = free_port();
    let mut g = Command::new(gfs)
        .args(["-c", "/dev/null", "-p", &port.to_string(), "-d", "error"])
        .env("X509_USER_CERT", pki.path("hostcert.pem"))
        .env("X509_USER_KEY", pki.path("hostkey.pem"))
        .env("X509_CERT_DIR", pki.certs())
        .env("GRIDMAP", &gmap)
        .spawn()
        .expect("start globus-gridftp-server");
    std::thread::sleep(std::time::Duration::from_millis(500));
    let s = serve_gsi(&pki, haul_root.path());
    let haul = |rel: &str| format!("gsiftp://127.0.0.1:{}/{rel}", port_of(&s));
    let theirs = format!("gsiftp://127.0.0.1:{port}{}/", gfs_root.path().display());
    let out = guc(&pki, &proxy, &[&haul("src.bin"), &format!("{theirs}a.bin")]);
    let r1 = out.status.success();
    let out2 = guc(
        &pki,
        &proxy,
        &[&format!("{theirs}a.bin"), &haul("back.bin")],
    );
    let _ = g.kill();
    let _ = g.wait();
    assert!(
        r1,
        "haul -> Globus: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_success(&out2, "Globus -> haul");
    assert_eq!(fs::read(gfs_root.path().join("a.bin")).unwrap(), data);
    assert_eq!(fs::read(haul_root.path().join("back.bin")).unwrap(), data);
}

/// gfal2 (the library FTS and Rucio move data through) over `gsiftp://`: stat, listing,
/// ADLER32 and MD5 checksums, a read and a write, each compared with the file itself.
#[test]
fn gfal2_over_gsiftp_against_haul_serve() {
    let Some(py) = gfal2_or_skip("gfal2_over_gsiftp_against_haul_serve") else {
        return;
    };
    let Some(pki) = pki() else { return };
    let proxy = proxy(&pki, "user");
    let root = tempfile::tempdir().unwrap();
    let data = random_bytes(3 << 20, 11);
    fs::write(root.path().join("f.bin"), &data).unwrap();
    fs::create_dir(root.path().join("d")).unwrap();
    fs::write(root.path().join("d/x"), b"x").unwrap();
    let s = serve_gsi(&pki, root.path());
    let script = format!(
        r#"
import gfal2, hashlib, zlib
ctx = gfal2.creat_context()
base = "gsiftp://127.0.0.1:{port}/"
assert ctx.stat(base + "f.bin").st_size == {len}
assert sorted(ctx.listdir(base + "d")) == ["x"], ctx.listdir(base + "d")
f = ctx.open(base + "f.bin", "r")
chunks = []
while True:
    b = f.read_bytes(1 << 20)
    if not b:
        break
    chunks.append(b)
data = b"".join(chunks)
assert ctx.checksum(base + "f.bin", "ADLER32").lower() == "%08x" % zlib.adler32(data)
assert ctx.checksum(base + "f.bin", "MD5").lower() == hashlib.md5(data).hexdigest()
w = ctx.open(base + "up.bin", "w")
w.write(data)
del w
open("{out}", "wb").write(data)
print("ok")
"#,
        port = port_of(&s),
        len = data.len(),
        out = root.path().join("read.bin").display(),
    );
    let out = Command::new(py)
        .args(["-c", &script])
        .env("X509_CERT_DIR", pki.certs())
        .env("X509_USER_PROXY", &proxy)
        .output()
        .unwrap();
    assert_success(&out, "gfal2 over gsiftp");
    assert_eq!(fs::read(root.path().join("read.bin")).unwrap(), data);
    assert_eq!(fs::read(root.path().join("up.bin")).unwrap(), data);
}
