//! AUTH TLS (RFC 4217) against `haul-server`: a protected control channel, then PROT P data
//! connections where the server is the TLS server whoever connects.
mod common;

use std::fs;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use haul_proto::{Reply, ReplyParser};
use haul_transport::mode_e::{self, Progress};
use haul_transport::{socket, tls, Conn};

struct Certs {
    _dir: tempfile::TempDir,
    cert: std::path::PathBuf,
    key: std::path::PathBuf,
}

fn certs() -> Certs {
    let dir = tempfile::tempdir().unwrap();
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let cert = dir.path().join("cert.pem");
    let key = dir.path().join("key.pem");
    fs::write(&cert, ck.cert.pem()).unwrap();
    fs::write(&key, ck.key_pair.serialize_pem()).unwrap();
    Certs {
        _dir: dir,
        cert,
        key,
    }
}

/// A control client that upgrades to TLS.
struct TlsCtl {
    s: tls::ClientStream,
    p: ReplyParser,
}

impl TlsCtl {
    fn reply(&mut self) -> Reply {
        let mut buf = [0u8; 4096];
        loop {
            if let Some(r) = self.p.next_reply().unwrap() {
                return r;
            }
            let n = self.s.read(&mut buf).expect("read TLS control");
            assert!(n > 0, "server closed the control connection");
            self.p.extend(&buf[..n]);
        }
    }

    fn cmd(&mut self, line: &str) -> Reply {
        self.s.write_all(format!("{line}\r\n").as_bytes()).unwrap();
        self.s.flush().unwrap();
        self.reply()
    }
}

fn tls_login(addr: std::net::SocketAddr, cfg: Arc<rustls::ClientConfig>) -> TlsCtl {
    let mut c = Ctl::connect(addr);
    let feat = c.cmd("FEAT").lines.join("\n");
    assert!(feat.contains("AUTH TLS") && feat.contains("PROT"), "{feat}");
    assert_eq!(c.cmd("PROT P").code, 503, "PROT P needs AUTH TLS first");
    let r = c.cmd("AUTH TLS");
    assert_eq!(r.code, 234, "{r}");
    let tcp = c.s.try_clone().unwrap();
    let s = tls::connect(cfg, "localhost", tcp).expect("TLS handshake on control");
    let mut t = TlsCtl {
        s,
        p: ReplyParser::new(),
    };
    assert_eq!(t.cmd("USER anonymous").code, 331);
    assert_eq!(t.cmd("PASS x@").code, 230);
    assert_eq!(t.cmd("PBSZ 0").code, 200);
    assert_eq!(t.cmd("PROT P").code, 200);
    t
}

#[test]
fn auth_tls_and_prot_p_transfers() {
    let c = certs();
    let root = tempfile::tempdir().unwrap();
    let data = random_bytes(3 << 20, 21);
    fs::write(root.path().join("f"), &data).unwrap();
    let srv = server(root.path(), |cfg| {
        cfg.tls = Some((c.cert.clone(), c.key.clone()))
    });
    let ccfg = tls::client_config(&c.cert).unwrap();
    let mut t = tls_login(srv.addr(), ccfg.clone());
    assert_eq!(t.cmd("MODE E").code, 200);
    assert_eq!(t.cmd("OPTS RETR Parallelism=2,2,2;").code, 200);

    // Download: the server connects, yet is the TLS server on each data connection.
    let l = socket::listen("127.0.0.1:0".parse().unwrap(), None).unwrap();
    let port = haul_proto::hostport::format_port(&l.local_addr().unwrap());
    assert_eq!(t.cmd(&format!("PORT {port}")).code, 200);
    t.s.write_all(b"RETR f\r\n").unwrap();
    t.s.flush().unwrap();
    let cfg2 = ccfg.clone();
    let recv = std::thread::spawn(move || {
        let conns: Vec<Conn> = (0..2)
            .map(|_| {
                let tcp = socket::accept_timeout(&l, Duration::from_secs(20))
                    .unwrap()
                    .0;
                Box::new(tls::connect(cfg2.clone(), "localhost", tcp).unwrap()) as Conn
            })
            .collect();
        let out = tempfile::NamedTempFile::new().unwrap();
        let p = Progress::default();
        mode_e::receive(conns, None, out.as_file(), &p, None, 1 << 20).unwrap();
        fs::read(out.path()).unwrap()
    });
    assert_eq!(t.reply().code, 150);
    assert_eq!(t.reply().code, 226);
    assert_eq!(recv.join().unwrap(), data);

    // Upload: the client connects and is the TLS client.
    let r = t.cmd("PASV");
    let addr = haul_proto::hostport::find_in_reply(&r.text()).unwrap();
    t.s.write_all(b"STOR g\r\n").unwrap();
    t.s.flush().unwrap();
    let payload = data[..100_000].to_vec();
    let send = std::thread::spawn(move || {
        let mut conns: Vec<Conn> = (0..2)
            .map(|_| {
                let tcp = TcpStream::connect(addr).unwrap();
                Box::new(tls::connect(ccfg.clone(), "localhost", tcp).unwrap()) as Conn
            })
            .collect();
        let src = Mem(payload);
        mode_e::send(
            &mut conns,
            &src,
            &[(0, 100_000)],
            16384,
            &Progress::default(),
            false,
        )
        .unwrap();
        conns
    });
    let mut codes = Vec::new();
    loop {
        let r = t.reply();
        codes.push(r.code);
        if r.code >= 200 {
            break;
        }
    }
    let _conns = send.join().unwrap();
    assert_eq!(codes.last(), Some(&226), "{codes:?}");
    assert_eq!(fs::read(root.path().join("g")).unwrap(), &data[..100_000]);
}

#[test]
fn auth_tls_refused_without_certificate() {
    let root = tempfile::tempdir().unwrap();
    let srv = server(root.path(), |_| {});
    let mut c = Ctl::connect(srv.addr());
    let r = c.cmd("AUTH TLS");
    assert_eq!(r.code, 502, "{r}");
    assert_eq!(c.cmd("NOOP").code, 200);
}

#[test]
fn require_tls_refuses_clear_logins_and_clear_data() {
    let c = certs();
    let root = tempfile::tempdir().unwrap();
    fs::write(root.path().join("f"), b"secret data").unwrap();
    let srv = server(root.path(), |cfg| {
        cfg.tls = Some((c.cert.clone(), c.key.clone()));
        cfg.require_tls = true;
    });
    let mut clear = Ctl::connect(srv.addr());
    let r = clear.cmd("USER anonymous");
    assert_eq!(r.code, 530, "{r}");
    assert!(r.text().contains("AUTH TLS"), "{r}");
    assert_eq!(clear.cmd("PASS x@").code, 530);
    let mut t = tls_login(srv.addr(), tls::client_config(&c.cert).unwrap());
    assert_eq!(t.cmd("PROT C").code, 200);
    t.cmd("PASV");
    let r = t.cmd("RETR f");
    assert_eq!(r.code, 521, "no clear data connection: {r}");
}

#[test]
fn require_tls_without_a_certificate_does_not_start() {
    let root = tempfile::tempdir().unwrap();
    let mut cfg = haul_server::ServerConfig::new(root.path());
    cfg.listen = "127.0.0.1:0".parse().unwrap();
    cfg.require_tls = true;
    let err = haul_server::Server::bind(cfg).err().expect("refused");
    assert!(err.to_string().contains("--require-tls"), "{err}");
}

#[test]
fn a_tls_key_others_may_write_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let c = certs();
    fs::set_permissions(&c.key, fs::Permissions::from_mode(0o666)).unwrap();
    let root = tempfile::tempdir().unwrap();
    let mut cfg = haul_server::ServerConfig::new(root.path());
    cfg.listen = "127.0.0.1:0".parse().unwrap();
    cfg.tls = Some((c.cert.clone(), c.key.clone()));
    let err = haul_server::Server::bind(cfg).err().expect("refused");
    assert!(err.to_string().contains("chmod go-w"), "{err}");
}
