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

#[test]
fn hash_password_then_login_with_users_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = haul().args(["serve", "--hash-password"]).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    child.stdin.take().unwrap().write_all(b"hunter2\n").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let hash = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert!(hash.starts_with("$argon2id$"), "{hash}");
    assert!(!hash.contains("hunter2"));
    let users = dir.path().join("users");
    std::fs::write(&users, format!("alice:{hash}:ro\n")).unwrap();

    let mut srv = haul()
        .args(["serve", "--listen", "127.0.0.1:0", "--root"])
        .arg(dir.path())
        .arg("--users")
        .arg(&users)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(srv.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let addr = line.trim().strip_prefix("haul serve: listening on ").expect("listen line").to_string();
    let mut s = TcpStream::connect(&addr).unwrap();
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
    let out = haul().args(["serve", "--root", "/nonexistent/haul-root", "--listen", "127.0.0.1:0"]).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent/haul-root"), "{err}");
}
