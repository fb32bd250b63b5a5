//! `haul send` re-plans mid-transfer: a TCP download that runs far below its prediction (a fail
//! point slows TCP downloads to 2 MB/s) is stopped, its live rate replaces the estimate, the
//! plan moves to PLUT, and the file continues (`--resume`) and arrives verified, byte-identical;
//! and a direct TCP download slowed the same way is re-routed through a relay and resumes there.
mod common;

use std::fs;
use std::path::PathBuf;

use common::haul::*;

/// `haul serve --anonymous` over one file `f` of `len` random bytes: the temp dir, the bytes,
/// the server, a history path and the file's URL.
fn served(len: usize, seed: u64) -> (tempfile::TempDir, Vec<u8>, Serve, PathBuf, String) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    fs::create_dir_all(&root).unwrap();
    let data = random_bytes(len, seed);
    fs::write(root.join("f"), &data).unwrap();
    let srv = serve(&root, &["--anonymous"]);
    let hist = dir.path().join("h.sqlite");
    let src = format!("ftp://{}/f", srv.addr);
    (dir, data, srv, hist, src)
}

#[test]
fn a_copy_far_below_its_prediction_is_re_planned_and_completes_verified() {
    let (dir, data, _srv, hist, src) = served(24 << 20, 7);
    // A first send with a budget: both transports probed, TCP (fast on loopback) chosen.
    let (out, j) = send_json(
        &src,
        &dir.path().join("a"),
        &hist,
        &["--profile-budget", "2s"],
        &[],
    );
    assert!(out.status.success(), "{j:#}");
    assert_eq!(j["chosen"]["transport"], "tcp", "{j:#}");
    assert_eq!(j["attempts"].as_array().map(Vec::len), Some(1), "{j:#}");
    // The same download with TCP slowed to 2 MB/s: judged after 3 s over a 2 s window.
    let b = dir.path().join("b");
    let slow = [("FAILPOINTS", "xfer::tcp_sink_rate=return(2000000)")];
    let (out, j) = send_json(&src, &b, &hist, &["--replan-window", "2s"], &slow);
    assert!(out.status.success(), "{j:#}");
    let attempts = j["attempts"].as_array().expect("attempts");
    assert_eq!(attempts.len(), 2, "{j:#}");
    assert_eq!(attempts[0]["transport"], "tcp", "{j:#}");
    let why = attempts[0]["stopped"].as_str().unwrap_or("");
    assert!(why.contains("under half the predicted"), "{j:#}");
    assert!(
        attempts[0]["bytes"].as_u64().unwrap() < data.len() as u64,
        "the slowed copy was stopped before the end: {j:#}"
    );
    assert_eq!(attempts[1]["transport"], "plut", "{j:#}");
    assert!(attempts[1]["stopped"].is_null(), "{j:#}");
    assert_eq!(j["transfer"]["verified_files"], 1, "{j:#}");
    assert_eq!(
        j["transfer"]["transport"], "plut",
        "the copy that finished: {j:#}"
    );
    assert_eq!(fs::read(&b).unwrap(), data, "the re-planned copy differs");
    // The plan in force names the live rate the TCP estimate was replaced with.
    let live = j["zones"][1]["modules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == "tcp")
        .map(|m| m["terms"][0]["source"].as_str().unwrap_or("").to_string());
    assert!(
        live.as_deref().unwrap_or("").starts_with("live:"),
        "{live:?}"
    );
    // Nothing of the stopped copy is left beside the file.
    let left: Vec<_> = fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains("haul-part"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn without_re_planning_the_slow_copy_runs_to_its_end() {
    let (dir, data, _srv, hist, src) = served(6 << 20, 9);
    let (out, _) = send_json(
        &src,
        &dir.path().join("a"),
        &hist,
        &["--profile-budget", "2s"],
        &[],
    );
    assert!(out.status.success());
    let b = dir.path().join("b");
    let slow = [("FAILPOINTS", "xfer::tcp_sink_rate=return(2000000)")];
    let (out, j) = send_json(&src, &b, &hist, &["--replan-window", "0"], &slow);
    assert!(out.status.success(), "{j:#}");
    let attempts = j["attempts"].as_array().expect("attempts");
    assert_eq!(attempts.len(), 1, "{j:#}");
    assert_eq!(attempts[0]["transport"], "tcp", "{j:#}");
    assert!(
        j["transfer"]["duration_s"].as_f64().unwrap() > 2.0,
        "the fail point slowed it: {j:#}"
    );
    assert_eq!(fs::read(&b).unwrap(), data);
}

/// The thesis's future work (002 §6): a direct download that runs far below its prediction is
/// moved to the route through a relay, resumes from what has arrived and verifies.
#[test]
fn a_direct_copy_far_below_its_prediction_is_re_routed_through_the_relay() {
    let (dir, data, srv, hist, src) = served(24 << 20, 13);
    let relay = relay_for_loopback(&dir.path().join("root"));
    let config = services_config(dir.path(), &relay.addr);
    let cfg = ("XDG_CONFIG_HOME", config.to_str().unwrap());
    // Two copies teach the history both routes' rates: through the relay slowed to 20 MB/s,
    // direct at loopback speed, so that the plan prefers direct.
    let nested = format!("ftp://{}/{src}", relay.addr);
    let slow_relay = [("FAILPOINTS", "xfer::relayed_tcp_sink_rate=return(20000000)")];
    for (from, to, env) in [(&nested, "a1", &slow_relay[..]), (&src, "a2", &[])] {
        let out = cp_env(&[from, dir.path().join(to).to_str().unwrap()], &hist, env);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let tcp = ["--transports", "tcp"];
    let via = format!("via {}", relay.addr);
    // Now direct TCP is slowed to 2 MB/s and the relay is not.
    let b = dir.path().join("b");
    let slow = ("FAILPOINTS", "xfer::direct_tcp_sink_rate=return(2000000)");
    let args = [&tcp[..], &["--replan-window", "2s"]].concat();
    let (out, j) = send_json(&src, &b, &hist, &args, &[cfg, slow]);
    assert!(out.status.success(), "{j:#}");
    let attempts = j["attempts"].as_array().expect("attempts");
    assert_eq!(attempts.len(), 2, "{j:#}");
    assert_eq!(attempts[0]["route"], "direct", "{j:#}");
    let why = attempts[0]["stopped"].as_str().unwrap_or("");
    assert!(why.contains("under half the predicted"), "{j:#}");
    let first = attempts[0]["bytes"].as_u64().unwrap();
    assert!(first > 0 && first < data.len() as u64, "{j:#}");
    assert_eq!(attempts[1]["route"], via.as_str(), "{j:#}");
    assert!(attempts[1]["stopped"].is_null(), "{j:#}");
    assert!(
        attempts[1]["bytes"].as_u64().unwrap() < data.len() as u64,
        "the relayed copy resumed from what had arrived: {j:#}"
    );
    assert_eq!(j["transfer"]["verified_files"], 1, "{j:#}");
    assert_eq!(fs::read(&b).unwrap(), data, "the re-routed copy differs");
    drop(srv);
}
