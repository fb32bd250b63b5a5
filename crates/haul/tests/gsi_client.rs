//! `haul cp gsiftp://` as a GSI client, with a real proxy from `grid-proxy-init`: against
//! `globus-gridftp-server` with GSI and its default `DCAU A` (download, upload with 4 streams,
//! a tree, verified by the server's checksums), against `haul serve` the same way, a
//! third-party copy between the two under the delegated credentials, data channels under
//! `PROT P` and `PROT S`, and the refusals: no proxy, and a server whose certificate does not
//! name the host connected to.
mod common;

use std::fs;
use std::path::Path;

use common::globus::*;
use common::gsi::*;
use common::haul::*;

/// `haul cp` as the holder of `proxy`, trusting the PKI's CAs.
fn cp_as(pki: &Pki, proxy: &Path, args: &[&str], history: &Path) -> std::process::Output {
    let certs = pki.certs().display().to_string();
    let proxy = proxy.display().to_string();
    cp_env(
        args,
        history,
        &[
            ("X509_CERT_DIR", certs.as_str()),
            ("X509_USER_PROXY", proxy.as_str()),
        ],
    )
}

/// A served tree: `f.bin` (5 MiB) and `tree/` with files in two levels.
fn fill(root: &Path) {
    fs::write(root.join("f.bin"), random_bytes(5 << 20, 3)).unwrap();
    fs::create_dir_all(root.join("tree/a/b")).unwrap();
    for i in 0..8 {
        let dir = if i % 2 == 0 { "tree/a" } else { "tree/a/b" };
        fs::write(
            root.join(format!("{dir}/f{i}")),
            random_bytes(7_000 * (i + 1), i as u64),
        )
        .unwrap();
    }
}

/// haul serve and, where it can run, globus-gridftp-server, each over a [`fill`]ed tree.
struct BothServers {
    /// Each server's base URL (ending in `/`) and the directory its paths land in.
    servers: Vec<(String, std::path::PathBuf)>,
    _keep: (Serve, Option<(Killed, u16)>, [tempfile::TempDir; 2]),
}

impl BothServers {
    fn start(pki: &Pki, test: &str) -> BothServers {
        let roots = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
        roots.iter().for_each(|r| fill(r.path()));
        let s = serve_gsi(pki, roots[0].path());
        let mut servers = vec![(
            format!("gsiftp://127.0.0.1:{}/", port_of(&s)),
            roots[0].path().to_path_buf(),
        )];
        share_tree(roots[1].path()).unwrap();
        let globus = globus_gsi_as_nobody(test, pki);
        if let Some((_, port)) = &globus {
            servers.push((
                format!("gsiftp://127.0.0.1:{port}{}/", roots[1].path().display()),
                roots[1].path().to_path_buf(),
            ));
        }
        BothServers {
            servers,
            _keep: (s, globus, roots),
        }
    }
}

/// Download, upload with 4 streams, and a tree, from and to the server at `base` (a URL
/// ending in `/` whose paths land in `root`).
fn round_trip(pki: &Pki, proxy: &Path, base: &str, root: &Path) {
    let local = tempfile::tempdir().unwrap();
    let hist = local.path().join("h.db");
    let dl = local.path().join("dl.bin");
    let out = cp_as(
        pki,
        proxy,
        &[&format!("{base}f.bin"), dl.to_str().unwrap()],
        &hist,
    );
    assert_success(&out, "download");
    same(&dl, &root.join("f.bin"));

    let out = cp_as(
        pki,
        proxy,
        &["-p", "4", dl.to_str().unwrap(), &format!("{base}up.bin")],
        &hist,
    );
    assert_success(&out, "upload -p 4");
    same(&root.join("up.bin"), &dl);

    let tree = local.path().join("tree");
    let out = cp_as(
        pki,
        proxy,
        &[
            "-r",
            "-c",
            "2",
            &format!("{base}tree/"),
            tree.to_str().unwrap(),
        ],
        &hist,
    );
    assert_success(&out, "tree -r -c 2");
    for i in 0..8 {
        let dir = if i % 2 == 0 { "a" } else { "a/b" };
        same(
            &tree.join(format!("{dir}/f{i}")),
            &root.join(format!("tree/{dir}/f{i}")),
        );
    }
}

#[test]
fn haul_cp_gsiftp_against_globus_gridftp_server() {
    let Some(pki) = pki() else { return };
    let proxy = proxy(&pki, "user");
    let root = tempfile::tempdir().unwrap();
    fill(root.path());
    share_tree(root.path()).unwrap();
    let Some((_g, port)) =
        globus_gsi_as_nobody("haul_cp_gsiftp_against_globus_gridftp_server", &pki)
    else {
        return;
    };
    let base = format!("gsiftp://127.0.0.1:{port}{}/", root.path().display());
    round_trip(&pki, &proxy, &base, root.path());
}

#[test]
fn haul_cp_gsiftp_against_haul_serve() {
    let Some(pki) = pki() else { return };
    let proxy = proxy(&pki, "user");
    let root = tempfile::tempdir().unwrap();
    fill(root.path());
    let s = serve_gsi(&pki, root.path());
    let base = format!("gsiftp://127.0.0.1:{}/", port_of(&s));
    round_trip(&pki, &proxy, &base, root.path());
}

/// Under GSI each command is wrapped on its own line, and a download's `RETR` and `CKSM` still
/// reach the server together: it hashes the file as it sends it and never reads it again.
#[test]
fn gsi_downloads_are_hashed_as_sent() {
    let Some(pki) = pki() else { return };
    let proxy = proxy(&pki, "user");
    let root = tempfile::tempdir().unwrap();
    fill(root.path());
    settle(&root.path().join("f.bin"));
    let flags = gsi_flags(&pki);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let (s, metrics) = serve_with_metrics(root.path(), &flags);
    let url = format!("gsiftp://127.0.0.1:{}/f.bin", port_of(&s));
    let local = tempfile::tempdir().unwrap();
    let hist = local.path().join("h.db");
    const RUNS: usize = 4;
    for i in 0..RUNS {
        let dl = local.path().join(format!("dl-{i}.bin"));
        let out = cp_as(
            &pki,
            &proxy,
            &["-p", "4", &url, dl.to_str().unwrap()],
            &hist,
        );
        assert_success(&out, "download");
        same(&dl, &root.path().join("f.bin"));
    }
    let text = http_get(&metrics, "/metrics");
    let transit = metric(&text, "haul_serve_checksums_total{source=\"transit\"}");
    let reread = metric(&text, "haul_serve_checksum_read_bytes_total");
    assert_eq!(
        (transit, reread),
        (RUNS as f64, 0.0),
        "every CKSM answered from the digest made while sending:\n{text}"
    );
}

#[test]
fn third_party_between_haul_serve_and_globus_by_haul_cp() {
    let Some(pki) = pki() else { return };
    let proxy = proxy(&pki, "user");
    let test = "third_party_between_haul_serve_and_globus_by_haul_cp";
    let Some(p) = GsiPair::start(&pki, test, 3 << 20, 9) else {
        return;
    };
    let (haul, theirs) = (&p.haul_base, &p.globus_base);
    let local = tempfile::tempdir().unwrap();
    let hist = local.path().join("h.db");
    let out = cp_as(
        &pki,
        &proxy,
        &[&format!("{haul}src.bin"), &format!("{theirs}a.bin")],
        &hist,
    );
    assert_success(&out, "haul serve -> Globus");
    let out = cp_as(
        &pki,
        &proxy,
        &[&format!("{theirs}a.bin"), &format!("{haul}back.bin")],
        &hist,
    );
    assert_success(&out, "Globus -> haul serve");
    p.assert_round_trip();
}

#[test]
fn gsi_client_refusals_are_clear() {
    let Some(pki) = pki() else { return };
    let root = tempfile::tempdir().unwrap();
    fill(root.path());
    let s = serve_gsi(&pki, root.path());
    let local = tempfile::tempdir().unwrap();
    let hist = local.path().join("h.db");
    let dest = local.path().join("f.bin");
    // No proxy where it is looked for.
    let missing = local.path().join("no-proxy.pem");
    let url = format!("gsiftp://127.0.0.1:{}/f.bin", port_of(&s));
    let out = cp_as(&pki, &missing, &[&url, dest.to_str().unwrap()], &hist);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("grid-proxy-init"), "{err}");
    assert!(!dest.exists());
    // A server whose certificate (a user's, CN=Stranger) does not name 127.0.0.1.
    let proxy = proxy(&pki, "user");
    let p = |n: &str| pki.path(n).display().to_string();
    let s2 = serve(
        root.path(),
        &[
            "--gsi-cert",
            &p("strangercert.pem"),
            "--gsi-key",
            &p("strangerkey.pem"),
            "--gsi-cert-dir",
            &pki.certs().display().to_string(),
            "--gridmap",
            &p("grid-mapfile"),
        ],
    );
    let url = format!("gsiftp://127.0.0.1:{}/f.bin", port_of(&s2));
    let out = cp_as(&pki, &proxy, &[&url, dest.to_str().unwrap()], &hist);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "a server named otherwise was trusted"
    );
    assert!(err.contains("not 127.0.0.1"), "{err}");
    assert!(!dest.exists());
}

/// `--data-protection private` and `safe` (PROT P, PROT S: the data stay in TLS records, as
/// globus-url-copy's `-dcpriv` and `-dcsafe`): a download and an upload with 4 streams against
/// `haul serve` and, as root, against `globus-gridftp-server`.
#[test]
fn protected_data_channels_against_both_servers() {
    let Some(pki) = pki() else { return };
    let proxy = proxy(&pki, "user");
    let both = BothServers::start(&pki, "protected_data_channels_against_both_servers");
    let servers = &both.servers;
    let local = tempfile::tempdir().unwrap();
    let hist = local.path().join("h.db");
    for (base, root) in servers {
        for level in ["private", "safe"] {
            let dl = local.path().join(format!("dl-{level}.bin"));
            let _ = fs::remove_file(&dl);
            let args = ["--data-protection", level, "-p", "4"];
            let src = format!("{base}f.bin");
            let out = cp_as(
                &pki,
                &proxy,
                &[&args[..], &[&src, dl.to_str().unwrap()]].concat(),
                &hist,
            );
            assert_success(&out, &format!("download {level} from {base}"));
            same(&dl, &root.join("f.bin"));
            let dst = format!("{base}up-{level}.bin");
            let out = cp_as(
                &pki,
                &proxy,
                &[&args[..], &[dl.to_str().unwrap(), &dst]].concat(),
                &hist,
            );
            assert_success(&out, &format!("upload {level} to {base}"));
            same(&root.join(format!("up-{level}.bin")), &dl);
        }
    }
}

/// `--dcau none` (plain data connections, as globus-url-copy's `-nodcau`) and `--dcau
/// SUBJECT` (`DCAU S`: the user's own subject here) against both servers, a download and an
/// upload each; a subject no peer presents fails with the reason and leaves nothing behind; and
/// `--dcau none` with protected data channels is refused before anything is sent.
#[test]
fn data_channel_authentication_modes_against_both_servers() {
    let Some(pki) = pki() else { return };
    let proxy = proxy(&pki, "user");
    let both = BothServers::start(&pki, "data_channel_authentication_modes");
    let servers = &both.servers;
    let local = tempfile::tempdir().unwrap();
    let hist = local.path().join("h.db");
    for (base, root) in servers {
        for (i, mode) in ["none", "/O=Grid/OU=haul test/CN=Test User"]
            .into_iter()
            .enumerate()
        {
            let dl = local.path().join(format!("dl-{i}.bin"));
            let src = format!("{base}f.bin");
            let (certs, proxy_path) = (
                pki.certs().display().to_string(),
                proxy.display().to_string(),
            );
            let out = cp_env(
                &["--dcau", mode, "-p", "4", &src, dl.to_str().unwrap()],
                &hist,
                &[
                    ("X509_CERT_DIR", certs.as_str()),
                    ("X509_USER_PROXY", proxy_path.as_str()),
                    ("HAUL_LOG", "haul_xfer::control=debug"),
                ],
            );
            assert_success(&out, &format!("download --dcau {mode} from {base}"));
            let sent = if mode == "none" {
                "> DCAU N".to_string()
            } else {
                format!("> DCAU S {mode}")
            };
            // Under GSI the log shows each command before it is wrapped.
            assert!(
                String::from_utf8_lossy(&out.stderr).contains(&sent),
                "{sent} not sent"
            );
            same(&dl, &root.join("f.bin"));
            let dst = format!("{base}up-{i}.bin");
            let out = cp_as(
                &pki,
                &proxy,
                &["--dcau", mode, "-p", "4", dl.to_str().unwrap(), &dst],
                &hist,
            );
            assert_success(&out, &format!("upload --dcau {mode} to {base}"));
            same(&root.join(format!("up-{i}.bin")), &dl);
        }
        let bogus = local.path().join("bogus.bin");
        let src = format!("{base}f.bin");
        let out = cp_as(
            &pki,
            &proxy,
            &["--dcau", "/O=Grid/CN=Nobody", &src, bogus.to_str().unwrap()],
            &hist,
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success(),
            "a peer of another subject was accepted"
        );
        // Whichever side refuses first names the subject it expected.
        assert!(err.contains("/O=Grid/CN=Nobody"), "{err}");
        assert!(!bogus.exists());
    }
    let out = cp_as(
        &pki,
        &proxy,
        &[
            "--dcau",
            "none",
            "--data-protection",
            "private",
            &format!("{}f.bin", servers[0].0),
            local.path().join("p.bin").to_str().unwrap(),
        ],
        &hist,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("needs authenticated data channels"), "{err}");
}

/// A GSI relay (`--relay-allow 127.0.0.1`) on an empty root, where the account the
/// grid-mapfile gives the test user may relay; `extra` flags besides.
fn gsi_relay(pki: &Pki, extra: &[&str]) -> (Serve, tempfile::TempDir) {
    let root = tempfile::tempdir().unwrap();
    let users = root.path().join("users");
    let hash = haul_server::hash_password("unused").unwrap();
    fs::write(&users, format!("gsiuser:{hash}:rw,relay\n")).unwrap();
    let mut args = vec![
        "--users",
        users.to_str().unwrap(),
        "--relay-allow",
        "127.0.0.1",
    ];
    args.extend_from_slice(extra);
    (serve_gsi_with(pki, root.path(), &args), root)
}

/// A GSI relay (`haul serve --relay-allow`) acts for the user on a `gsiftp://` next hop with
/// the credential the client delegated to it: a download and an upload through the relay to
/// haul serve and to globus-gridftp-server, both requiring GSI, with haul cp (and a download
/// with globus-url-copy), bytes identical; and a client
/// that logged in to the relay without GSI is refused the gsiftp:// next hop, with the reason.
#[test]
fn a_gsi_relay_acts_for_the_user_on_the_next_hop() {
    let Some(pki) = pki() else { return };
    let proxy = proxy(&pki, "user");
    let both = BothServers::start(&pki, "a_gsi_relay_acts_for_the_user");
    // Anonymous users may relay too, to be refused the gsiftp:// hop.
    let (relay, _relay_root) = gsi_relay(&pki, &["--anonymous", "--relay-anonymous"]);
    let via = format!("gsiftp://127.0.0.1:{}/", port_of(&relay));
    let local = tempfile::tempdir().unwrap();
    let hist = local.path().join("h.db");
    for (i, (base, root)) in both.servers.iter().enumerate() {
        let dl = local.path().join(format!("dl-{i}.bin"));
        let src = format!("{via}{base}f.bin");
        let out = cp_as(
            &pki,
            &proxy,
            &["-p", "4", &src, dl.to_str().unwrap()],
            &hist,
        );
        assert_success(&out, &format!("download through the relay from {base}"));
        same(&dl, &root.join("f.bin"));
        let dst = format!("{via}{base}relayed-up.bin");
        let out = cp_as(
            &pki,
            &proxy,
            &["-p", "4", dl.to_str().unwrap(), &dst],
            &hist,
        );
        assert_success(&out, &format!("upload through the relay to {base}"));
        same(&root.join("relayed-up.bin"), &dl);
        // globus-url-copy through the relay, with its defaults (it delegates too).
        if globus_url_copy_bin().is_some() {
            let g = local.path().join(format!("guc-{i}.bin"));
            let out = guc(
                &pki,
                &proxy,
                &["-p", "4", &src, &format!("file://{}", g.display())],
            );
            assert_success(
                &out,
                &format!("globus-url-copy through the relay from {base}"),
            );
            same(&g, &root.join("f.bin"));
        }
    }
    let plain = format!(
        "ftp://127.0.0.1:{}/{}f.bin",
        port_of(&relay),
        both.servers[0].0
    );
    let dest = local.path().join("refused.bin");
    let out = cp_as(&pki, &proxy, &[&plain, dest.to_str().unwrap()], &hist);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "an anonymous client used the user's next hop"
    );
    assert!(err.contains("delegate a credential"), "{err}");
    assert!(!dest.exists());
}

/// `haul route` under GSI: the origin and a relay (given as `host:port`, read as `gsiftp://`
/// since the endpoints are) are asked for their
/// predictions with the user's proxy (a server that could not be asked leaves a note), and the
/// route it prints is taken by `haul cp` through the relay.
#[test]
fn haul_route_asks_gsiftp_servers_with_the_users_proxy() {
    let Some(pki) = pki() else { return };
    let proxy = proxy(&pki, "user");
    let root = tempfile::tempdir().unwrap();
    fill(root.path());
    let origin = serve_gsi(&pki, root.path());
    let (relay, _relay_root) = gsi_relay(&pki, &[]);
    let local = tempfile::tempdir().unwrap();
    let hist = local.path().join("h.db");
    let src = format!("gsiftp://127.0.0.1:{}/f.bin", port_of(&origin));
    let dst = local.path().join("f.bin");
    // A bare host:port: the gsiftp:// endpoints make it gsiftp://.
    let relays = format!("127.0.0.1:{}", port_of(&relay));
    let certs = pki.certs().display().to_string();
    let proxy_path = proxy.display().to_string();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_haul"))
        .args([
            "route",
            &src,
            dst.to_str().unwrap(),
            "--relays",
            &relays,
            "--json",
        ])
        .arg("--history")
        .arg(&hist)
        .env("X509_CERT_DIR", &certs)
        .env("X509_USER_PROXY", &proxy_path)
        .output()
        .unwrap();
    assert_success(&out, "haul route under GSI");
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // The test servers keep no history, so each says it has no predictions to share: what
    // matters is that it was reached and logged in to (not "GSI ..." or "530 ...").
    let notes = j["notes"].as_array().unwrap();
    assert_eq!(notes.len(), 2, "{j}");
    for n in notes {
        assert!(
            n.as_str().unwrap().contains("no BTC in FEAT"),
            "a server not asked: {n}"
        );
    }
    let out = cp_as(
        &pki,
        &proxy,
        &[
            "--route",
            "auto",
            "--relays",
            &relays,
            &src,
            dst.to_str().unwrap(),
        ],
        &hist,
    );
    assert_success(&out, "haul cp --route auto under GSI");
    same(&dst, &root.path().join("f.bin"));
}

/// A server that completes the GSI login (delegation and all) and then breaks the protected
/// control channel: a reply in clear, a `632` whose token is not base64, a `632` whose token
/// is no record of the context, and an endless reply line. Each ends `haul cp` with an error
/// that says what was wrong, well before any timeout, and nothing is written.
#[test]
fn a_server_that_breaks_the_protected_channel_is_a_clear_error() {
    use std::io::{BufRead, BufReader, Write};
    let Some(pki) = pki() else { return };
    let proxy = proxy(&pki, "user");
    let host =
        haul_gsi::Credential::load(&pki.path("hostcert.pem"), &pki.path("hostkey.pem")).unwrap();
    let trust = haul_gsi::TrustStore::load_dir(&pki.certs()).unwrap();
    let policy = haul_gsi::PeerPolicy::new(trust, haul_gsi::chain::DEFAULT_MAX_PROXIES);
    let cfg = haul_gsi::tls::acceptor_config(&host, &policy).unwrap();
    let long = format!("632 {}", "A".repeat(1 << 20));
    let local = tempfile::tempdir().unwrap();
    let hist = local.path().join("h.db");
    let certs = pki.certs().display().to_string();
    let proxy_path = proxy.display().to_string();
    for (bad, expect) in [
        ("230 User logged in.", "unprotected reply"),
        ("632 !!!not base64!!!", "bad security token"),
        ("632 AAAAAAAAAAAAAAAA", "GSI"),
        (long.as_str(), "longer than"),
    ] {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let (cfg, policy, reply) = (cfg.clone(), policy.clone(), bad.to_string());
        let server = std::thread::spawn(move || {
            let (s, _) = l.accept().unwrap();
            let mut r = BufReader::new(s.try_clone().unwrap());
            let mut w = s;
            let mut line = String::new();
            w.write_all(b"220 a server about to misbehave\r\n").unwrap();
            r.read_line(&mut line).unwrap();
            assert_eq!(line.trim_end(), "AUTH GSSAPI");
            w.write_all(b"334 ADAT must follow.\r\n").unwrap();
            let mut ctx = haul_gsi::Context::accept(cfg, policy, false).unwrap();
            loop {
                line.clear();
                r.read_line(&mut line).unwrap();
                let token = line.trim_end().strip_prefix("ADAT ").expect("an ADAT");
                let step = ctx.step(&haul_gsi::ftp::decode(token).unwrap()).unwrap();
                let t = haul_gsi::ftp::encode(&step.token);
                if step.done {
                    w.write_all(format!("235 ADAT={t}\r\n").as_bytes()).unwrap();
                    break;
                }
                w.write_all(format!("335 ADAT={t}\r\n").as_bytes()).unwrap();
            }
            line.clear();
            r.read_line(&mut line).unwrap();
            assert!(line.starts_with("ENC "), "{line}");
            let _ = w.write_all(format!("{reply}\r\n").as_bytes());
            // Stays open: the client must stop on the line itself, not on a close.
            std::thread::sleep(std::time::Duration::from_secs(15));
        });
        let dest = local.path().join("never.bin");
        let url = format!("gsiftp://127.0.0.1:{port}/f.bin");
        let out = cp_within_env(
            &[&url, dest.to_str().unwrap()],
            &hist,
            std::time::Duration::from_secs(10),
            &[
                ("X509_CERT_DIR", certs.as_str()),
                ("X509_USER_PROXY", proxy_path.as_str()),
            ],
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{bad:.40}: accepted");
        assert!(err.contains(expect), "{bad:.40}: {err}");
        assert!(!dest.exists());
        drop(server);
    }
}
