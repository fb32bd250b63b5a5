//! Large downloads to a local disk are written around the page cache (`O_DIRECT`) when nothing
//! reads them back as they arrive, and still arrive whole and verified; `--no-direct-io` and
//! a digest that needs the file read back keep them in the cache.
mod common;

use common::haul::*;

use std::fs;
use std::path::Path;

/// 64 MiB, the smallest file written around the cache, and an unaligned tail.
const LEN: usize = (64 << 20) + 12_345;

const MARK: &str = "written around the page cache (O_DIRECT)";

/// Downloads `f.bin` with `extra` flags and `HAUL_LOG=debug`: the `--json` summary and
/// whether the client wrote the file around the cache.
fn download(
    addr: &str,
    dst: &Path,
    hist: &Path,
    extra: &[&str],
    env: &[(&str, &str)],
) -> (serde_json::Value, bool) {
    let url = format!("ftp://{addr}/f.bin");
    let mut args = vec!["-q", "--json", "-p", "4"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&[&url, dst.to_str().unwrap()]);
    let mut env = env.to_vec();
    env.push(("HAUL_LOG", "haul_xfer=debug"));
    let out = cp_env(&args, hist, &env);
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "haul cp failed: {log}");
    (
        serde_json::from_slice(&out.stdout).unwrap(),
        log.contains(MARK),
    )
}

/// A temporary directory on a disk file system, or None (with the reason printed) when the
/// one here is tmpfs, where there is nothing to write around.
fn disk_dir() -> Option<tempfile::TempDir> {
    let d = tempfile::tempdir().unwrap();
    let probe = fs::File::create(d.path().join("probe")).unwrap();
    if haul_transport::io::on_tmpfs(&probe) {
        eprintln!(
            "SKIP: {} is tmpfs; O_DIRECT needs a disk file system",
            d.path().display()
        );
        return None;
    }
    Some(d)
}

/// A disk directory with `root/f.bin` (random bytes from `seed`) served by `haul serve`.
fn served(seed: u64) -> Option<(tempfile::TempDir, Vec<u8>, Serve)> {
    let d = disk_dir()?;
    let root = d.path().join("root");
    fs::create_dir_all(&root).unwrap();
    let data = random_bytes(LEN, seed);
    fs::write(root.join("f.bin"), &data).unwrap();
    settle(&root.join("f.bin"));
    let srv = serve(&root, &["--anonymous"]);
    Some((d, data, srv))
}

#[test]
fn a_large_download_goes_around_the_cache_and_verifies() {
    let Some((d, data, srv)) = served(91) else {
        return;
    };
    let hist = d.path().join("h.sqlite");

    let dst = d.path().join("direct.bin");
    let (j, around) = download(&srv.addr, &dst, &hist, &[], &[]);
    assert!(
        around,
        "a 64 MiB XXHC-verified download is written around the cache"
    );
    assert_eq!(j["checksum"], "XXHC");
    assert_eq!(j["verified_files"], 1);
    assert!(fs::read(&dst).unwrap() == data, "identical copy");

    let dst = d.path().join("buffered.bin");
    let (j, around) = download(&srv.addr, &dst, &hist, &["--no-direct-io"], &[]);
    assert!(!around, "--no-direct-io keeps it in the cache");
    assert_eq!(j["verified_files"], 1);
    assert!(fs::read(&dst).unwrap() == data, "identical copy");

    // MD5 is computed by reading the copy back as it grows: that read wants the cache.
    let dst = d.path().join("md5.bin");
    let (j, around) = download(&srv.addr, &dst, &hist, &["--checksum", "md5"], &[]);
    assert!(
        !around,
        "a digest read back from the file keeps it in the cache"
    );
    assert_eq!(j["verified_files"], 1);
    assert!(fs::read(&dst).unwrap() == data, "identical copy");
}

/// A byte flipped on arrival in a file written around the cache: only its chunk is sent again
/// and the repaired copy is identical.
#[test]
fn a_flipped_byte_in_a_direct_download_resends_only_its_chunk() {
    let Some((d, data, srv)) = served(92) else {
        return;
    };
    let at = (40 << 20) + 4_097;
    let fp = format!("xfer::flip_received_byte=1*return({at})");
    let dst = d.path().join("out.bin");
    let (j, around) = download(
        &srv.addr,
        &dst,
        &d.path().join("h.sqlite"),
        &[],
        &[("FAILPOINTS", &fp)],
    );
    assert!(around, "written around the cache");
    assert_eq!(
        j["chunks_resent_bytes"],
        1 << 20,
        "only the flipped byte's chunk"
    );
    assert_eq!(j["retransferred_files"], 0);
    assert_eq!(j["verified_files"], 1);
    assert!(
        fs::read(&dst).unwrap() == data,
        "the repaired copy is identical"
    );
}
