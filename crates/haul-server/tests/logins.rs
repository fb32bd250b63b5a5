//! Logins that cannot be abused (issue 21, findings 6 and 8): a deadline for logging in, caps per
//! address and per user, no timing difference between unknown and known names, a back-off after
//! failures, and no users file that others may write.
//!
//! The whole of 127.0.0.0/8 is loopback: clients bind to 127.0.0.x to be different addresses.
mod common;

use std::fs;
use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use common::*;

/// A control connection from the loopback address 127.0.0.`last`, with the greeting read.
fn ctl_from(last: u8, to: SocketAddr) -> Ctl {
    Ctl::from_stream(connect_from([127, 0, 0, last], to))
}

/// A users file with `u` / `pw`, read-write.
fn users(dir: &std::path::Path) -> std::path::PathBuf {
    let p = dir.join("users");
    fs::write(
        &p,
        format!("u:{}:rw\n", haul_server::hash_password("pw").unwrap()),
    )
    .unwrap();
    p
}

#[test]
fn a_client_that_never_logs_in_is_closed_at_the_login_deadline() {
    let root = tempfile::tempdir().unwrap();
    let srv = server(root.path(), |c| c.login_timeout = Duration::from_secs(1));
    let mut c = Ctl::connect(srv.addr());
    // Keeping the connection busy does not extend the deadline.
    let start = Instant::now();
    let mut closed_with = None;
    while start.elapsed() < Duration::from_secs(5) {
        let r = c.cmd("NOOP");
        if r.code == 421 {
            closed_with = Some(r);
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let r = closed_with.expect("421 before 5 s");
    assert!(r.text().contains("Login timeout"), "{r}");
    // A line trickled byte by byte does not either.
    let mut t = Ctl::connect(srv.addr());
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(5) && t.s.write_all(b"N").is_ok() {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        t.is_closed() && start.elapsed() < Duration::from_secs(5),
        "closed at the deadline"
    );
}

#[test]
fn sessions_per_address_are_capped() {
    let root = tempfile::tempdir().unwrap();
    let srv = server(root.path(), |c| c.max_sessions_per_ip = 2);
    let _a = ctl_from(1, srv.addr());
    let _b = ctl_from(1, srv.addr());
    let s = TcpStream::connect_timeout(&srv.addr(), Duration::from_secs(5)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut third = Ctl::from_stream_raw(s);
    let r = third.reply();
    assert_eq!(r.code, 421, "{r}");
    assert!(r.text().contains("127.0.0.1"), "{r}");
    // Another address is still welcome.
    let mut other = ctl_from(3, srv.addr());
    assert_eq!(other.cmd("NOOP").code, 200);
}

#[test]
fn sessions_per_user_are_capped() {
    let root = tempfile::tempdir().unwrap();
    let u = users(root.path());
    let srv = server(root.path(), |c| {
        c.users = Some(u.clone());
        c.max_sessions_per_user = 1;
    });
    let mut a = Ctl::connect(srv.addr());
    a.login("u", "pw");
    let mut b = Ctl::connect(srv.addr());
    assert_eq!(b.cmd("USER u").code, 331);
    let r = b.cmd("PASS pw");
    assert_eq!(r.code, 421, "{r}");
    drop(a);
    assert!(eventually(|| srv.sessions() == 0));
    let mut c = Ctl::connect(srv.addr());
    c.login("u", "pw");
}

/// How long the `530` for a failed login of `user` takes, from address 127.0.0.`last`.
fn failed_login_time(srv: SocketAddr, last: u8, user: &str) -> Duration {
    let mut c = ctl_from(last, srv);
    assert_eq!(c.cmd(&format!("USER {user}")).code, 331);
    let t = Instant::now();
    let r = c.cmd("PASS wrong");
    assert_eq!(r.code, 530, "{r}");
    t.elapsed()
}

#[test]
fn unknown_and_known_names_take_the_same_time_to_fail() {
    let root = tempfile::tempdir().unwrap();
    let u = users(root.path());
    let srv = server(root.path(), |c| c.users = Some(u.clone()));
    // A fresh address for each attempt, so each is its address's first failure.
    let known = (10..13)
        .map(|a| failed_login_time(srv.addr(), a, "u"))
        .min()
        .unwrap();
    let unknown = (20..23)
        .map(|a| failed_login_time(srv.addr(), a, "nobody"))
        .min()
        .unwrap();
    assert!(
        unknown.as_secs_f64() >= 0.8 * known.as_secs_f64(),
        "an unknown name fails in {unknown:?}, a known one in {known:?}"
    );
}

#[test]
fn failures_from_one_address_back_off() {
    let root = tempfile::tempdir().unwrap();
    let u = users(root.path());
    let srv = server(root.path(), |c| c.users = Some(u.clone()));
    let times: Vec<Duration> = (0..3)
        .map(|_| failed_login_time(srv.addr(), 30, "u"))
        .collect();
    assert!(
        times[2] >= Duration::from_millis(900),
        "the third failure in a row waited {:?}",
        times[2]
    );
    assert!(times[2] > times[0], "{times:?}");
    // A success clears the address's record.
    let mut c = ctl_from(30, srv.addr());
    c.login("u", "pw");
}

#[test]
fn a_users_file_others_may_write_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let root = tempfile::tempdir().unwrap();
    let u = users(root.path());
    fs::set_permissions(&u, fs::Permissions::from_mode(0o662)).unwrap();
    let mut cfg = haul_server::ServerConfig::new(root.path());
    cfg.listen = "127.0.0.1:0".parse().unwrap();
    cfg.users = Some(u);
    let err = haul_server::Server::bind(cfg).err().expect("refused");
    assert!(
        err.to_string().contains("writable by its group or others"),
        "{err}"
    );
}
