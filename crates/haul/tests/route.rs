//! `haul route` and `haul cp --route auto`: servers share their predictions (`SITE BTC`), the
//! client maps them onto the hosts of the route by address, and the widest chain wins when its
//! predicted gain passes the threshold. Hosts are told apart by their loopback addresses
//! (127.0.0.2 the origin, 127.0.0.3 the relay, 127.0.0.1 the client); their histories are
//! seeded with served transfers at known rates.
mod common;

use std::path::Path;

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
    for k in 1..=3 {
        relayed_copy(&hist, (&oaddr, &raddr), 150e6, 7.5e6, 300.0 * k as f64);
    }
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

/// `haul cp --route auto` copies over the logins its route choice made: the first hop greets
/// the client once, whichever route is chosen, and servers the copy does not reach itself
/// only for the choice.
#[test]
fn cp_route_auto_logs_in_to_its_first_hop_once() {
    let local = dirs();
    let data = random_bytes(1 << 20, 31);
    let chain = Chain::start(&data);
    let (oaddr, raddr) = (chain.origin.addr.clone(), chain.relay.addr.clone());
    let hist = local.path().join("client.sqlite");
    let src = format!("ftp://{oaddr}/f.bin");
    let greetings = |extra: &[&str], name: &str| {
        let dst = local.path().join(name);
        let ends = [src.as_str(), dst.to_str().unwrap()];
        let args = [&["--route", "auto", "--relays", &raddr], extra, &ends[..]].concat();
        let out = cp_env(&args, &hist, &[("HAUL_LOG", "haul_xfer::control=debug")]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        assert!(std::fs::read(&dst).unwrap() == data);
        let count = |addr: &str| {
            let greets = |l: &&str| l.contains("< 220 ") && l.contains(addr);
            stderr.lines().filter(greets).count()
        };
        (count(&oaddr), count(&raddr))
    };
    // Through the relay: the relay fetches from the origin, which greets this client only
    // for the choice; the relay's login from the choice carries the copy.
    assert_eq!(greetings(&[], "a.bin"), (1, 1));
    // Direct (a threshold no chain passes): the origin's login from the choice carries it.
    assert_eq!(greetings(&["--threshold", "20"], "b.bin"), (1, 1));
}

/// A two-relay route nests its relays from the client outwards: for origin -> r1 -> r2 ->
/// client the client asks r2, r2 asks r1, and r1 fetches from the origin. Each relay may reach
/// only its own next hop, so the copy is refused if the order is turned round.
#[test]
fn a_two_relay_route_nests_its_relays_in_the_order_the_data_takes() {
    let data = random_bytes(2 << 20, 25);
    let [o, r1, r2, h, local] = [(); 5].map(|_| dirs());
    std::fs::write(o.path().join("f.bin"), &data).unwrap();
    let [odb, r1db, r2db] = ["o", "r1", "r2"].map(|n| h.path().join(format!("{n}.sqlite")));
    // Direct 10 Mbit/s; through r1 alone 20, through r2 alone 20; through r1 then r2 150.
    for (db, server, peer, mbit) in [
        (&odb, "127.0.0.2:2811", "127.0.0.1", 10.0),
        (&odb, "127.0.0.2:2811", "127.0.0.3", 200.0),
        (&odb, "127.0.0.2:2811", "127.0.0.4", 20.0),
        (&r1db, "127.0.0.3:2811", "127.0.0.4", 200.0),
        (&r1db, "127.0.0.3:2811", "127.0.0.1", 20.0),
        (&r2db, "127.0.0.4:2811", "127.0.0.1", 150.0),
    ] {
        seed_served(db, server, peer, mbit, 60.0);
    }
    let relay_to = |next: &'static str| ["--relay-allow", next, "--relay-anonymous"];
    let origin = serve_history_on("127.0.0.2", o.path(), &odb, &[]);
    let r1 = serve_history_on("127.0.0.3", r1.path(), &r1db, &relay_to("127.0.0.2"));
    let r2 = serve_history_on("127.0.0.4", r2.path(), &r2db, &relay_to("127.0.0.3"));
    let hist = local.path().join("client.sqlite");
    let src = format!("ftp://{}/f.bin", origin.addr);
    let dst = local.path().join("f.bin");
    let relays = format!("{},{}", r2.addr, r1.addr);
    let args = [src.as_str(), dst.to_str().unwrap(), "--relays", &relays];
    let j = route_json(&args, &hist).0;
    let hops = serde_json::json!([origin.addr, r1.addr, r2.addr, "local"]);
    assert_eq!(j["hops"], hops, "{j:#}");
    let nested = format!(
        "ftp://{}/ftp://{}/ftp://{}/f.bin",
        r2.addr, r1.addr, origin.addr
    );
    assert_eq!(j["source"], nested, "{j:#}");

    let out = cp(&[&["--route", "auto", "--json"], &args[..]].concat(), &hist);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let via = [&r2.addr, &r1.addr, &origin.addr].map(|a| format!("ftp://{a}"));
    assert_eq!(j["route"]["source"], serde_json::json!(via), "{j:#}");
    assert_eq!(j["verified_files"], 1, "{j:#}");
    assert!(std::fs::read(&dst).unwrap() == data);
}

/// `haul cp --route auto` re-routes a copy that falls far behind its route's prediction: a
/// relayed download slowed to 0.5 MB/s (4 Mb/s, against a prediction of 150) moves direct
/// (predicted 10), and a direct one slowed to 0.2 MB/s, kept direct by the threshold, moves
/// through the chain; each continues from what arrived and verifies.
#[test]
fn cp_route_auto_reroutes_a_copy_far_below_its_prediction_and_verifies() {
    let local = dirs();
    let data = random_bytes(4 << 20, 13);
    let chain = Chain::start(&data);
    let (oaddr, raddr) = (chain.origin.addr.clone(), chain.relay.addr.clone());
    let src = format!("ftp://{oaddr}/f.bin");
    for (name, slow, extra, from, to) in [
        (
            "relayed",
            "xfer::relayed_tcp_sink_rate=return(500000)",
            &[][..],
            vec![raddr.clone(), oaddr.clone()],
            vec![oaddr.clone()],
        ),
        (
            "direct",
            "xfer::direct_tcp_sink_rate=return(200000)",
            &["--threshold", "20"][..],
            vec![oaddr.clone()],
            vec![raddr.clone(), oaddr.clone()],
        ),
    ] {
        let dst = local.path().join(format!("{name}.bin"));
        let hist = local.path().join(format!("{name}.sqlite"));
        let args = [
            &[
                "--route",
                "auto",
                "--relays",
                &raddr,
                "--reroute-window",
                "1s",
            ][..],
            extra,
            &["--json", &src, dst.to_str().unwrap()][..],
        ]
        .concat();
        let out = cp_env(&args, &hist, &[("FAILPOINTS", slow)]);
        assert!(out.status.success(), "{name}");
        let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let r = &j["rerouted"];
        assert!(
            r["why"].as_str().unwrap().contains("under half"),
            "{name}: {j:#}"
        );
        let urls = |hops: &[String]| -> Vec<String> {
            hops.iter().map(|h| format!("ftp://{h}")).collect()
        };
        assert_eq!(r["from"], serde_json::json!(urls(&from)), "{name}: {j:#}");
        assert_eq!(
            j["route"]["source"],
            serde_json::json!(urls(&to)),
            "{name}: {j:#}"
        );
        let first = r["bytes"].as_u64().unwrap();
        assert!(first > 0 && first < data.len() as u64, "{name}: {j:#}");
        assert_eq!(j["verified_files"], 1, "{name}: {j:#}");
        assert!(
            std::fs::read(&dst).unwrap() == data,
            "{name}: the copy differs"
        );
    }
}

/// A relayed copy from `origin` through `relay` in the client's history `hist`, recorded as
/// `haul cp --route auto` records one: the route predicted at `predicted` bps, `achieved` bps,
/// finished `age_s` seconds ago.
fn relayed_copy(
    hist: &Path,
    (origin, relay): (&str, &str),
    predicted: f64,
    achieved: f64,
    age_s: f64,
) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let bytes = 16u64 << 20;
    let duration_s = bytes as f64 * 8.0 / achieved;
    Store::open(hist)
        .unwrap()
        .insert(&TransferRecord {
            id: None,
            kind: "cp".into(),
            started_at: now - age_s - duration_s,
            duration_s,
            source: format!("ftp://{relay}/ftp://{origin}/f.bin"),
            destination: "/tmp/x".into(),
            source_host: relay.into(),
            destination_host: "local".into(),
            params: Params {
                extra: serde_json::json!({"route": {"relays": [relay], "predicted_bps": predicted}}),
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

/// A relay's overhead factor is learned against its legs' own predictions, so a relayed copy
/// records the narrowest leg's prediction, not the route's after the factor: recording the
/// discounted value would feed the factor back into itself.
#[test]
fn a_relayed_copy_records_its_legs_prediction_before_the_discount() {
    let local = dirs();
    let data = random_bytes(1 << 20, 26);
    let chain = Chain::start(&data);
    let (oaddr, raddr) = (chain.origin.addr.clone(), chain.relay.addr.clone());
    let hist = local.path().join("client.sqlite");
    // One earlier copy through the relay achieved two thirds of its 150 Mbit/s prediction.
    relayed_copy(&hist, (&oaddr, &raddr), 150e6, 100e6, 600.0);
    let src = format!("ftp://{oaddr}/f.bin");
    let dst = local.path().join("f.bin");
    let args = [src.as_str(), dst.to_str().unwrap(), "--relays", &raddr];
    let j = route_json(&args, &hist).0;
    let predicted = j["predicted_bps"].as_f64().unwrap();
    assert!((predicted - 100e6).abs() < 1e3, "150 x 2/3: {j:#}");
    let out = cp(&[&["--route", "auto", "--json"], &args[..]].concat(), &hist);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(std::fs::read(&dst).unwrap() == data);
    let newest = Store::open(&hist)
        .unwrap()
        .list(&haul_store::Filter::default())
        .unwrap()
        .into_iter()
        .max_by(|a, b| a.started_at.total_cmp(&b.started_at))
        .unwrap();
    let route = &newest.params.extra["route"];
    assert_eq!(route["relays"], serde_json::json!([raddr]), "{route}");
    let recorded = route["predicted_bps"].as_f64().unwrap();
    assert!((recorded - 150e6).abs() < 1e3, "{route}");
}

fn dirs() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}
