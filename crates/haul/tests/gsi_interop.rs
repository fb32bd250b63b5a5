//! Interop under GSI (`gsiftp://`): a test CA made with `openssl`, a real proxy from
//! `grid-proxy-init`, and the real `globus-url-copy` with its defaults (GSI, delegation,
//! `DCAU A`) against `haul serve`: download, upload with `-p 8`, `-dcpriv`, stream-mode
//! uploads under `-dcpriv` and `-dcsafe`,
//! `-verify-checksum`, a tree with `-cc 4 -pp -r`; third-party copies both ways with
//! `globus-gridftp-server` under GSI; gfal2 (stat, listing, ADLER32, MD5, read, write, and
//! third-party copies with `globus-gridftp-server`); and
//! the refusals: a proxy from a CA the server does not
//! trust, and a subject the grid-mapfile does not list, with nothing moved.
mod common;

use std::fs;
use std::process::Command;

use common::globus::*;
use common::gsi::*;
use common::haul::*;

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

    // Stream-mode uploads under PROT P and PROT S: the client ends them by closing the
    // connection without a TLS close_notify.
    for (flag, name) in [("-dcpriv", "up-p.bin"), ("-dcsafe", "up-s.bin")] {
        let out = guc(&pki, &proxy, &[flag, &file_url(&dl), &url(name)]);
        assert_success(&out, &format!("stream-mode upload {flag}"));
        same(&root.path().join(name), &dl);
    }

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
    let Some(pki) = pki() else { return };
    let proxy = proxy(&pki, "user");
    let test = "third_party_with_globus_gridftp_server_under_gsi";
    let Some(p) = GsiPair::start(&pki, test, 3 << 20, 7) else {
        return;
    };
    let (haul, theirs) = (&p.haul_base, &p.globus_base);
    let out = guc(
        &pki,
        &proxy,
        &[&format!("{haul}src.bin"), &format!("{theirs}a.bin")],
    );
    let r1 = out.status.success();
    let out2 = guc(
        &pki,
        &proxy,
        &[&format!("{theirs}a.bin"), &format!("{haul}back.bin")],
    );
    assert!(
        r1,
        "haul -> Globus: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_success(&out2, "Globus -> haul");
    p.assert_round_trip();
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
{exit}"#,
        exit = GFAL2_EXIT,
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

/// gfal2's third-party copies over `gsiftp://` between `haul serve` and
/// `globus-gridftp-server`, both ways, 4 streams, ADLER32 compared at both ends (as FTS runs
/// them): each server authenticates the other's data connections with the credential the
/// client delegated to it.
#[test]
fn gfal2_third_party_over_gsiftp_with_globus() {
    let Some(py) = gfal2_or_skip("gfal2_third_party_over_gsiftp_with_globus") else {
        return;
    };
    let Some(pki) = pki() else { return };
    let test = "gfal2_third_party_over_gsiftp_with_globus";
    let Some(pair) = GsiPair::start(&pki, test, 5 << 20, 13) else {
        return;
    };
    let proxy = proxy(&pki, "user");
    let script = format!(
        r#"
import gfal2
ctx = gfal2.creat_context()
p = ctx.transfer_parameters()
p.overwrite = True
p.nbstreams = 4
p.timeout = 60
p.set_checksum(gfal2.checksum_mode.both, "ADLER32", "")
haul = "{haul}"
theirs = "{theirs}"
ctx.filecopy(p, haul + "src.bin", theirs + "a.bin")
ctx.filecopy(p, theirs + "a.bin", haul + "back.bin")
print("ok")
{exit}"#,
        exit = GFAL2_EXIT,
        haul = pair.haul_base,
        theirs = pair.globus_base,
    );
    let out = Command::new(py)
        .args(["-c", &script])
        .env("X509_CERT_DIR", pki.certs())
        .env("X509_USER_PROXY", &proxy)
        .output()
        .unwrap();
    assert_success(&out, "gfal2 third-party over gsiftp");
    pair.assert_round_trip();
}
