//! XXHC, haul's chunked digest between haul peers: both ends hash a download as it passes, and
//! a mismatch re-sends only the chunks that differ. The `xfer::flip_received_byte` fail point,
//! built into this test's `haul` through the `failpoints` feature, flips one received byte
//! before the client hashes and writes it, as corruption past TCP's checksum would.
mod common;

use common::haul::*;

use std::fs;
use std::path::Path;

const CHUNK: u64 = 1 << 20;
/// Six chunks, the last one short.
const LEN: usize = 5 * CHUNK as usize + 12_345;

/// A source file the server may hash while it sends it: last written an hour ago, so its
/// identity vouches for its content.
fn source(root: &Path) -> Vec<u8> {
    let data = random_bytes(LEN, 77);
    let p = root.join("f.bin");
    fs::write(&p, &data).unwrap();
    settle(&p);
    data
}

fn download(addr: &str, dst: &Path, hist: &Path, flip: Option<u64>) -> serde_json::Value {
    let url = format!("ftp://{addr}/f.bin");
    let fp = flip.map(|at| format!("xfer::flip_received_byte=1*return({at})"));
    let env: Vec<(&str, &str)> = fp.iter().map(|v| ("FAILPOINTS", v.as_str())).collect();
    let out = cp_env(
        &["-q", "--json", "-p", "4", &url, dst.to_str().unwrap()],
        hist,
        &env,
    );
    assert!(out.status.success(), "haul cp failed");
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn haul_peers_verify_with_xxhc_and_a_clean_copy_resends_nothing() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("root");
    fs::create_dir_all(&root).unwrap();
    let data = source(&root);
    let srv = serve(&root, &["--anonymous"]);
    let dst = d.path().join("out.bin");
    let j = download(&srv.addr, &dst, &d.path().join("h.sqlite"), None);
    assert_eq!(j["checksum"], "XXHC", "haul peers agree on XXHC");
    assert_eq!(j["verified_files"], 1);
    assert_eq!(j["chunks_resent_bytes"], 0);
    assert_eq!(j["retransferred_files"], 0);
    assert_eq!(fs::read(&dst).unwrap(), data);
}

/// The client queues its `CKSM` with the `RETR` in one write, so the server finds it when it
/// starts sending, hashes the file on the way out and answers from that digest: the file is
/// read once. When the two went out in separate writes, a server that looked before the
/// second arrived read the whole file again (about half the downloads of a 1 GiB file here).
#[test]
fn the_servers_digest_comes_from_the_send_not_a_second_read() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("root");
    fs::create_dir_all(&root).unwrap();
    let data = source(&root);
    let (srv, metrics) = serve_with_metrics(&root, &["--anonymous"]);
    const RUNS: usize = 8;
    for i in 0..RUNS {
        let dst = d.path().join(format!("out-{i}.bin"));
        let j = download(&srv.addr, &dst, &d.path().join("h.sqlite"), None);
        assert_eq!(j["verified_files"], 1);
        assert!(fs::read(&dst).unwrap() == data, "run {i}: identical copy");
    }
    let text = http_get(&metrics, "/metrics");
    let transit = metric(&text, "haul_serve_checksums_total{source=\"transit\"}");
    let file = metric(&text, "haul_serve_checksums_total{source=\"file\"}");
    let reread = metric(&text, "haul_serve_checksum_read_bytes_total");
    assert_eq!(
        (transit, file, reread),
        (RUNS as f64, 0.0, 0.0),
        "every CKSM answered from the digest made while sending:\n{text}"
    );
}

#[test]
fn a_flipped_byte_resends_only_its_chunk() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("root");
    fs::create_dir_all(&root).unwrap();
    let data = source(&root);
    let srv = serve(&root, &["--anonymous"]);
    // The first chunk, one in the middle, and the short last one.
    for (at, chunk_len) in [
        (7, CHUNK),
        (3 * CHUNK + 100, CHUNK),
        (LEN as u64 - 1, LEN as u64 - 5 * CHUNK),
    ] {
        let dst = d.path().join(format!("out-{at}.bin"));
        let j = download(&srv.addr, &dst, &d.path().join("h.sqlite"), Some(at));
        assert_eq!(
            j["chunks_resent_bytes"], chunk_len,
            "byte {at}: only its chunk was sent again"
        );
        assert_eq!(j["retransferred_files"], 0, "byte {at}: not the whole file");
        assert_eq!(j["verified_files"], 1);
        assert_eq!(j["bytes"], LEN as u64, "the payload counts the file once");
        assert!(
            fs::read(&dst).unwrap() == data,
            "byte {at}: the repaired copy is identical"
        );
    }
}

/// An upload whose sent bytes were corrupted after the client hashed them (fail point
/// `xfer::flip_sent_byte`): the server's chunk list names the chunk, only it is sent again,
/// and the server's copy ends up identical.
#[test]
fn an_upload_with_a_flipped_byte_resends_only_its_chunk() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("root");
    fs::create_dir_all(&root).unwrap();
    let local = d.path().join("local.bin");
    let data = random_bytes(LEN, 78);
    fs::write(&local, &data).unwrap();
    let srv = serve(&root, &["--anonymous", "--anonymous-write"]);
    let at = 2 * CHUNK + 4242;
    let fp = format!("xfer::flip_sent_byte=1*return({at})");
    let url = format!("ftp://{}/up.bin", srv.addr);
    let out = cp_env(
        &["-q", "--json", "-p", "4", local.to_str().unwrap(), &url],
        &d.path().join("h.sqlite"),
        &[("FAILPOINTS", fp.as_str())],
    );
    assert!(out.status.success(), "haul cp failed");
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["checksum"], "XXHC");
    assert_eq!(j["chunks_resent_bytes"], CHUNK, "only the corrupted chunk");
    assert_eq!(j["retransferred_files"], 0);
    assert_eq!(j["verified_files"], 1);
    assert!(
        fs::read(root.join("up.bin")).unwrap() == data,
        "the server's copy is identical"
    );
}

/// `haul serve --sendfile`: the server hashes what it reads for the pipelined CKSM and sends
/// the file's pages with sendfile; the download arrives whole and verified, over one stream
/// (MODE E on the caller's thread) and four.
#[test]
fn a_sendfile_server_serves_verified_downloads() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("root");
    fs::create_dir_all(&root).unwrap();
    let data = source(&root);
    let srv = serve(&root, &["--anonymous", "--sendfile"]);
    for p in ["1", "4"] {
        let dst = d.path().join(format!("out-{p}.bin"));
        let url = format!("ftp://{}/f.bin", srv.addr);
        let out = cp(
            &["-q", "--json", "-p", p, &url, dst.to_str().unwrap()],
            &d.path().join("h.sqlite"),
        );
        assert!(out.status.success(), "haul cp -p {p} failed");
        let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(j["checksum"], "XXHC");
        assert_eq!(j["verified_files"], 1);
        assert!(fs::read(&dst).unwrap() == data, "-p {p}: identical");
    }
}
