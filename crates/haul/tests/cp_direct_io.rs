//! Large downloads to a local disk are written around the page cache (`O_DIRECT`) when nothing
//! reads them back as they arrive, and still arrive whole and verified; `--no-direct-io` and
//! a digest that needs the file read back keep them in the cache. Uploads announce their size
//! (`ALLO`, as `globus-url-copy` does) and `haul serve` writes large ones around its cache.
mod common;

use common::globus::{file_url, globus_url_copy, skip_without_globus};
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

/// Bytes of `path` in the page cache.
fn cached(path: &Path) -> u64 {
    haul_transport::io::cached_bytes(&fs::File::open(path).unwrap()).unwrap()
}

/// Asserts that `path` holds `data` and whether it is in the page cache (more than half of it)
/// or around it (less than 1 MiB of it), checked before it is read.
fn landed(path: &Path, data: &[u8], in_cache: bool, what: &str) {
    let held = cached(path);
    if in_cache {
        assert!(
            held > (data.len() / 2) as u64,
            "{what}: only {held} bytes cached"
        );
    } else {
        assert!(held < 1 << 20, "{what}: {held} bytes in the server's cache");
    }
    assert!(fs::read(path).unwrap() == data, "{what}: identical copy");
}

/// Uploads announce their size, and `haul serve` writes a large one around its page cache when
/// `haul cp` asks for its XXHC digest in the same breath, or a relay does on its behalf; uploads
/// whose digest is asked for afterwards (by `globus-url-copy`) and `haul serve --no-direct-io`
/// keep it in the cache, where reading it back costs least.
#[test]
fn a_large_upload_goes_around_the_servers_cache_and_verifies() {
    let Some(d) = disk_dir() else {
        return;
    };
    let data = random_bytes(LEN, 93);
    let src = d.path().join("src.bin");
    fs::write(&src, &data).unwrap();
    let (direct, buffered) = (d.path().join("direct"), d.path().join("buffered"));
    fs::create_dir_all(&direct).unwrap();
    fs::create_dir_all(&buffered).unwrap();
    let rw = ["--anonymous", "--anonymous-write"];
    let srv = serve(&direct, &rw);
    let off = serve(&buffered, &[&rw[..], &["--no-direct-io"]].concat());
    let hist = d.path().join("h.sqlite");
    let up = |addr: &str, name: &str| {
        let url = format!("ftp://{addr}/{name}");
        let out = cp(
            &["-q", "--json", "-p", "4", src.to_str().unwrap(), &url],
            &hist,
        );
        assert!(out.status.success(), "haul cp upload failed");
        let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(j["checksum"], "XXHC");
        assert_eq!(j["verified_files"], 1);
    };

    up(&srv.addr, "cp.bin");
    landed(&direct.join("cp.bin"), &data, false, "haul cp");

    // A relay passes the ALLO on and pipelines CKSM XXHC behind its STOR, keeping each chunk
    // on one stream: the origin hashes the chunks as they land and never reads the file back
    // (which would bring it into the cache), and the client's CKSM is answered.
    let relay_root = d.path().join("relay");
    fs::create_dir_all(&relay_root).unwrap();
    let relay = relay_for_loopback(&relay_root);
    up(&format!("{}/ftp://{}", relay.addr, srv.addr), "relayed.bin");
    landed(&direct.join("relayed.bin"), &data, false, "through a relay");

    up(&off.addr, "cp.bin");
    landed(&buffered.join("cp.bin"), &data, true, "--no-direct-io");

    if skip_without_globus("a_large_upload_goes_around_the_servers_cache (globus-url-copy)") {
        return;
    }
    let url = format!("ftp://{}/guc.bin", srv.addr);
    let out = globus_url_copy(&["-p", "4", &file_url(&src), &url]);
    assert!(out.status.success(), "globus-url-copy: {out:?}");
    landed(&direct.join("guc.bin"), &data, true, "globus-url-copy");
}
