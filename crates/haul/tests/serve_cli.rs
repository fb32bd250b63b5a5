//! `haul serve` command line: `--hash-password`, a users file, and a clear error for a bad root.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};

use haul_proto::ReplyParser;

fn haul() -> Command {
    Command::new(env!("CARGO_BIN_EXE_haul"))
}

fn reply(s: &mut TcpStream, p: &mut ReplyParser) -> u16 {
    let mut buf = [0u8; 1024];
    loop {
        if let Some(r) = p.next_reply().unwrap() {
            return r.code;
        }
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "server closed");
        p.extend(&buf[..n]);
    }
}

fn cmd(s: &mut TcpStream, p: &mut ReplyParser, line: &str) -> u16 {
    s.write_all(format!("{line}\r\n").as_bytes()).unwrap();
    reply(s, p)
}

/// Starts `haul serve` on `root` with a users file and `extra` flags; the child and its address.
fn serve_users(
    root: &std::path::Path,
    users: &std::path::Path,
    extra: &[&str],
) -> (std::process::Child, std::net::SocketAddr) {
    let mut srv = haul()
        .args(["serve", "--no-history", "--listen", "127.0.0.1:0", "--root"])
        .arg(root)
        .arg("--users")
        .arg(users)
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(srv.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("haul serve: listening on ")
        .expect("listen line")
        .parse()
        .expect("an address");
    (srv, addr)
}

#[test]
fn hash_password_then_login_with_users_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = haul()
        .args(["serve", "--hash-password"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"hunter2\n").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let hash = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert!(hash.starts_with("$argon2id$"), "{hash}");
    assert!(!hash.contains("hunter2"));
    let users = dir.path().join("users");
    std::fs::write(&users, format!("alice:{hash}:ro\n")).unwrap();

    let (mut srv, addr) = serve_users(dir.path(), &users, &[]);
    let mut s = TcpStream::connect(addr).unwrap();
    let mut p = ReplyParser::new();
    assert_eq!(reply(&mut s, &mut p), 220);
    assert_eq!(cmd(&mut s, &mut p, "USER alice"), 331);
    assert_eq!(cmd(&mut s, &mut p, "PASS wrong"), 530);
    assert_eq!(cmd(&mut s, &mut p, "USER alice"), 331);
    assert_eq!(cmd(&mut s, &mut p, "PASS hunter2"), 230);
    assert_eq!(cmd(&mut s, &mut p, "MKD x"), 550, "ro user cannot write");
    let _ = srv.kill();
    let _ = srv.wait();
}

#[test]
fn missing_root_is_a_clear_error() {
    let out = haul()
        .args([
            "serve",
            "--root",
            "/nonexistent/haul-root",
            "--listen",
            "127.0.0.1:0",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent/haul-root"), "{err}");
}

/// Peak resident memory of process `pid`, bytes (VmHWM).
fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/PID/status");
    kb * 1024
}

#[test]
fn many_simultaneous_wrong_passwords_keep_memory_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let users = dir.path().join("users");
    let hash = haul_server::hash_password("right").unwrap();
    std::fs::write(&users, format!("alice:{hash}:ro\n")).unwrap();
    let (mut srv, addr) = serve_users(dir.path(), &users, &["--max-sessions", "100"]);
    // 64 clients from 64 loopback addresses, each sending one wrong password at the same time.
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(64));
    let clients: Vec<_> = (1..=64u8)
        .map(|i| {
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
                    .unwrap();
                sock.bind(&std::net::SocketAddr::from(([127, 0, 1, i], 0)).into())
                    .unwrap();
                sock.connect(&addr.into()).unwrap();
                let mut s: TcpStream = sock.into();
                let mut p = ReplyParser::new();
                assert_eq!(reply(&mut s, &mut p), 220);
                assert_eq!(cmd(&mut s, &mut p, "USER alice"), 331);
                barrier.wait();
                cmd(&mut s, &mut p, "PASS wrong")
            })
        })
        .collect();
    for c in clients {
        assert_eq!(c.join().unwrap(), 530);
    }
    let peak = peak_rss(srv.id());
    let _ = srv.kill();
    let _ = srv.wait();
    // One argon2id verification holds 19 MiB: 64 at once would pass 1.2 GB.
    eprintln!(
        "peak RSS after 64 simultaneous wrong passwords: {} MiB",
        peak >> 20
    );
    assert!(peak < 100 << 20, "peak RSS {} MiB", peak >> 20);
}
