//! `haul route` and `haul cp --route auto`: servers share their predictions (`SITE BTC`), the
//! client maps them onto the hosts of the route by address, and the widest chain wins when its
//! predicted gain passes the threshold. Hosts are told apart by their loopback addresses
//! (127.0.0.2 the origin, 127.0.0.3 the relay, 127.0.0.1 the client); their histories are
//! seeded with served transfers at known rates.
mod common;

use common::haul::*;
use haul_store::{Outcome, Params, Store, TransferRecord};

#[test]
fn the_widest_chain_wins_over_a_slow_direct_path_and_cp_takes_it() {
    let local = dirs();
    let data = random_bytes(3 << 20, 12);
    let chain = Chain::start(&data);
    let (oaddr, raddr) = (chain.origin.addr.clone(), chain.relay.addr.clone());
    let hist = local.path().join("client.sqlite");
    let src = format!("ftp://{oaddr}/f.bin");
    let dst = local.path().join("f.bin");
    let dst_path = dst.to_str().unwrap();
    let route = |extra: &[&str]| {
        let args = [&[src.as_str(), dst_path, "--relays", &raddr], extra].concat();
        route_json(&args, &hist).0
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
