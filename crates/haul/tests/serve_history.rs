//! `haul serve` records every transfer it serves in its history (`kind = serve`): the
//! passive throughput measurements that predictions start from. A relay's record names the
//! next hop.
mod common;

use std::fs;
use std::process::Command;
use std::time::{Duration, Instant};

use common::haul::*;

/// The `serve` records of the history at `db`, waiting up to 10 s for `n` of them (the
/// server writes them on a thread of its own, after its reply).
fn served(db: &std::path::Path, n: usize) -> Vec<serde_json::Value> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let out = Command::new(env!("CARGO_BIN_EXE_haul"))
            .args(["history", "--kind", "serve", "--json", "--history"])
            .arg(db)
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        let rows = v.as_array().cloned().unwrap_or_default();
        if rows.len() >= n || Instant::now() > deadline {
            return rows;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn served_transfers_are_recorded_with_both_ends_and_a_relays_next_hop() {
    let (o, r, local) = (tempdir(), tempdir(), tempdir());
    let (odb, rdb) = (
        local.path().join("origin.sqlite"),
        local.path().join("relay.sqlite"),
    );
    let hist = local.path().join("client.sqlite");
    let data = random_bytes(3_000_000, 9);
    fs::write(o.path().join("f.bin"), &data).unwrap();
    let os = serve(
        o.path(),
        &[
            "--anonymous",
            "--anonymous-write",
            "--history",
            odb.to_str().unwrap(),
        ],
    );
    let rs = serve(
        r.path(),
        &[
            "--anonymous",
            "--relay-allow",
            "127.0.0.1",
            "--relay-anonymous",
            "--history",
            rdb.to_str().unwrap(),
        ],
    );
    let dst = local.path().join("f.bin");
    let out = cp(
        &[
            "-p",
            "3",
            &format!("ftp://{}/f.bin", os.addr),
            dst.to_str().unwrap(),
        ],
        &hist,
    );
    assert!(out.status.success());
    let up = format!("ftp://{}/ftp://{}/up.bin", rs.addr, os.addr);
    assert!(cp(&[dst.to_str().unwrap(), &up], &hist).status.success());
    // A download through the relay whose next leg the client sets to 5 streams (OPTS RELAY).
    let via = format!("ftp://{}/ftp://{}/f.bin", rs.addr, os.addr);
    let dst2 = local.path().join("g.bin");
    let out = cp(
        &["--relay-streams", "5", &via, dst2.to_str().unwrap()],
        &hist,
    );
    assert!(out.status.success());

    // The origin: the direct download (3 streams), the relay's upload and the relay's
    // download on 5 streams, each one file.
    let rows = served(&odb, 3);
    assert_eq!(rows.len(), 3, "{rows:#?}");
    let relayed = rows
        .iter()
        .filter(|r| r["source"] == "/f.bin")
        .find(|r| r["params"]["parallelism"] == 5);
    assert!(
        relayed.is_some(),
        "the relay's next leg used 5 streams: {rows:#?}"
    );
    let sent = rows
        .iter()
        .find(|r| r["source"] == "/f.bin" && r["params"]["parallelism"] == 3)
        .expect("the download is recorded");
    assert_eq!(sent["bytes"], data.len() as u64);
    assert_eq!(sent["outcome"], "ok");
    assert_eq!(sent["source_host"], os.addr.as_str());
    assert_eq!(sent["destination_host"], "127.0.0.1");
    assert_eq!(sent["params"]["parallelism"], 3);
    assert_eq!(sent["params"]["transport"], "tcp");
    assert!(sent["duration_s"].as_f64().unwrap() > 0.0);
    let received = rows
        .iter()
        .find(|r| r["destination"] == "/up.bin")
        .expect("the relayed upload is recorded at the origin");
    assert_eq!(received["bytes"], data.len() as u64);

    // The relay: the upload it relayed (and the download), with its next hop, in memory.
    let rows = served(&rdb, 2);
    assert_eq!(rows.len(), 2, "{rows:#?}");
    let rows: Vec<_> = rows
        .into_iter()
        .filter(|r| r["destination"] == "/ftp://".to_string() + &os.addr + "/up.bin")
        .collect();
    assert_eq!(rows.len(), 1, "{rows:#?}");
    assert_eq!(rows[0]["bytes"], data.len() as u64);
    assert_eq!(
        rows[0]["params"]["extra"]["next_hop"],
        format!("ftp://{}", os.addr)
    );
    assert_eq!(rows[0]["params"]["extra"]["memory"], true);
}

#[test]
fn a_server_shares_its_predictions_with_site_btc() {
    let (o, local) = (tempdir(), tempdir());
    let db = local.path().join("origin.sqlite");
    let hist = local.path().join("client.sqlite");
    fs::write(o.path().join("f.bin"), random_bytes(2 << 20, 10)).unwrap();
    let os = serve(
        o.path(),
        &["--anonymous", "--history", db.to_str().unwrap()],
    );
    let dst = local.path().join("f.bin");
    for _ in 0..3 {
        let out = cp(
            &[&format!("ftp://{}/f.bin", os.addr), dst.to_str().unwrap()],
            &hist,
        );
        assert!(out.status.success());
    }
    assert_eq!(served(&db, 3).len(), 3);
    let mut c = RawControl::connect(&os.addr);
    c.cmd("USER anonymous");
    c.cmd("PASS x@");
    let feat = c.cmd("FEAT");
    assert!(feat.contains(" BTC"), "{feat}");
    let btc = c.cmd("SITE BTC");
    assert!(btc.starts_with("211"), "{btc}");
    let line = btc
        .lines()
        .find(|l| l.contains("peer=127.0.0.1;dir=sent;"))
        .unwrap_or_else(|| panic!("no prediction for the client: {btc}"));
    let bps: f64 = line
        .split(';')
        .find_map(|kv| kv.strip_prefix("bps="))
        .and_then(|v| v.parse().ok())
        .expect("bps");
    assert!(bps > 0.0, "{line}");
    assert!(line.contains("samples=3;"), "{line}");
    // Three copies give the selector two predictions to have erred on: its error is shared.
    let err: f64 = line
        .split(';')
        .find_map(|kv| kv.strip_prefix("err="))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no err= in {line}"));
    assert!(err.is_finite() && err >= 0.0, "{line}");
    assert!(btc.contains("relay=no;"), "{btc}");
    // It is no registry: no BTCREG, and SITE BTC ALL is refused; other arguments are unknown.
    assert!(!feat.contains("BTCREG"), "{feat}");
    assert!(c.cmd("SITE BTC ALL").starts_with("504"));
    assert!(c.cmd("SITE BTC SOME").starts_with("501"));
    // OPTS RELAY on a server that does not relay is refused.
    let r = c.cmd("OPTS RELAY Parallelism=4;");
    assert!(r.starts_with("501") && r.contains("does not relay"), "{r}");

    // The server's end is recorded as memory for its virtual /dev/zero, as disk for a file.
    let zero = format!("ftp://{}/dev/zero", os.addr);
    assert!(cp(&["--len", "2M", &zero, "/dev/null"], &hist)
        .status
        .success());
    let rows = served(&db, 4);
    assert_eq!(rows.len(), 4, "{rows:#?}");
    for r in &rows {
        let memory = r["source"] == "/dev/zero";
        assert_eq!(r["params"]["extra"]["memory"], memory, "{r:#}");
    }
}

fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}
