//! Large uploads announced with `ALLO` (as Globus clients and haul send it) whose XXHC digest
//! is asked for behind the `STOR` (as haul sends it) are written around the page cache
//! (`O_DIRECT`) on local disks, arrive whole, and end as long as what came, whatever `ALLO`
//! said; without `ALLO`, without that `CKSM` (a digest asked for later reads the file back),
//! or with `direct_io` off, they go through the cache.
mod common;

use std::fs::{self, File};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use common::*;

/// 64 MiB, the smallest upload written around the cache, and an unaligned tail.
const LEN: usize = (64 << 20) + 12_345;

/// Bytes of `path` in the page cache.
fn cached(path: &Path) -> u64 {
    haul_transport::io::cached_bytes(&File::open(path).unwrap()).unwrap()
}

/// A temporary directory whose file system takes `O_DIRECT` writes, or None (with the reason
/// printed): tmpfs has no cache to write around, and some file systems refuse the flag.
fn disk_dir() -> Option<tempfile::TempDir> {
    let d = tempfile::tempdir().unwrap();
    let probe = File::create(d.path().join("probe")).unwrap();
    if haul_transport::io::on_tmpfs(&probe) {
        eprintln!(
            "SKIP: {} is tmpfs; O_DIRECT needs a disk",
            d.path().display()
        );
        return None;
    }
    if let Err(e) = fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(d.path().join("probe"))
    {
        eprintln!("SKIP: {} refuses O_DIRECT: {e}", d.path().display());
        return None;
    }
    Some(d)
}

/// Uploads `data` as `name` over 4 MODE E streams in 256 KiB blocks to a new server on `root`
/// (`direct_io` as given), after `ALLO allo` when given, with `CKSM XXHC` pipelined behind the
/// `STOR` when `cksm`; the final reply's code, and the `CKSM`'s reply.
fn upload(
    root: &Path,
    name: &str,
    data: &[u8],
    allo: Option<u64>,
    cksm: bool,
    direct_io: bool,
) -> (u16, Option<haul_proto::Reply>) {
    let srv = server(root, |c| c.direct_io = direct_io);
    let mut c = Ctl::anon(srv.addr());
    assert_eq!(c.cmd("MODE E").code, 200);
    let addr = c.pasv();
    if let Some(n) = allo {
        let r = c.cmd(&format!("ALLO {n}"));
        assert_eq!(r.code, 200, "{r}");
    }
    let mut lines = format!("STOR {name}\r\n");
    if cksm {
        lines += &format!("CKSM XXHC 0 -1 {name}\r\n");
    }
    c.raw(lines.as_bytes());
    assert_eq!(c.reply().code, 150);
    let h = send_bytes(connect_n(addr, 4), data.to_vec(), 256 << 10);
    let code = c.finish().1.code;
    h.join().unwrap().expect("send");
    (code, cksm.then(|| c.reply()))
}

/// The XXHC digest of `data`, as the server computes it.
fn xxhc(data: &[u8]) -> String {
    let mut h = haul_transport::checksum::Hasher::new(haul_transport::checksum::Algorithm::Xxhc);
    h.update(data);
    h.finish_hex()
}

#[test]
fn an_announced_large_upload_goes_around_the_cache_and_arrives_whole() {
    let Some(d) = disk_dir() else { return };
    let data = random_bytes(LEN, 61);
    let len = Some(LEN as u64);

    let (code, ck) = upload(d.path(), "direct", &data, len, true, true);
    assert_eq!(code, 226);
    let ck = ck.unwrap();
    assert_eq!(ck.code, 213, "{ck}");
    assert!(ck.text().contains(&xxhc(&data)), "{ck}");
    let f = d.path().join("direct");
    let held = cached(&f);
    assert!(
        held < 1 << 20,
        "{held} bytes of an upload written around the cache are in it"
    );
    assert!(fs::read(&f).unwrap() == data, "identical copy");

    // Through the cache: without ALLO the server cannot know the upload is large; without the
    // pipelined CKSM a digest asked for later would read it back; or turned off.
    for (name, allo, cksm, on) in [
        ("unannounced", None, true, true),
        ("unhashed", len, false, true),
        ("off", len, true, false),
    ] {
        assert_eq!(upload(d.path(), name, &data, allo, cksm, on).0, 226);
        let f = d.path().join(name);
        let held = cached(&f);
        assert!(held > (LEN / 2) as u64, "{name}: only {held} bytes cached");
        assert!(fs::read(&f).unwrap() == data, "{name}: identical copy");
    }
}

/// The space `ALLO` reserved beyond what came is given back: the file is as long as its data.
#[test]
fn an_allo_larger_than_the_upload_leaves_the_file_its_own_length() {
    let Some(d) = disk_dir() else { return };
    let data = random_bytes(LEN, 62);
    let said = LEN as u64 + (10 << 20);
    assert_eq!(upload(d.path(), "f", &data, Some(said), true, true).0, 226);
    let f = d.path().join("f");
    assert_eq!(fs::metadata(&f).unwrap().len(), LEN as u64);
    assert!(fs::read(&f).unwrap() == data, "identical copy");
    assert!(
        !d.path().join(".f.haul-part").exists(),
        "the part file was renamed"
    );
}
