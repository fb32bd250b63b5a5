//! `haul send` with relays, as real binaries against a `haul serve` origin and a `haul serve
//! --relay-allow` relay on loopback: a relay listed only in the user's services file
//! (`$XDG_CONFIG_HOME/haul/services.toml`) is a route of the plan; with nothing known of it,
//! send probes it memory to memory through the relay itself (the origin's `/dev/zero`, relayed)
//! and records the probe; the split threshold keeps a route no faster than direct out of the
//! plan; the next send reads the route's rate from the history and probes nothing.
mod common;

use std::fs;
use std::path::Path;
use std::process::{Command, Output};

use common::haul::*;
use serde_json::Value;

/// `haul send SRC DST --json --history HIST EXTRA` with `XDG_CONFIG_HOME=CONFIG`.
fn send(src: &str, dst: &Path, hist: &Path, config: &Path, extra: &[&str]) -> (Output, Value) {
    send_json(
        src,
        dst,
        hist,
        extra,
        &[("XDG_CONFIG_HOME", config.to_str().unwrap())],
    )
}

/// Whether the plan in `j` had the route `via`: among its combinations, or left out with a note
/// containing `why`.
fn seen(j: &Value, via: &str, why: &str) -> bool {
    let planned = j["combinations"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["route"] == via);
    planned
        || notes(j)
            .iter()
            .any(|n| n.starts_with(&format!("{via}: not planned")) && n.contains(why))
}

fn notes(j: &Value) -> Vec<String> {
    let n = j["notes"].as_array().expect("notes");
    n.iter().map(|n| n.as_str().unwrap().to_string()).collect()
}

#[test]
fn send_probes_a_configured_relay_through_itself_and_the_next_send_reads_the_history() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    fs::create_dir_all(&root).unwrap();
    let body: Vec<u8> = (0..40u32 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    fs::write(root.join("f.bin"), &body).unwrap();
    let origin = serve(&root, &["--anonymous"]);
    let relay = relay_for_loopback(&dir.path().join("root"));
    let config = services_config(dir.path(), &relay.addr);
    // A registry the services file names that is down costs a note, nothing more.
    let down = {
        let closed_after = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        closed_after.local_addr().unwrap().to_string()
    };
    let services = config.join("haul/services.toml");
    let priced = fs::read_to_string(&services).unwrap();
    fs::write(&services, format!("registry = [\"{down}\"]\n{priced}")).unwrap();
    let hist = dir.path().join("h.sqlite");
    let src = format!("ftp://{}/f.bin", origin.addr);
    let via = format!("via {}", relay.addr);

    // Cold: every transport and the relayed route are probed, the route through the relay.
    let a = dir.path().join("a.bin");
    let extra = ["--profile-budget", "3s", "--threshold", "0"];
    let (out, j) = send(&src, &a, &hist, &config, &extra);
    assert!(out.status.success(), "{j:#}");
    assert_eq!(fs::read(&a).unwrap(), body);
    let probes = j["probes"].as_array().expect("probes").clone();
    let p = probes.iter().find(|p| p["stage"] == "route");
    let p = p.unwrap_or_else(|| panic!("no probe through the relay: {j:#}"));
    let skipped = format!("registry {down}");
    assert!(notes(&j).iter().any(|n| n.starts_with(&skipped)), "{j:#}");
    assert!(p["error"].is_null(), "{p:#}");
    assert!(p["bps"].as_f64().unwrap() > 0.0, "{p:#}");
    let relayed: Vec<Value> = history(&hist, "probe")
        .into_iter()
        .filter(|r| r["source"].as_str().unwrap().contains("/ftp://"))
        .collect();
    assert_eq!(relayed.len(), 1, "{relayed:#?}");
    let want = format!("ftp://{}/ftp://{}/dev/zero", relay.addr, origin.addr);
    assert_eq!(relayed[0]["source"], want.as_str(), "{:#}", relayed[0]);
    assert_eq!(relayed[0]["destination"], "/dev/null");
    // The route is planned or, no faster than direct, left out by the threshold with a note;
    // either way the plan has seen it.
    assert!(seen(&j, &via, "0 % over direct"), "{j:#}");

    // Warm: the route's rate comes from the history; nothing is probed.
    let b = dir.path().join("b.bin");
    let (out, j) = send(&src, &b, &hist, &config, &["--threshold", "0"]);
    assert!(out.status.success(), "{j:#}");
    assert_eq!(fs::read(&b).unwrap(), body);
    assert_eq!(j["probes"].as_array().map(Vec::len), Some(0), "{j:#}");
    assert!(seen(&j, &via, "not planned"), "{j:#}");
}

#[test]
fn a_large_transfer_tries_direct_and_the_relay_on_the_real_data_and_keeps_every_byte() {
    // The relay's trial, last and leading, runs on as the copy.
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    fs::create_dir_all(&root).unwrap();
    // Four warm-ups' worth per candidate (direct, the relay): 256 MiB at least; more than two
    // trials move.
    let len = 400usize << 20;
    let body = random_bytes(len, 11);
    fs::write(root.join("f.bin"), &body).unwrap();
    let origin = serve(&root, &["--anonymous"]);
    let relay = relay_for_loopback(&root);
    let config = dir.path().join("config");
    let hist = dir.path().join("h.sqlite");
    let a = dir.path().join("a.bin");
    // Direct TCP downloads slowed to 20 MB/s, relayed ones to 40: neither trial (5 s of data)
    // can finish the file, and the relay's leads.
    let (out, j) = send_json(
        &format!("ftp://{}/f.bin", origin.addr),
        &a,
        &hist,
        // TCP only: PLUT, not slowed, would win the plan.
        &["--relays", &relay.addr, "--transports", "tcp"],
        &[
            ("XDG_CONFIG_HOME", config.to_str().unwrap()),
            (
                "FAILPOINTS",
                "xfer::direct_tcp_sink_rate=return(20000000);\
                 xfer::relayed_tcp_sink_rate=return(40000000)",
            ),
        ],
    );
    assert!(out.status.success(), "{j:#}");
    assert!(fs::read(&a).unwrap() == body, "the copy differs");
    assert_eq!(j["transfer"]["verified_files"], 1, "{j:#}");
    let attempts = j["attempts"].as_array().expect("attempts").clone();
    assert!(attempts.len() >= 2, "{j:#}");
    assert_eq!(attempts[0]["route"], "direct", "{j:#}");
    assert_eq!(attempts[0]["trial"], true, "{j:#}");
    assert!(
        attempts[0]["stopped"]
            .as_str()
            .unwrap_or("")
            .contains("trial"),
        "{j:#}"
    );
    assert_eq!(attempts[1]["route"], format!("via {}", relay.addr), "{j:#}");
    assert_eq!(attempts[1]["trial"], false, "ran on as the copy: {j:#}");
    assert_eq!(attempts[1]["stopped"], Value::Null, "{j:#}");
    assert_eq!(attempts.len(), 2, "{j:#}");
    assert_eq!(j["chosen"]["route"], attempts[1]["route"], "{j:#}");
    assert!(attempts[1]["predicted_bps"].as_f64().is_some(), "{j:#}");
    // Its time after the plan chose it is transfer time, not profiling.
    let st = &j["stages"];
    let (profile, transfer) = (
        st["profile_s"].as_f64().unwrap(),
        st["transfer_s"].as_f64().unwrap(),
    );
    assert!(transfer > 0.0, "{j:#}");
    let trials: f64 = attempts
        .iter()
        .map(|a| a["seconds"].as_f64().unwrap())
        .sum();
    assert!((profile + transfer - trials).abs() < 1.0, "{j:#}");
    // What the first trial moved was kept: the later copies brought only the rest (blocks in
    // flight when a trial stopped may come again).
    let moved: u64 = attempts.iter().map(|a| a["bytes"].as_u64().unwrap()).sum();
    assert!(moved >= len as u64, "{moved} < {len}: {j:#}");
    assert!(
        moved <= len as u64 + (16 << 20),
        "{moved} moved for {len}: {j:#}"
    );
    let first = attempts[0]["bytes"].as_u64().unwrap();
    assert!(
        first > 64 << 20,
        "the direct trial moved only {first}: {j:#}"
    );
    // Both candidates were measured on the real data.
    let srcs: Vec<String> = j["zones"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|z| z["modules"].as_array().unwrap().clone())
        .flat_map(|m| m["terms"].as_array().cloned().unwrap_or_default())
        .filter_map(|t| t["source"].as_str().map(String::from))
        .collect();
    assert!(
        srcs.iter().filter(|s| s.starts_with("trial:")).count() >= 2,
        "{srcs:#?}"
    );
}

#[test]
fn a_malformed_services_file_is_an_error_that_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    fs::create_dir_all(&root).unwrap();
    fs::write(root.join("f"), b"x").unwrap();
    let origin = serve(&root, &["--anonymous"]);
    let config = dir.path().join("config");
    fs::create_dir_all(config.join("haul")).unwrap();
    fs::write(config.join("haul/services.toml"), "[[relay]]\nadress = 1\n").unwrap();
    let (out, _) = send(
        &format!("ftp://{}/f", origin.addr),
        &dir.path().join("f"),
        &dir.path().join("h.sqlite"),
        &config,
        &[],
    );
    assert!(!out.status.success());
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("services.toml"), "{e}");
}

/// The history's records of `kind`.
fn history(hist: &Path, kind: &str) -> Vec<Value> {
    let out = Command::new(env!("CARGO_BIN_EXE_haul"))
        .args([
            "history",
            "--json",
            "--limit",
            "100",
            "--kind",
            kind,
            "--history",
        ])
        .arg(hist)
        .output()
        .expect("run haul history");
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v.as_array().expect("records").clone()
}
