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
    serve_gsi_with(pki, root, &[])
}

/// The same with more flags.
pub fn serve_gsi_with(pki: &Pki, root: &Path, extra: &[&str]) -> Serve {
    let gsi = gsi_flags(pki);
    let args: Vec<&str> = gsi
        .iter()
        .map(String::as_str)
        .chain(extra.iter().copied())
        .collect();
    serve(root, &args)
}

/// `haul serve`'s flags that offer GSI with the PKI's files.
pub fn gsi_flags(pki: &Pki) -> [String; 8] {
    let p = |n: &str| pki.path(n).display().to_string();
    [
        "--gsi-cert".to_string(),
        p("hostcert.pem"),
        "--gsi-key".to_string(),
        p("hostkey.pem"),
        "--gsi-cert-dir".to_string(),
        pki.certs().display().to_string(),
        "--gridmap".to_string(),
        p("grid-mapfile"),
    ]
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

/// `haul serve` offering GSI with the PKI's files and `extra` flags, its log (`HAUL_LOG=info`)
/// kept in a file for the tests to read; killed on drop.
pub struct LoggedServe {
    pub proc: Killed,
    pub addr: String,
    pub log: PathBuf,
}

pub fn serve_gsi_logged(pki: &Pki, root: &Path, extra: &[&str]) -> LoggedServe {
    let log = pki.path(&format!("serve-{}.log", free_port()));
    let mut cmd = Command::new("sh");
    // The shell sends the server's stderr to the log and becomes the server (same pid).
    cmd.args(["-c", "exec \"$0\" \"$@\" 2>>\"$HAUL_TEST_LOG\""])
        .arg(env!("CARGO_BIN_EXE_haul"))
        .args(["serve", "--listen", "127.0.0.1:0", "--no-history", "--root"])
        .arg(root);
    for (flag, file) in [
        ("--gsi-cert", pki.path("hostcert.pem")),
        ("--gsi-key", pki.path("hostkey.pem")),
        ("--gsi-cert-dir", pki.certs()),
        ("--gridmap", pki.path("grid-mapfile")),
    ] {
        cmd.arg(flag).arg(file);
    }
    cmd.args(extra)
        .env("HAUL_LOG", "info")
        .env("HAUL_TEST_LOG", &log);
    let (child, addr) = listening(cmd, "haul serve: listening on ");
    LoggedServe {
        proc: Killed(child),
        addr,
        log,
    }
}

impl LoggedServe {
    pub fn port(&self) -> &str {
        self.addr.rsplit(':').next().unwrap()
    }

    pub fn url(&self, rel: &str) -> String {
        format!("gsiftp://127.0.0.1:{}/{rel}", self.port())
    }

    /// The log so far, without its colours.
    pub fn log_text(&self) -> String {
        let raw = fs::read_to_string(&self.log).unwrap_or_default();
        let mut out = String::with_capacity(raw.len());
        let mut chars = raw.chars();
        while let Some(c) = chars.next() {
            if c == '\u{1b}' {
                chars.by_ref().find(|&c| c == 'm');
            } else {
                out.push(c);
            }
        }
        out
    }

    /// Waits (up to 20 s) for `needle` in the log.
    pub fn wait_log(&self, needle: &str) {
        let end = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while !self.log_text().contains(needle) {
            assert!(
                std::time::Instant::now() < end,
                "{needle:?} not in the log:\n{}",
                self.log_text()
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }

    /// Sends the server SIGHUP.
    pub fn hup(&self) {
        run(Command::new("kill").args(["-HUP", &self.proc.0.id().to_string()]));
    }
}

/// An `openssl ca` set-up in the PKI (its database and serials), for certificates with chosen
/// dates, revocations and CRLs; the path of its configuration.
pub fn ca_db(pki: &Pki) -> PathBuf {
    let conf = pki.path("ca.cnf");
    if !conf.exists() {
        fs::create_dir_all(pki.path("cadb")).unwrap();
        fs::write(pki.path("cadb/index.txt"), "").unwrap();
        fs::write(pki.path("cadb/serial"), "1000\n").unwrap();
        fs::write(
            &conf,
            "[ca]\ndefault_ca = d\n[d]\ndatabase = cadb/index.txt\nnew_certs_dir = cadb\n\
             serial = cadb/serial\ndefault_md = sha256\ndefault_days = 2\ndefault_crl_days = 2\n\
             policy = any\nunique_subject = no\n\
             [any]\norganizationName = optional\norganizationalUnitName = optional\n\
             commonName = supplied\n",
        )
        .unwrap();
    }
    conf
}

/// The UTC time `secs` from now as `openssl ca` takes it (`YYYYMMDDHHMMSSZ`).
pub fn utc_in(secs: i64) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let out =
        run(Command::new("date").args(["-u", "-d", &format!("@{}", now + secs), "+%Y%m%d%H%M%SZ"]));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A proxy file (RFC 3820, impersonation) of `<user>cert.pem` made by hand with `openssl ca`,
/// valid from `start` to `end` (`YYYYMMDDHHMMSSZ`), in the layout `grid-proxy-init` writes:
/// the proxy, its key, the user's certificate.
pub fn proxy_by_hand(pki: &Pki, user: &str, start: &str, end: &str) -> PathBuf {
    let conf = ca_db(pki);
    let d = pki.dir.path();
    let subj = run(Command::new("openssl").current_dir(d).args([
        "x509",
        "-in",
        &format!("{user}cert.pem"),
        "-noout",
        "-subject",
        "-nameopt",
        "compat",
    ]));
    let subj = String::from_utf8_lossy(&subj.stdout);
    let subj = subj
        .trim()
        .trim_start_matches("subject=")
        .trim()
        .to_string();
    let name = format!("{user}-hand");
    run(Command::new("openssl")
        .current_dir(d)
        .args(["req", "-newkey", "rsa:2048", "-nodes", "-subj"])
        .arg(format!("{subj}/CN=4242"))
        .arg("-keyout")
        .arg(format!("{name}.key"))
        .arg("-out")
        .arg(format!("{name}.csr")));
    fs::write(
        d.join(format!("{name}.ext")),
        "basicConstraints=critical,CA:false\nkeyUsage=critical,digitalSignature,keyEncipherment\n\
         proxyCertInfo=critical,language:id-ppl-inheritAll\n",
    )
    .unwrap();
    run(Command::new("openssl").current_dir(d).args([
        "ca",
        "-batch",
        "-config",
        &conf.display().to_string(),
        "-cert",
        &format!("{user}cert.pem"),
        "-keyfile",
        &format!("{user}key.pem"),
        "-in",
        &format!("{name}.csr"),
        "-out",
        &format!("{name}.pem"),
        "-startdate",
        start,
        "-enddate",
        end,
        "-extfile",
        &format!("{name}.ext"),
        "-notext",
        "-preserveDN",
    ]));
    let mut pem = fs::read(d.join(format!("{name}.pem"))).unwrap();
    pem.extend(fs::read(d.join(format!("{name}.key"))).unwrap());
    pem.extend(fs::read(d.join(format!("{user}cert.pem"))).unwrap());
    let out = d.join(format!("{name}-proxy.pem"));
    write_private(&out, &pem);
    out
}

/// Writes `bytes` to `path`, readable by its owner only (as proxy files are).
pub fn write_private(path: &Path, bytes: &[u8]) {
    use std::os::unix::fs::PermissionsExt;
    fs::write(path, bytes).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(0o600)).unwrap();
}

/// Revokes `<user>cert.pem` and puts the trusted CA's CRL (`<hash>.r0`) in the trust dir.
pub fn revoke(pki: &Pki, user: &str) {
    let conf = ca_db(pki).display().to_string();
    let d = pki.dir.path();
    let ca = ["-cert", "trusted.pem", "-keyfile", "trusted.key"];
    run(Command::new("openssl")
        .current_dir(d)
        .args(["ca", "-batch", "-config", &conf, "-revoke"])
        .arg(format!("{user}cert.pem"))
        .args(ca));
    run(Command::new("openssl")
        .current_dir(d)
        .args([
            "ca",
            "-batch",
            "-config",
            &conf,
            "-gencrl",
            "-out",
            "trusted.crl",
        ])
        .args(ca));
    // The CRL sits beside the CA's `<hash>.0`, as `<hash>.r0`.
    let anchor = fs::read_dir(pki.certs())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .find(|n| n.ends_with(".0"))
        .expect("the CA in the trust dir");
    let crl = format!("{}.r0", anchor.trim_end_matches(".0"));
    fs::copy(d.join("trusted.crl"), pki.certs().join(crl)).unwrap();
}

/// The PEM blocks of a file, each with its BEGIN and END lines.
pub fn pem_blocks(path: &Path) -> Vec<String> {
    let text = fs::read_to_string(path).unwrap();
    text.split("-----BEGIN ")
        .filter(|b| !b.trim().is_empty())
        .map(|b| format!("-----BEGIN {b}"))
        .collect()
}

/// A TCP relay on a free loopback port to `to`: passes the client's first line (`AUTH
/// GSSAPI`) at once, then holds what else the client sends until `until`; the server's bytes
/// pass at once. It lets a client check its credential before the server sees it.
pub fn gated_relay(to: &str, until: std::time::Instant) -> u16 {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let to = to.to_string();
    std::thread::spawn(move || {
        let Ok((mut c, _)) = l.accept() else { return };
        let Ok(mut s) = std::net::TcpStream::connect(&to) else {
            return;
        };
        let (mut s2, mut c2) = (s.try_clone().unwrap(), c.try_clone().unwrap());
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut s2, &mut c2);
            let _ = c2.shutdown(std::net::Shutdown::Write);
        });
        let mut b = [0u8; 1];
        while c.read_exact(&mut b).is_ok() {
            let _ = s.write_all(&b);
            if b[0] == b'\n' {
                break;
            }
        }
        while std::time::Instant::now() < until {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let _ = std::io::copy(&mut c, &mut s);
        let _ = s.shutdown(std::net::Shutdown::Write);
    });
    port
}

/// Rewrites the PKI's grid-mapfile to map each `(common name, account)`.
pub fn map_users(pki: &Pki, users: &[(&str, &str)]) {
    let lines: String = users
        .iter()
        .map(|(cn, account)| format!("\"/O=Grid/OU=haul test/CN={cn}\" {account}\n"))
        .collect();
    fs::write(pki.path("grid-mapfile"), lines).unwrap();
}

/// Third-party copies under GSI between haul serve, over a root holding `src.bin`, and
/// globus-gridftp-server (users mapped to nobody) over an empty shared root.
pub struct GsiPair {
    /// haul serve.
    pub haul: Serve,
    /// globus-gridftp-server; dropping it stops the server.
    pub globus: Killed,
    /// haul serve's root.
    pub haul_root: tempfile::TempDir,
    /// Globus's root.
    pub gfs_root: tempfile::TempDir,
    /// What `src.bin` holds.
    pub data: Vec<u8>,
    /// `gsiftp://127.0.0.1:P/`, haul serve's root.
    pub haul_base: String,
    /// `gsiftp://127.0.0.1:P<root>/`, Globus's root.
    pub globus_base: String,
}

impl GsiPair {
    /// Both servers, `src.bin` being `len` bytes from `seed`; None where Globus cannot run
    /// for `test` (the reason is printed).
    pub fn start(pki: &Pki, test: &str, len: usize, seed: u64) -> Option<GsiPair> {
        let haul_root = tempfile::tempdir().unwrap();
        let gfs_root = tempfile::tempdir().unwrap();
        share_tree(gfs_root.path()).unwrap();
        let data = random_bytes(len, seed);
        fs::write(haul_root.path().join("src.bin"), &data).unwrap();
        let (globus, port) = globus_gsi_as_nobody(test, pki)?;
        let haul = serve_gsi(pki, haul_root.path());
        let haul_base = format!("gsiftp://127.0.0.1:{}/", port_of(&haul));
        let globus_base = format!("gsiftp://127.0.0.1:{port}{}/", gfs_root.path().display());
        Some(GsiPair {
            haul,
            globus,
            haul_root,
            gfs_root,
            data,
            haul_base,
            globus_base,
        })
    }

    /// Both copies arrived whole: `a.bin` on Globus, `back.bin` on haul serve.
    pub fn assert_round_trip(&self) {
        assert_eq!(
            fs::read(self.gfs_root.path().join("a.bin")).unwrap(),
            self.data
        );
        assert_eq!(
            fs::read(self.haul_root.path().join("back.bin")).unwrap(),
            self.data
        );
    }
}
