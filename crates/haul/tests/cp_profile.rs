//! A profile's settings carried into a transfer: `haul profile tune --json` against a real
//! `haul profile serve` on loopback, then `haul cp --profile` moves a file with the streams,
//! block and socket buffer of the tune's best θ; flags given on the command line still win, and
//! a profile of another transport is refused.
mod common;

use common::haul::*;

use std::fs;
use std::process::{Child, Command};

struct Profiler(Child);

impl Drop for Profiler {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `haul profile serve` on a free loopback port, and its address.
fn profile_server() -> (Profiler, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_haul"));
    cmd.args(["profile", "serve", "--listen", "127.0.0.1:0"]);
    let (child, addr) = listening(cmd, "haul profile serve: listening on ");
    (Profiler(child), addr)
}

fn cp_json(args: &[&str], hist: &std::path::Path) -> serde_json::Value {
    let out = cp(args, hist);
    assert!(out.status.success());
    serde_json::from_slice(&out.stdout).expect("haul cp --json")
}

#[test]
fn a_tune_result_sets_the_streams_block_and_buffer_of_a_copy() {
    let dir = tempfile::tempdir().unwrap();
    let (_profiler, addr) = profile_server();
    // A short FastProf run: 3 streams, blocks of 4-20 payloads (5.8-29 KB), buffers 2-6 MiB.
    let tune = Command::new(env!("CARGO_BIN_EXE_haul"))
        .args([
            "profile",
            "tune",
            &addr,
            "-P",
            "3",
            "-t",
            "0.3",
            "--max-probes",
            "4",
        ])
        .args(["--block-range", "4:20", "--buffer-range", "2M:6M", "--json"])
        .output()
        .expect("run haul profile tune");
    assert!(
        tune.status.success(),
        "{}",
        String::from_utf8_lossy(&tune.stderr)
    );
    let result: serde_json::Value = serde_json::from_slice(&tune.stdout).expect("tune JSON");
    let best = &result["best_params"];
    let (block, buffer) = (
        best["block"].as_u64().unwrap(),
        best["buffer"].as_u64().unwrap(),
    );
    assert_eq!(best["streams"], 3);
    assert!(
        (4096..1 << 20).contains(&block),
        "a block unlike the default 1 MiB: {block}"
    );
    assert!((2 << 20..=6 << 20).contains(&buffer), "{buffer}");
    let profile = dir.path().join("tune.json");
    fs::write(&profile, &tune.stdout).unwrap();

    let root = dir.path().join("root");
    fs::create_dir(&root).unwrap();
    fs::write(root.join("f"), random_bytes(3 << 20, 9)).unwrap();
    let s = serve(&root, &["--anonymous"]);
    let url = format!("ftp://{}/f", s.addr);
    let hist = dir.path().join("h.sqlite");
    let dst = dir.path().join("f");
    let p = profile.to_str().unwrap();
    let j = cp_json(
        &["--json", "--profile", p, &url, dst.to_str().unwrap()],
        &hist,
    );
    assert_eq!(j["parallelism"], 3);
    assert_eq!(j["block"], block);
    assert_eq!(j["tcp_buffer"], buffer);
    assert_eq!(j["verified_files"], 1);
    assert_eq!(fs::read(&dst).unwrap(), fs::read(root.join("f")).unwrap());

    // Without the profile: the defaults.
    let j = cp_json(&["--json", &url, dst.to_str().unwrap()], &hist);
    assert_eq!(
        (j["parallelism"].as_u64(), j["block"].as_u64()),
        (Some(4), Some(1 << 20))
    );
    assert!(j["tcp_buffer"].is_null());

    // Flags given win over the profile; what they leave out still comes from it.
    let args = [
        "--json",
        "--profile",
        p,
        "-p",
        "2",
        "--block",
        "64K",
        &url,
        dst.to_str().unwrap(),
    ];
    let j = cp_json(&args, &hist);
    assert_eq!(
        (j["parallelism"].as_u64(), j["block"].as_u64()),
        (Some(2), Some(65536))
    );
    assert_eq!(j["tcp_buffer"], buffer);

    // A profile of UDP cannot set up TCP streams.
    let mut udp = result.clone();
    udp["best_params"]["transport"] = "udp".into();
    let other = dir.path().join("udp.json");
    fs::write(&other, udp.to_string()).unwrap();
    let out = cp(
        &[
            "--profile",
            other.to_str().unwrap(),
            &url,
            dst.to_str().unwrap(),
        ],
        &hist,
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        err.contains("measured udp") && err.contains("only from"),
        "{err}"
    );

    // A UDT profile sets up `--transport udt`, and only that.
    let mut udt = result.clone();
    udt["best_params"]["transport"] = "udt".into();
    let udt_json = dir.path().join("udt.json");
    fs::write(&udt_json, udt.to_string()).unwrap();
    let out = cp(
        &[
            "--profile",
            udt_json.to_str().unwrap(),
            &url,
            dst.to_str().unwrap(),
        ],
        &hist,
    );
    assert!(!out.status.success(), "a UDT profile for a TCP copy");
    if haul_transport::udt::AVAILABLE {
        let args = [
            "--json",
            "--transport",
            "udt",
            "--profile",
            udt_json.to_str().unwrap(),
        ];
        let j = cp_json(&[&args[..], &[&url, dst.to_str().unwrap()]].concat(), &hist);
        assert_eq!(j["transport"], "udt");
        assert_eq!(j["block"], result["best_params"]["block"]);
    }
}
