//! Confinement by construction (issue 21, findings 1 and 2): uploads cannot be steered outside
//! the root through their part file, by a planted symlink or by FTP commands alone; paths that
//! a local co-tenant swaps for symlinks mid-session never reveal an outside file; listings never
//! describe what a symlink outside the root points at.
mod common;

use std::fs;
use std::os::unix::fs::symlink;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use common::*;

/// A served root and, beside it, an "outside" directory the server must never touch.
struct Layout {
    _top: tempfile::TempDir,
    root: std::path::PathBuf,
    outside: std::path::PathBuf,
}

fn layout() -> Layout {
    let top = tempfile::tempdir().unwrap();
    let root = top.path().join("root");
    let outside = top.path().join("outside");
    fs::create_dir_all(&root).unwrap();
    fs::create_dir_all(&outside).unwrap();
    Layout {
        _top: top,
        root,
        outside,
    }
}

/// STOR of `name` with `data` over one MODE E stream; the final reply.
fn stor(c: &mut Ctl, name: &str, data: &[u8]) -> haul_proto::Reply {
    c.cmd("MODE E");
    let addr = c.pasv();
    c.send(&format!("STOR {name}"));
    let r = c.reply();
    if r.code != 150 && r.code != 125 {
        return r;
    }
    let sent = send_bytes(connect_n(addr, 1), data.to_vec(), 4096)
        .join()
        .unwrap();
    assert!(sent.is_ok(), "sending: {:?}", sent.err());
    c.finish().1
}

#[test]
fn a_symlink_planted_at_the_part_name_is_replaced_not_followed() {
    let l = layout();
    let victim = l.outside.join("victim");
    fs::write(&victim, b"precious").unwrap();
    symlink(&victim, l.root.join(".f.haul-part")).unwrap();
    let srv = server(&l.root, |_| {});
    let mut c = Ctl::anon(srv.addr());
    let r = stor(&mut c, "f", b"uploaded");
    assert_eq!(r.code, 226, "{r}");
    assert_eq!(
        fs::read(&victim).unwrap(),
        b"precious",
        "the file outside is untouched"
    );
    assert_eq!(fs::read(l.root.join("f")).unwrap(), b"uploaded");
    assert!(!l.root.join(".f.haul-part").exists(), "no part left behind");
}

#[test]
fn a_restarted_upload_never_patches_through_a_planted_part_symlink() {
    let l = layout();
    let victim = l.outside.join("victim");
    fs::write(&victim, vec![b'v'; 64]).unwrap();
    symlink(&victim, l.root.join(".f.haul-part")).unwrap();
    let srv = server(&l.root, |_| {});
    let mut c = Ctl::anon(srv.addr());
    c.cmd("MODE E");
    assert_eq!(c.cmd("REST 0-10").code, 350);
    let r = stor(&mut c, "f", b"patch");
    assert_eq!(r.code, 550, "{r}");
    assert_eq!(
        fs::read(&victim).unwrap(),
        vec![b'v'; 64],
        "the file outside is untouched"
    );
}

#[test]
fn ftp_commands_alone_cannot_rename_a_symlink_onto_a_part_name() {
    let l = layout();
    // A relative symlink inside the root that leads out (as an operator might have left one).
    symlink("../outside/created", l.root.join("link")).unwrap();
    let srv = server(&l.root, |_| {});
    let mut c = Ctl::anon(srv.addr());
    assert_eq!(c.cmd("RNFR link").code, 350);
    let r = c.cmd("RNTO .x.haul-part");
    assert_eq!(r.code, 553, "part-file names are reserved: {r}");
    for cmd in ["MKD .y.haul-part", "RNFR .x.haul-part"] {
        let r = c.cmd(cmd);
        assert_eq!(r.code, 553, "{cmd}: {r}");
    }
    let r = stor(&mut c, "x", b"data");
    assert_eq!(r.code, 226, "{r}");
    assert!(
        !l.outside.join("created").exists(),
        "nothing created outside the root"
    );
    let r = stor(&mut c, "link", b"data");
    assert_eq!(
        r.code, 550,
        "an upload never replaces or writes through a symlink: {r}"
    );
    assert!(r.text().contains("outside the served root"), "{r}");
    assert!(!l.outside.join("created").exists());
}

#[test]
fn a_directory_swapped_for_a_symlink_never_reveals_an_outside_file() {
    let l = layout();
    fs::create_dir(l.root.join("d")).unwrap();
    fs::write(l.root.join("d/f"), vec![1u8; 100]).unwrap();
    fs::create_dir(l.outside.join("d")).unwrap();
    fs::write(l.outside.join("d/f"), vec![2u8; 7777]).unwrap();
    let srv = server(&l.root, |_| {});
    let mut c = Ctl::anon(srv.addr());
    let stop = Arc::new(AtomicBool::new(false));
    let swaps = Arc::new(AtomicU64::new(0));
    // The co-tenant: swaps root/d between the real directory and a symlink to outside/d.
    let swapper = {
        let (root, outside, stop, swaps) = (
            l.root.clone(),
            l.outside.clone(),
            stop.clone(),
            swaps.clone(),
        );
        std::thread::spawn(move || {
            let (dir, link, aside) = (root.join("d"), root.join("d-link"), root.join("d-real"));
            symlink(outside.join("d"), &link).unwrap();
            while !stop.load(Ordering::Relaxed) {
                fs::rename(&dir, &aside).unwrap();
                fs::rename(&link, &dir).unwrap();
                fs::rename(&dir, &link).unwrap();
                fs::rename(&aside, &dir).unwrap();
                swaps.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    // Ask while the swapper runs: at least 1,500 questions and 200 swaps (bounded in time, for
    // a loaded machine).
    let mut seen = Vec::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut i = 0;
    while (i < 1500 || swaps.load(Ordering::Relaxed) < 200) && std::time::Instant::now() < deadline
    {
        let cmd = if i % 3 == 0 {
            "CKSM ADLER32 0 -1 d/f"
        } else {
            "SIZE d/f"
        };
        let r = c.cmd(cmd);
        if r.code == 213 {
            seen.push((cmd, r.text()));
        }
        i += 1;
    }
    stop.store(true, Ordering::Relaxed);
    swapper.join().unwrap();
    let swaps = swaps.load(Ordering::Relaxed);
    assert!(
        swaps > 0,
        "the swapper ran ({swaps} swaps while {i} commands were answered)"
    );
    let outside_adler = {
        let (a, b) = [2u32; 7777].iter().fold((1u32, 0u32), |(a, b), x| {
            ((a + x) % 65521, (b + (a + x) % 65521) % 65521)
        });
        format!("{:08x}", (b << 16) | a)
    };
    for (cmd, text) in &seen {
        assert!(
            text != "7777" && *text != outside_adler,
            "{cmd} described the outside file: {text}"
        );
    }
    assert!(
        !seen.is_empty(),
        "some answers came from the real directory"
    );
}

#[test]
fn listings_describe_an_escaping_symlink_as_itself() {
    let l = layout();
    fs::write(l.outside.join("secret"), vec![0u8; 12345]).unwrap();
    symlink(l.outside.join("secret"), l.root.join("secret-link")).unwrap();
    fs::write(l.root.join("inside"), b"inside").unwrap();
    symlink("inside", l.root.join("inside-link")).unwrap();
    let srv = server(&l.root, |_| {});
    let mut c = Ctl::anon(srv.addr());
    for verb in ["MLSD", "LIST"] {
        let addr = c.pasv();
        c.send(verb);
        let r = c.reply();
        assert_eq!(r.code, 150, "{r}");
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        let mut body = String::new();
        std::io::Read::read_to_string(&mut s, &mut body).unwrap();
        assert_eq!(c.finish().1.code, 226);
        let secret = body
            .lines()
            .find(|l| l.ends_with("secret-link"))
            .unwrap_or_else(|| panic!("{verb}: {body}"));
        assert!(
            !secret.contains("12345"),
            "{verb} shows the outside file's size: {secret}"
        );
        let inside = body.lines().find(|l| l.ends_with("inside-link")).unwrap();
        if verb == "MLSD" {
            assert!(secret.contains("Type=OS.unix=slink"), "{secret}");
            assert!(
                inside.contains("Type=file;") && inside.contains("Size=6;"),
                "an inside link is followed: {inside}"
            );
        } else {
            assert!(secret.starts_with('l'), "{secret}");
            assert!(inside.starts_with('-'), "{inside}");
        }
    }
}

/// The served root itself is never removed or renamed, however it is named.
#[test]
fn the_root_cannot_be_removed_or_renamed() {
    let l = layout();
    let srv = server(&l.root, |_| {});
    let mut c = Ctl::anon(srv.addr());
    for (cmd, verb) in [
        ("RMD /", "removed"),
        ("DELE /", "removed"),
        ("RMD .", "removed"),
        ("RNFR /", "renamed"),
        ("RNFR ..", "renamed"),
    ] {
        let r = c.cmd(cmd);
        assert_eq!(r.code, 550, "{cmd}: {r}");
        assert!(
            r.text().contains(&format!("cannot be {verb}")),
            "{cmd}: {r}"
        );
    }
    assert!(l.root.is_dir());
    assert_eq!(c.cmd("RNTO x").code, 503, "no RNFR was accepted");
}
