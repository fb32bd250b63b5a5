//! Bad input against `haul-server`: paths escaping the root (`..`, absolute, symlinks), and
//! broken uploads. Each case asserts the clear error and that nothing on disk was damaged.
mod common;

use std::fs;
use std::io::Write;
use std::os::unix::fs::symlink;

use common::*;
use haul_proto::mode_e::Header;

/// A root with a file, plus a sibling "outside" directory holding a secret and a symlink to it.
fn layout() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    let top = tempfile::tempdir().unwrap();
    let root = top.path().join("root");
    let outside = top.path().join("outside");
    fs::create_dir_all(&root).unwrap();
    fs::create_dir_all(&outside).unwrap();
    fs::write(outside.join("secret"), b"secret").unwrap();
    fs::write(root.join("inside"), b"inside").unwrap();
    symlink(&outside, root.join("escape")).unwrap();
    symlink(outside.join("secret"), root.join("secret-link")).unwrap();
    (top, root, outside)
}

fn snapshot(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                fs::read(&p).unwrap_or_default(),
            )
        })
        .collect();
    v.sort();
    v
}

#[test]
fn paths_outside_root_are_refused() {
    let (top, root, outside) = layout();
    let before = snapshot(&outside);
    let srv = server(&root, |_| {});
    let mut c = Ctl::anon(srv.addr());
    let escape = format!("{}/outside/secret", "../".repeat(8));
    let abs = outside.join("secret").display().to_string();
    let cases = [
        "SIZE escape/secret".to_string(),
        "SIZE secret-link".to_string(),
        "RETR escape/secret".to_string(),
        "RETR secret-link".to_string(),
        "STOR escape/new".to_string(),
        "STOR secret-link".to_string(),
        "DELE escape/secret".to_string(),
        "MKD escape/newdir".to_string(),
        "RNFR escape/secret".to_string(),
        "CWD escape".to_string(),
        "MLSD escape".to_string(),
        "MLST secret-link".to_string(),
        "CKSM MD5 0 -1 secret-link".to_string(),
        "ESTO A 0 escape/secret".to_string(),
    ];
    for cmd in &cases {
        let r = c.cmd(cmd);
        assert_eq!(r.code, 550, "{cmd}: {r}");
        assert!(r.text().contains("outside the served root"), "{cmd}: {r}");
    }
    // `..` and absolute paths are resolved inside the virtual root: they name files under it.
    for cmd in [
        format!("SIZE {escape}"),
        format!("RETR {abs}"),
        format!("DELE {abs}"),
    ] {
        let r = c.cmd(&cmd);
        assert_eq!(r.code, 550, "{cmd}: {r}");
        assert!(r.text().contains("No such file or directory"), "{cmd}: {r}");
    }
    assert_eq!(c.cmd("CWD ../../..").code, 250);
    assert_eq!(
        c.cmd("PWD").text(),
        "\"/\" is current directory.",
        "never above /"
    );
    assert_eq!(c.cmd("SIZE inside").text(), "6");
    assert_eq!(
        snapshot(&outside),
        before,
        "nothing outside the root touched"
    );
    assert!(!top.path().join("new").exists());
}

#[test]
fn dangling_symlink_not_followed_for_writes() {
    let (top, root, _outside) = layout();
    let target = top.path().join("created-outside");
    symlink(&target, root.join("dangling")).unwrap();
    let srv = server(&root, |_| {});
    let mut c = Ctl::anon(srv.addr());
    c.cmd("MODE E");
    let r = c.cmd("ESTO A 0 dangling");
    assert_eq!(r.code, 550, "{r}");
    let r = c.cmd("STOR dangling");
    assert_eq!(r.code, 550, "{r}");
    assert!(
        !target.exists(),
        "no file created through the dangling link"
    );
}

#[test]
fn truncated_mode_e_upload_keeps_target_and_part() {
    let root = tempfile::tempdir().unwrap();
    let original = random_bytes(50_000, 9);
    fs::write(root.path().join("t"), &original).unwrap();
    let srv = server(root.path(), |_| {});
    let mut c = Ctl::anon(srv.addr());
    c.cmd("MODE E");
    let addr = c.pasv();
    c.send("STOR t");
    assert_eq!(c.reply().code, 150);
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.write_all(&Header::data(0, 100_000).encode()).unwrap();
    s.write_all(&random_bytes(30_000, 10)).unwrap();
    drop(s);
    let (_, fin) = c.finish();
    assert_eq!(fin.code, 426, "{fin}");
    assert!(fin.text().contains("truncated"), "{fin}");
    assert_eq!(
        fs::read(root.path().join("t")).unwrap(),
        original,
        "target unchanged"
    );
    assert!(
        root.path().join(".t.haul-part").exists(),
        "part file kept for a restart"
    );
    assert_eq!(c.cmd("NOOP").code, 200, "session survives");
}

#[test]
fn garbage_mode_e_header_fails_upload() {
    let root = tempfile::tempdir().unwrap();
    fs::write(root.path().join("t"), b"keep").unwrap();
    let srv = server(root.path(), |_| {});
    let mut c = Ctl::anon(srv.addr());
    c.cmd("MODE E");
    let addr = c.pasv();
    c.send("STOR t");
    assert_eq!(c.reply().code, 150);
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    // A block claiming more than MAX_BLOCK bytes.
    let mut h = Header::data(0, 1).encode();
    h[1..9].copy_from_slice(&u64::MAX.to_be_bytes());
    s.write_all(&h).unwrap();
    let (_, fin) = c.finish();
    assert_eq!(fin.code, 426, "{fin}");
    assert_eq!(fs::read(root.path().join("t")).unwrap(), b"keep");
}

#[test]
fn stor_without_data_setup_gets_425() {
    let root = tempfile::tempdir().unwrap();
    let srv = server(root.path(), |_| {});
    let mut c = Ctl::anon(srv.addr());
    c.cmd("MODE E");
    let r = c.cmd("STOR x");
    assert_eq!(r.code, 425, "{r}");
    assert!(r.text().contains("PASV"), "{r}");
    assert!(!root.path().join("x").exists() && !root.path().join(".x.haul-part").exists());
}

#[test]
fn failed_upload_resumes_with_rest_ranges() {
    let root = tempfile::tempdir().unwrap();
    fs::write(root.path().join("t"), b"old").unwrap();
    let data = random_bytes(50_000, 12);
    let srv = server(root.path(), |_| {});
    let mut c = Ctl::anon(srv.addr());
    c.cmd("MODE E");
    let addr = c.pasv();
    c.send("STOR t");
    assert_eq!(c.reply().code, 150);
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.write_all(&Header::data(0, 20_000).encode()).unwrap();
    s.write_all(&data[..20_000]).unwrap();
    s.write_all(&Header::data(20_000, 30_000).encode()).unwrap();
    s.write_all(&data[20_000..20_100]).unwrap();
    drop(s);
    assert_eq!(c.finish().1.code, 426);
    assert_eq!(fs::read(root.path().join("t")).unwrap(), b"old");

    // Resume: the client holds-as-sent 0-20000 and sends only the rest.
    assert_eq!(c.cmd("REST 0-20000").code, 350);
    c.send("STOR t");
    assert_eq!(c.reply().code, 150);
    let mut conns = connect_n(addr, 1);
    let src = Mem(data.clone());
    let p = haul_transport::mode_e::Progress::default();
    haul_transport::mode_e::send(&mut conns, &src, &[(20_000, 50_000)], 8192, &p, false).unwrap();
    let (pre, fin) = c.finish();
    assert_eq!(fin.code, 226, "{fin}");
    assert_eq!(pre.last().unwrap().text(), "Range Marker 20000-50000");
    assert_eq!(
        fs::read(root.path().join("t")).unwrap(),
        data,
        "part file completed and renamed"
    );
    assert!(!root.path().join(".t.haul-part").exists());
}
