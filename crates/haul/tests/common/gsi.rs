//! The GSI test fixtures: a test PKI made with `openssl` (a trusted CA with a signing policy,
//! a host certificate for localhost and 127.0.0.1, mapped and unmapped users, and a user of a
//! CA nobody trusts), proxies from the real `grid-proxy-init`, `haul serve` offering GSI with
//! them, and `globus-url-copy` run as a proxy's holder.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use super::globus::*;
use super::haul::*;

/// A test PKI in a temporary directory.
pub struct Pki {
    pub dir: tempfile::TempDir,
}

impl Pki {
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn certs(&self) -> PathBuf {
        self.path("certificates")
    }
}

pub fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert_success(&out, &format!("{cmd:?}"));
    out
}

/// Makes a CA named `ca` in `dir` (key `ca.key`, cert `ca.pem`).
pub fn make_ca(dir: &Path, name: &str) {
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
pub fn issue(dir: &Path, ca: &str, out: &str, cn: &str, ext: &str) {
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
pub fn proxy(pki: &Pki, user: &str) -> PathBuf {
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
pub fn pki() -> Option<Pki> {
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
pub fn serve_gsi(pki: &Pki, root: &Path) -> Serve {
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
pub fn guc(pki: &Pki, proxy: &Path, args: &[&str]) -> Output {
    let bin = globus_url_copy_bin().unwrap_or_else(|| PathBuf::from("globus-url-copy"));
    let mut cmd = Command::new(bin);
    cmd.env("X509_CERT_DIR", pki.certs())
        .env("X509_USER_PROXY", proxy)
        .args(args);
    run_killed_after(cmd, std::time::Duration::from_secs(120)).0
}

pub fn port_of(s: &Serve) -> &str {
    s.addr.rsplit(':').next().unwrap()
}

pub fn same(a: &Path, b: &Path) {
    assert!(
        fs::read(a).unwrap() == fs::read(b).unwrap(),
        "{} differs from {}",
        a.display(),
        b.display()
    );
}

/// `globus-gridftp-server` offering GSI with the PKI's host credential, mapping through the
/// grid-mapfile `gmap`; its port, or None when it is not installed. Killed on drop.
pub fn globus_gsi_server(pki: &Pki, gmap: &Path) -> Option<(Killed, u16)> {
    let gfs = globus_server_bin()?;
    let port = free_port();
    let child = Command::new(gfs)
        .args(["-c", "/dev/null", "-p", &port.to_string(), "-d", "error"])
        .env("X509_USER_CERT", pki.path("hostcert.pem"))
        .env("X509_USER_KEY", pki.path("hostkey.pem"))
        .env("X509_CERT_DIR", pki.certs())
        .env("GRIDMAP", gmap)
        .spawn()
        .expect("start globus-gridftp-server");
    let g = Killed(child);
    for _ in 0..50 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    Some((g, port))
}

/// A child process killed and reaped when dropped.
pub struct Killed(pub std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// [`globus_gsi_server`] mapping the PKI's user to `nobody` (it refuses to map to root, and
/// maps at all only as root); None, having said why, when `test` must skip.
pub fn globus_gsi_as_nobody(test: &str, pki: &Pki) -> Option<(Killed, u16)> {
    if skip_without_globus(test) {
        return None;
    }
    if euid() != 0 {
        eprintln!("SKIP {test}: globus-gridftp-server maps GSI users to accounts only as root");
        return None;
    }
    let gmap = pki.path("gfs-grid-mapfile");
    fs::write(&gmap, "\"/O=Grid/OU=haul test/CN=Test User\" nobody\n").unwrap();
    globus_gsi_server(pki, &gmap)
}
