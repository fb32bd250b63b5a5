//! Uploads that cannot damage the target (issue 21, findings 7 and 10): a MODE S upload from a
//! client killed mid-file never replaces the target; two writers to one file never both succeed;
//! a full disk is reported as such and leaves no part file behind.
mod common;

use std::fs;
use std::io::Write;
use std::process::Command;

use common::*;
use haul_proto::mode_e::Header;

#[test]
fn a_mode_s_upload_from_a_killed_client_keeps_the_target() {
    let root = tempfile::tempdir().unwrap();
    let original = random_bytes(40_000, 1);
    fs::write(root.path().join("t"), &original).unwrap();
    let srv = server(root.path(), |_| {});
    let mut c = Ctl::anon(srv.addr());
    let addr = c.pasv();
    c.send("STOR t");
    assert_eq!(c.reply().code, 150);
    let mut d = std::net::TcpStream::connect(addr).unwrap();
    d.write_all(&random_bytes(10_000, 2)).unwrap();
    // What a killed client's kernel does: both connections closed at once; over a network the
    // control connection's FIN may trail the data connection's by a few milliseconds.
    drop(d);
    std::thread::sleep(std::time::Duration::from_millis(5));
    drop(c);
    assert!(eventually(|| srv.sessions() == 0), "the session ended");
    assert!(
        fs::read(root.path().join("t")).unwrap() == original,
        "the target is untouched"
    );
    assert!(
        root.path().join(".t.haul-part").exists(),
        "the part file is kept for a restart"
    );
}

/// Uploads `data` as `t` in MODE S into a new server on `root`, ending the stream properly;
/// returns the final reply's code.
fn upload_whole(root: &std::path::Path, data: &[u8]) -> u16 {
    let srv = server(root, |_| {});
    let mut c = Ctl::anon(srv.addr());
    let addr = c.pasv();
    c.send("STOR t");
    assert_eq!(c.reply().code, 150);
    let mut d = std::net::TcpStream::connect(addr).unwrap();
    d.write_all(data).unwrap();
    drop(d);
    c.finish().1.code
}

#[test]
fn a_mode_s_upload_ended_properly_replaces_the_target() {
    let root = tempfile::tempdir().unwrap();
    fs::write(root.path().join("t"), b"old").unwrap();
    let data = random_bytes(10_000, 3);
    assert_eq!(upload_whole(root.path(), &data), 226);
    assert!(
        fs::read(root.path().join("t")).unwrap() == data,
        "the target is the upload"
    );
}

#[test]
fn a_fresh_upload_over_a_longer_leftover_part_file_keeps_none_of_it() {
    let root = tempfile::tempdir().unwrap();
    // A new part file is not truncated (on ext4 that costs a flush at close); one left over
    // from an earlier, longer upload must still be emptied.
    fs::write(root.path().join(".t.haul-part"), random_bytes(50_000, 4)).unwrap();
    let data = random_bytes(10_000, 5);
    assert_eq!(upload_whole(root.path(), &data), 226);
    assert!(
        fs::read(root.path().join("t")).unwrap() == data,
        "the target is the upload, with no tail of the old part file"
    );
}

#[test]
fn a_second_writer_to_a_file_being_uploaded_is_refused_whatever_its_command() {
    let root = tempfile::tempdir().unwrap();
    fs::write(root.path().join("t"), b"old").unwrap();
    let srv = server(root.path(), |_| {});
    let mut a = Ctl::anon(srv.addr());
    a.cmd("MODE E");
    let addr = a.pasv();
    a.send("STOR t");
    assert_eq!(a.reply().code, 150);
    let mut d = std::net::TcpStream::connect(addr).unwrap();
    d.write_all(&Header::data(0, 4).encode()).unwrap();
    d.write_all(b"new!").unwrap();
    let mut b = Ctl::anon(srv.addr());
    b.cmd("MODE E");
    for cmd in ["ESTO A 0 t", "STOR t", "APPE t"] {
        b.pasv();
        let r = b.cmd(cmd);
        assert_eq!(r.code, 450, "{cmd} while a STOR runs: {r}");
    }
    d.write_all(&Header::eof(1, true).encode()).unwrap();
    assert_eq!(a.finish().1.code, 226);
    assert_eq!(fs::read(root.path().join("t")).unwrap(), b"new!");
}

/// Mounts a small tmpfs (root only); None, with the reason printed, where that is not allowed.
fn small_tmpfs(dir: &std::path::Path) -> Option<()> {
    let out = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=256k", "tmpfs"])
        .arg(dir)
        .output();
    match out {
        Ok(o) if o.status.success() => Some(()),
        Ok(o) => {
            eprintln!(
                "SKIP: cannot mount a tmpfs to fill ({}); run as root",
                String::from_utf8_lossy(&o.stderr).trim()
            );
            None
        }
        Err(e) => {
            eprintln!("SKIP: cannot run mount: {e}");
            None
        }
    }
}

#[test]
fn a_full_disk_is_reported_and_the_part_file_removed() {
    let top = tempfile::tempdir().unwrap();
    let root = top.path().join("small");
    fs::create_dir(&root).unwrap();
    if small_tmpfs(&root).is_none() {
        return;
    }
    struct Unmount(std::path::PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(root.clone());
    fs::write(root.join("t"), b"old").unwrap();
    let srv = server(&root, |_| {});
    let mut c = Ctl::anon(srv.addr());
    c.cmd("MODE E");
    let addr = c.pasv();
    c.send("STOR t");
    assert_eq!(c.reply().code, 150);
    let _ = send_bytes(connect_n(addr, 1), random_bytes(1 << 20, 4), 65536).join();
    let fin = c.finish().1;
    assert_eq!(fin.code, 452, "{fin}");
    assert!(fin.text().contains("No space left on device"), "{fin}");
    assert_eq!(
        fs::read(root.join("t")).unwrap(),
        b"old",
        "target untouched"
    );
    assert!(
        !root.join(".t.haul-part").exists(),
        "the part file is removed"
    );
    assert_eq!(c.cmd("NOOP").code, 200, "the session goes on");
}

#[test]
fn an_upload_resumed_right_after_its_client_was_killed_goes_ahead() {
    let root = tempfile::tempdir().unwrap();
    let srv = server(root.path(), |_| {});
    let mut a = Ctl::anon(srv.addr());
    a.cmd("MODE E");
    let addr = a.pasv();
    a.send("STOR t");
    assert_eq!(a.reply().code, 150);
    let mut d = std::net::TcpStream::connect(addr).unwrap();
    d.write_all(&Header::data(0, 1000).encode()).unwrap();
    d.write_all(&[7u8; 500]).unwrap();
    // The client is gone (its data connection stalled, as across a network that lost it), and
    // the retry comes at once, before the server's watch has noticed.
    drop(a);
    let mut b = Ctl::anon(srv.addr());
    b.cmd("MODE E");
    let addr = b.pasv();
    b.send("STOR t");
    let r = b.reply();
    assert_eq!(r.code, 150, "{r}");
    drop(d);
    send_bytes(connect_n(addr, 1), b"second try".to_vec(), 4096)
        .join()
        .unwrap()
        .unwrap();
    assert_eq!(b.finish().1.code, 226);
    assert_eq!(fs::read(root.path().join("t")).unwrap(), b"second try");
}
