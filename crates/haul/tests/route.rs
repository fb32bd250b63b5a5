//! `haul route` and `haul cp --route auto`: servers share their predictions (`SITE BTC`), the
//! client maps them onto the hosts of the route by address, and the widest chain wins when its
//! predicted gain passes the threshold. Hosts are told apart by their loopback addresses
//! (127.0.0.2 the origin, 127.0.0.3 the relay, 127.0.0.1 the client); their histories are
//! seeded with served transfers at known rates.
mod common;

use std::path::Path;
use std::process::Command;

use common::haul::*;
use haul_store::{Outcome, Params, Store, TransferRecord};

/// Seeds `db` with three transfers served to `peer` at `mbit` Mbit/s, the newest a minute ago.
fn seed(db: &Path, server: &str, peer: &str, mbit: f64) {
    let mut store = Store::open(db).unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    for k in 0..3 {
        let bytes = 64u64 << 20;
        let duration_s = bytes as f64 * 8.0 / (mbit * 1e6);
        store
            .insert(&TransferRecord {
                id: None,
                kind: "serve".into(),
                started_at: now - 60.0 - 600.0 * k as f64 - duration_s,
                duration_s,
                source: "/f.bin".into(),
                destination: peer.into(),
                source_host: server.into(),
                destination_host: peer.into(),
                params: Params::default(),
                files: 1,
                bytes,
                outcome: Outcome::Ok,
                error: None,
                samples: Vec::new(),
            })
            .unwrap();
    }
}

/// `haul serve` on `ip` with a history at `db`.
fn serve_on(ip: &str, root: &Path, db: &Path, extra: &[&str]) -> (std::process::Child, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_haul"));
    cmd.args([
        "serve",
        "--listen",
        &format!("{ip}:0"),
        "--anonymous",
        "--root",
    ])
    .arg(root)
    .arg("--history")
    .arg(db)
    .args(extra);
    listening(cmd, "haul serve: listening on ")
}

struct Kill(std::process::Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_widest_chain_wins_over_a_slow_direct_path_and_cp_takes_it() {
    let (o, r, local) = (dirs(), dirs(), dirs());
    let (odb, rdb) = (local.path().join("o.sqlite"), local.path().join("r.sqlite"));
    let data = random_bytes(3 << 20, 12);
    std::fs::write(o.path().join("f.bin"), &data).unwrap();
    // Before the servers start: their addresses are known up front (ports are not needed in
    // the seeded records, which name peers by address).
    seed(&odb, "127.0.0.2:2811", "127.0.0.1", 10.0);
    seed(&odb, "127.0.0.2:2811", "127.0.0.3", 200.0);
    seed(&rdb, "127.0.0.3:2811", "127.0.0.1", 150.0);
    let (oc, oaddr) = serve_on("127.0.0.2", o.path(), &odb, &[]);
    let _o = Kill(oc);
    let (rc, raddr) = serve_on(
        "127.0.0.3",
        r.path(),
        &rdb,
        &["--relay-allow", "127.0.0.2", "--relay-anonymous"],
    );
    let _r = Kill(rc);
    let hist = local.path().join("client.sqlite");
    let src = format!("ftp://{oaddr}/f.bin");
    let dst = local.path().join("f.bin");
    let route = |extra: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_haul"))
            .args([
                "route",
                &src,
                dst.to_str().unwrap(),
                "--json",
                "--relays",
                &raddr,
            ])
            .args(extra)
            .arg("--history")
            .arg(&hist)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let j = route(&[]);
    assert_eq!(
        j["hops"],
        serde_json::json!([oaddr, raddr, "local"]),
        "{j:#}"
    );
    assert_eq!(
        j["source"],
        format!("ftp://{raddr}/ftp://{oaddr}/f.bin"),
        "{j:#}"
    );
    let predicted = j["predicted_bps"].as_f64().unwrap();
    assert!(
        (predicted - 150e6).abs() < 1e6,
        "maximin of 200 and 150: {predicted}"
    );
    assert!(
        (j["direct_bps"].as_f64().unwrap() - 10e6).abs() < 1e5,
        "{j:#}"
    );
    assert!(j["reason"].as_str().unwrap().contains("gain"), "{j:#}");

    // A gain of 1,400 % under a threshold of 20 (2,000 %) stays direct.
    let j = route(&["--threshold", "20"]);
    assert_eq!(j["hops"], serde_json::json!([oaddr, "local"]), "{j:#}");
    assert!(
        j["reason"]
            .as_str()
            .unwrap()
            .contains("under the threshold"),
        "{j:#}"
    );

    // haul cp --route auto takes the chain, and the file arrives verified.
    let out = cp(
        &[
            "--route",
            "auto",
            "--relays",
            &raddr,
            "--json",
            &src,
            dst.to_str().unwrap(),
        ],
        &hist,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        j["route"]["source"],
        serde_json::json!([format!("ftp://{raddr}"), format!("ftp://{oaddr}")])
    );
    assert_eq!(j["verified_files"], 1);
    assert!(std::fs::read(&dst).unwrap() == data);

    // The relay's overhead is learned from copies sent through it: three that achieved a
    // twentieth of their prediction make it a poor relay, and the route goes direct.
    let mut store = Store::open(&hist).unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    for k in 0..3 {
        let bytes = 16u64 << 20;
        store
            .insert(&TransferRecord {
                id: None,
                kind: "cp".into(),
                started_at: now - 300.0 * (k + 1) as f64,
                duration_s: bytes as f64 * 8.0 / 7.5e6,
                source: format!("ftp://{raddr}/ftp://{oaddr}/f.bin"),
                destination: "/tmp/x".into(),
                source_host: raddr.clone(),
                destination_host: "local".into(),
                params: Params {
                    extra: serde_json::json!({"route": {"relays": [raddr], "predicted_bps": 150e6}}),
                    ..Params::default()
                },
                files: 1,
                bytes,
                outcome: Outcome::Ok,
                error: None,
                samples: Vec::new(),
            })
            .unwrap();
    }
    drop(store);
    let j = route(&[]);
    let d = j["discounts"][&raddr].as_f64().unwrap();
    assert!((d - 0.05).abs() < 1e-9, "learned discount {d}: {j:#}");
    assert_eq!(j["hops"], serde_json::json!([oaddr, "local"]), "{j:#}");

    // An explicit route through the relay works without predictions.
    let dst2 = local.path().join("g.bin");
    let out = cp(
        &["--route", &raddr, "--json", &src, dst2.to_str().unwrap()],
        &hist,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(std::fs::read(&dst2).unwrap() == data);
}

fn dirs() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}
