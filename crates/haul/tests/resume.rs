//! A `haul cp` killed mid-file resumes with `--resume`, moving only the missing ranges; the
//! final file is bit-identical. Runs against the real globus-gridftp-server.
mod common;

use common::haul::*;

use std::fs;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::globus::*;

#[test]
fn killed_download_resumes_with_only_missing_ranges() {
    if skip_without_globus("resume") {
        return;
    }
    let srv_dir = tempfile::tempdir().unwrap();
    let local = tempfile::tempdir().unwrap();
    let hist = local.path().join("h.sqlite");
    let size = 48 << 20;
    let data = random_bytes(size, 11);
    fs::write(srv_dir.path().join("big.bin"), &data).unwrap();
    let srv = GlobusServer::start(srv_dir.path()).expect("start globus-gridftp-server");
    let dst = local.path().join("big.bin");
    let part = local.path().join("big.bin.haul-part");
    let journal = local.path().join("big.bin.haul-part.ranges");

    // 12 MiB/s: the 48 MiB file takes ~4 s, so the kill lands mid-file.
    let mut child = Command::new(env!("CARGO_BIN_EXE_haul"))
        .args([
            "cp",
            "-p",
            "4",
            "--max-rate",
            "12MiB/s",
            "--sample-ms",
            "100",
            &srv.url("big.bin"),
            dst.to_str().unwrap(),
        ])
        .arg("--history")
        .arg(&hist)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let held = common_ranges(&journal);
        if held >= 8 << 20 {
            break;
        }
        assert!(Instant::now() < deadline, "download never reached 8 MiB");
        assert!(
            child.try_wait().unwrap().is_none(),
            "haul cp ended before it could be killed"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        !dst.exists(),
        "an unverified file must not appear under its final name"
    );
    assert!(part.exists(), "the partial file is kept");
    let held = common_ranges(&journal);
    assert!(
        held > 0 && held < size as u64,
        "journal holds part of the file: {held}"
    );

    let out = Command::new(env!("CARGO_BIN_EXE_haul"))
        .args([
            "cp",
            "--resume",
            "--json",
            "-p",
            "4",
            &srv.url("big.bin"),
            dst.to_str().unwrap(),
        ])
        .arg("--history")
        .arg(&hist)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let moved = j["bytes"].as_u64().unwrap();
    assert!(
        moved <= size as u64 - held,
        "resume moved {moved} bytes, but {held} were already held"
    );
    assert_eq!(j["verified_files"], 1);
    assert_eq!(fs::read(&dst).unwrap(), data, "resumed file differs");
    assert!(
        !part.exists() && !journal.exists(),
        "restart state is cleaned up"
    );
}

fn common_ranges(journal: &std::path::Path) -> u64 {
    let Ok(s) = fs::read_to_string(journal) else {
        return 0;
    };
    haul_proto::RangeSet::parse(&s)
        .map(|r| r.covered())
        .unwrap_or(0)
}
