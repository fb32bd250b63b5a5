//! Scheduled probes (`haul serve --probe`): a server downloads `/dev/zero` from the servers it
//! is told to probe, records each probe in its history (`kind = probe`) and shares the leg in
//! `SITE BTC` as received from the peer's address. A server without `--probe` probes nothing.
//! Hosts are told apart by loopback address (127.0.0.2 the prober, 127.0.0.3 the peer).
mod common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::haul::*;

/// The history's records of `kind`.
fn records(db: &Path, kind: &str) -> Vec<serde_json::Value> {
    let out = Command::new(env!("CARGO_BIN_EXE_haul"))
        .args(["history", "--kind", kind, "--json", "--history"])
        .arg(db)
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    v.as_array().cloned().unwrap_or_default()
}

/// The server's `SITE BTC`, asked anonymously.
fn btc(addr: &str) -> String {
    let mut c = RawControl::connect(addr);
    assert!(c.cmd("USER anonymous").starts_with("331"));
    assert!(c.cmd("PASS x@").starts_with("230"));
    c.cmd("SITE BTC")
}

/// A server on 127.0.0.3 (`peer`) and one on 127.0.0.2 (`prober`) that probes it every second
/// (1 MiB), with their histories (`pdb`, `qdb`) and roots.
struct Probing {
    peer: Serve,
    prober: Serve,
    pdb: std::path::PathBuf,
    qdb: std::path::PathBuf,
    local: tempfile::TempDir,
    _roots: [tempfile::TempDir; 2],
}

fn probing() -> Probing {
    let [p, q, local] = [(); 3].map(|_| tempfile::tempdir().unwrap());
    let (pdb, qdb) = (local.path().join("p.sqlite"), local.path().join("q.sqlite"));
    let peer = serve_history_on("127.0.0.3", q.path(), &qdb, &[]);
    let prober = serve_history_on(
        "127.0.0.2",
        p.path(),
        &pdb,
        &[
            "--probe",
            &peer.addr,
            "--probe-interval",
            "1s",
            "--probe-bytes",
            "1MiB",
        ],
    );
    Probing {
        peer,
        prober,
        pdb,
        qdb,
        local,
        _roots: [p, q],
    }
}

#[test]
fn a_server_probes_the_peers_it_is_told_to_and_shares_the_legs() {
    let Probing {
        peer,
        prober,
        pdb,
        qdb,
        local,
        _roots,
    } = probing();
    // Two rounds: the first within a second of the start, the next a second on.
    let until = Instant::now() + Duration::from_secs(30);
    let rows = loop {
        let rows = records(&pdb, "probe");
        if rows.len() >= 2 || Instant::now() > until {
            break rows;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(rows.len() >= 2, "probes recorded: {rows:?}");
    for r in &rows {
        assert_eq!(r["outcome"], "ok", "{r}");
        assert_eq!(r["bytes"], 1 << 20, "{r}");
        assert_eq!(r["source"], format!("ftp://{}/dev/zero", peer.addr), "{r}");
        assert_eq!(r["destination"], "/dev/null", "{r}");
    }
    let answer = btc(&prober.addr);
    assert!(
        answer.contains("peer=127.0.0.3;dir=received;"),
        "the probed leg is shared: {answer}"
    );
    // haul route sees the leg peer -> prober that nobody but the probes used.
    let (j, _) = route_json(
        &[
            &format!("ftp://{}/f.bin", peer.addr),
            &format!("ftp://{}/f.bin", prober.addr),
        ],
        &local.path().join("client.sqlite"),
    );
    let direct = j["direct_bps"].as_f64().unwrap_or(0.0);
    assert!(direct > 0.0, "the direct leg is predicted: {j:#}");
    // The peer served the probes; it was told to probe nothing and probed nothing.
    assert!(!records(&qdb, "serve").is_empty());
    assert!(records(&qdb, "probe").is_empty());
}

/// Waits up to 30 s for `db` to hold a probe record with `outcome`.
fn wait_for_probe(db: &Path, outcome: &str) -> Vec<serde_json::Value> {
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let rows = records(db, "probe");
        if rows.iter().any(|r| r["outcome"] == outcome) || Instant::now() > until {
            return rows;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_failed_probe_shares_its_leg_as_an_outage() {
    let Probing {
        peer,
        prober,
        pdb,
        qdb: _,
        local: _local,
        _roots,
    } = probing();
    let rows = wait_for_probe(&pdb, "ok");
    assert!(rows.iter().any(|r| r["outcome"] == "ok"), "{rows:?}");
    let up = btc(&prober.addr);
    assert!(!up.contains("predictor=outage"), "{up}");
    // The peer goes away: the next probe is refused, and the leg is down.
    drop(peer);
    let rows = wait_for_probe(&pdb, "failed");
    assert!(rows.iter().any(|r| r["outcome"] == "failed"), "{rows:?}");
    // Answers are cached for up to 10 s.
    let until = Instant::now() + Duration::from_secs(15);
    let down = loop {
        let a = btc(&prober.addr);
        if a.contains("predictor=outage") || Instant::now() > until {
            break a;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    assert!(
        down.contains("peer=127.0.0.3;dir=received;bps=0;predictor=outage;"),
        "{down}"
    );
}

#[test]
fn probes_need_a_history_and_an_ftp_peer() {
    let root = tempfile::tempdir().unwrap();
    for (extra, why) in [
        (
            &["--no-history", "--probe", "127.0.0.1:2811"][..],
            "--no-history",
        ),
        (
            &["--probe", "gsiftp://127.0.0.1:2811", "--history", "h.db"][..],
            "not gsiftp://",
        ),
        (
            &["--probe", "127.0.0.1:2811", "--probe-interval", "1"][..],
            "--probe-interval",
        ),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_haul"))
            .args(["serve", "--listen", "127.0.0.1:0", "--anonymous", "--root"])
            .arg(root.path())
            .args(extra)
            .current_dir(root.path())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains(why),
            "{extra:?}: {err}"
        );
    }
}
