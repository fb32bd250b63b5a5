//! An aggregating registry (`haul serve --registry-gather`): it polls other haul servers'
//! `SITE BTC`, caches what they say, ages it and answers `SITE BTC ALL`; `haul route`,
//! `haul cp --route auto` and `haul send` take it with `--registry`. Hosts are told apart by
//! loopback address (127.0.0.2 the origin, 127.0.0.3 the relay, 127.0.0.4 the registry,
//! 127.0.0.1 the client), and the servers' histories are seeded with served transfers at known
//! rates, as in route.rs.
mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::haul::*;
use haul_proto::btc::{RegistryReply, MAX_AGE_S};

/// The registry's `SITE BTC ALL`, asked anonymously.
fn btc_all(addr: &str) -> RegistryReply {
    let mut c = RawControl::connect(addr);
    assert!(c.cmd("USER anonymous").starts_with("331"));
    assert!(c.cmd("PASS x@").starts_with("230"));
    let r = c.request("SITE BTC ALL");
    assert_eq!(r.code, 211, "{r}");
    RegistryReply::parse(&r)
}

/// Waits (up to a minute) until the registry at `addr` lists every one of `servers`.
fn polled(addr: &str, servers: &[&str]) -> RegistryReply {
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        let r = btc_all(addr);
        if servers
            .iter()
            .all(|s| r.servers.iter().any(|p| p.server == *s))
        {
            return r;
        }
        assert!(
            Instant::now() < until,
            "not all of {servers:?} polled: {r:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A registry on 127.0.0.4 gathering from `servers` every `interval` seconds.
fn registry(servers: &[&str], interval: &str, dir: &Path) -> Serve {
    let list = servers.join(",");
    let db = dir.join("registry.sqlite");
    let flags = ["--registry-gather", &list, "--registry-interval", interval];
    serve_history_on("127.0.0.4", dir, &db, &flags)
}

#[test]
fn route_through_a_registry_picks_what_asking_the_servers_picks_and_cp_takes_it() {
    let (g, local) = (dirs(), dirs());
    let data = random_bytes(3 << 20, 25);
    let chain = Chain::start(&data);
    let (oaddr, raddr) = (chain.origin.addr.as_str(), chain.relay.addr.as_str());
    let gs = registry(&[oaddr, raddr], "60", g.path());
    let cached = polled(&gs.addr, &[oaddr, raddr]);
    // Every cached line names both ends: the server that made it and its peer.
    let relay_line = cached.servers.iter().find(|s| s.server == raddr).unwrap();
    assert!(relay_line.relays && relay_line.addr.unwrap().to_string() == raddr);
    assert!(cached
        .reported
        .iter()
        .any(|p| p.server == oaddr && p.prediction.peer == "127.0.0.3"));

    let hist = local.path().join("client.sqlite");
    let src = format!("ftp://{oaddr}/f.bin");
    let dst = local.path().join("f.bin");
    let dst_path = dst.to_str().unwrap();
    let (direct, _) = route_json(&[&src, dst_path, "--relays", raddr], &hist);
    let args = [&src, dst_path, "--relays", raddr, "--registry", &gs.addr];
    let (via_registry, _) = route_json(&args, &hist);
    assert_eq!(direct["hops"], serde_json::json!([oaddr, raddr, "local"]));
    for k in ["hops", "source", "predicted_bps", "direct_bps"] {
        assert_eq!(direct[k], via_registry[k], "{k}: {via_registry:#}");
    }
    // The relay was not asked itself: its predictions came from the registry.
    let notes = via_registry["notes"].to_string();
    assert!(
        notes.contains(&format!("{raddr}: predictions from registry {}", gs.addr)),
        "{notes}"
    );

    // haul cp --route auto takes the same chain with the registry, and the file arrives.
    let out = cp(
        &[
            "--route",
            "auto",
            "--relays",
            raddr,
            "--registry",
            &gs.addr,
            "--json",
            &src,
            dst_path,
        ],
        &hist,
    );
    assert!(out.status.success());
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let hops = serde_json::json!([format!("ftp://{raddr}"), format!("ftp://{oaddr}")]);
    assert_eq!(j["route"]["source"], hops);
    assert!(std::fs::read(&dst).unwrap() == data);
}

#[test]
fn cached_predictions_age_and_expire_and_a_failed_poll_drops_its_server() {
    let (o, r, g1, g2, local) = (dirs(), dirs(), dirs(), dirs(), dirs());
    let (odb, rdb) = (local.path().join("o.sqlite"), local.path().join("r.sqlite"));
    // One peer's newest measurement is 25 s short of seven days old, the other's fresh.
    seed_served(
        &odb,
        "127.0.0.2:2811",
        "127.0.0.7",
        1000.0,
        MAX_AGE_S - 25.0,
    );
    seed_served(&odb, "127.0.0.2:2811", "127.0.0.8", 80.0, 60.0);
    seed_served(&rdb, "127.0.0.3:2811", "127.0.0.1", 150.0, 60.0);
    let os = serve_history_on("127.0.0.2", o.path(), &odb, &[]);
    let mut rs = serve_history_on("127.0.0.3", r.path(), &rdb, &[]);
    // g1 polls the origin once a minute: what it shares ages in its cache alone.
    let g1s = registry(&[&os.addr], "60", g1.path());
    // g2 polls the relay every second.
    let g2s = registry(&[&rs.addr], "1", g2.path());
    let first = polled(&g1s.addr, &[&os.addr]);
    polled(&g2s.addr, &[&rs.addr]);
    let age_of = |r: &RegistryReply, peer: &str| {
        r.reported
            .iter()
            .find(|p| p.prediction.peer == peer)
            .map(|p| p.prediction.age_s)
    };
    let old = age_of(&first, "127.0.0.7").expect("the old prediction is still shared");
    assert!(old > MAX_AGE_S - 60.0, "{old}");

    rs.kill();
    // The age grows while cached; past seven days the prediction is gone, the fresh one stays.
    std::thread::sleep(Duration::from_secs(2));
    let later = btc_all(&g1s.addr);
    let grown = age_of(&later, "127.0.0.7").unwrap();
    assert!(grown >= old + 1.0, "{old} -> {grown}");
    std::thread::sleep(Duration::from_secs_f64(MAX_AGE_S - grown + 2.0));
    let expired = btc_all(&g1s.addr);
    assert_eq!(age_of(&expired, "127.0.0.7"), None, "{expired:?}");
    assert!(age_of(&expired, "127.0.0.8").is_some(), "{expired:?}");
    assert_eq!(expired.servers.len(), 1, "the origin stays listed");

    // The relay is down: the next poll fails and its predictions are no longer shared.
    let gone = btc_all(&g2s.addr);
    assert!(
        gone.servers.is_empty() && gone.reported.is_empty(),
        "{gone:?}"
    );
}

#[test]
fn a_registry_that_is_down_or_silent_is_skipped_with_a_warning_in_bounded_time() {
    let (o, local) = (dirs(), dirs());
    let odb = local.path().join("o.sqlite");
    seed_served(&odb, "127.0.0.2:2811", "127.0.0.1", 10.0, 60.0);
    let os = serve_history_on("127.0.0.2", o.path(), &odb, &[]);
    // Nothing listens on one; the other accepts and never says a word.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed_addr = closed.local_addr().unwrap().to_string();
    drop(closed);
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_addr = silent.local_addr().unwrap().to_string();
    let hist = local.path().join("client.sqlite");
    let src = format!("ftp://{}/f.bin", os.addr);
    let dst = local.path().join("f.bin");
    let registries = format!("{closed_addr},{silent_addr}");
    let started = Instant::now();
    let args = [&src, dst.to_str().unwrap(), "--registry", &registries];
    let (j, stderr) = route_json(&args, &hist);
    let took = started.elapsed();
    assert!(took < Duration::from_secs(30), "took {took:?}");
    assert_eq!(j["hops"], serde_json::json!([os.addr, "local"]), "{j:#}");
    assert!(
        (j["direct_bps"].as_f64().unwrap() - 10e6).abs() < 1e5,
        "{j:#}"
    );
    for r in [&closed_addr, &silent_addr] {
        assert!(
            stderr.contains(&format!("registry {r} skipped")),
            "{stderr}"
        );
        assert!(
            j["notes"].to_string().contains(&format!("registry {r}")),
            "{j:#}"
        );
    }
    drop(silent);
}

fn dirs() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}
