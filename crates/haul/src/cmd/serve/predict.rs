//! What `haul serve` shares with `SITE BTC`: for every peer it has served or probed lately, a
//! throughput prediction from its own history (`kind = serve`, and `kind = probe` for its
//! scheduled probes), made by haul-tune's NWS-style selector
//! (002 §2.3). Entries expire: only measurements younger than [`MAX_AGE`] count. Each answer
//! reads the store afresh, at most once per [`REFRESH`].

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use haul_overlay::gather::LOCAL;
use haul_server::journal::{Direction, PeerPrediction, Predictions};
use haul_store::{Filter, Outcome, Store, TransferRecord};
use haul_tune::predict::{Measurement, Selector};

/// Measurements older than this are not shared (`haul_proto::btc::MAX_AGE_S`, which a
/// registry's cache applies too).
pub const MAX_AGE: Duration = Duration::from_secs(haul_proto::btc::MAX_AGE_S as u64);

/// Answers are recomputed at most this often.
const REFRESH: Duration = Duration::from_secs(10);

/// Transfers smaller than this say more about set-up than throughput and are left out.
const MIN_BYTES: u64 = 1 << 20;

/// Measurements per peer and direction, at most.
const PER_PAIR: usize = 50;

/// Predictions from a server's history.
#[derive(Debug)]
pub struct HistoryPredictions {
    path: PathBuf,
    cache: Mutex<Option<(Instant, Vec<PeerPrediction>)>>,
}

impl HistoryPredictions {
    /// Predictions from the history at `path`.
    pub fn new(path: PathBuf) -> HistoryPredictions {
        HistoryPredictions {
            path,
            cache: Mutex::new(None),
        }
    }

    fn compute(&self) -> anyhow::Result<Vec<PeerPrediction>> {
        let now = crate::cmd::now_unix();
        let store = Store::open(&self.path)?;
        let mut pairs: BTreeMap<(String, bool), Vec<Measurement>> = BTreeMap::new();
        for kind in ["serve", "probe"] {
            let rows = store.list(&Filter {
                kind: Some(kind.into()),
                outcome: Some(Outcome::Ok),
                since: Some(now - MAX_AGE.as_secs_f64()),
                ..Filter::default()
            })?;
            for r in rows
                .iter()
                .filter(|r| r.bytes >= MIN_BYTES && r.duration_s > 0.0)
            {
                let Some(pair) = peer_of(kind, r) else {
                    continue;
                };
                let m = Measurement::new(r.started_at + r.duration_s, r.mean_bps());
                pairs.entry(pair).or_default().push(m);
            }
        }
        // A scheduled probe that failed (the peer unreachable, refusing, or silent for the
        // data timeout) measured an outage of its leg.
        let failed = store.list(&Filter {
            kind: Some("probe".into()),
            outcome: Some(Outcome::Failed),
            since: Some(now - MAX_AGE.as_secs_f64()),
            ..Filter::default()
        })?;
        for r in &failed {
            if let Some(pair) = peer_of("probe", r) {
                let m = Measurement::new(r.started_at + r.duration_s, 0.0);
                pairs.entry(pair).or_default().push(m);
            }
        }
        let down: Vec<(String, bool)> = pairs
            .iter()
            .filter(|(_, ms)| newest(ms).is_some_and(|m| m.bps == 0.0))
            .map(|(k, _)| k.clone())
            .collect();
        let out = Selector::default()
            .predict_each(pairs, PER_PAIR, now)
            .into_iter()
            .map(|(pair, mut p)| {
                // Whatever the selector's winner says, a leg whose newest probe failed is down
                // until a probe or a transfer succeeds again: the route chooser never uses a
                // leg predicted at 0 (the thesis's modified EWMA passes outages at once too).
                let out = down.contains(&pair);
                if out {
                    p.bps = 0.0;
                }
                let (peer, sent) = pair;
                PeerPrediction {
                    peer,
                    direction: if sent {
                        Direction::Sent
                    } else {
                        Direction::Received
                    },
                    bps: p.bps,
                    predictor: if out {
                        "outage".into()
                    } else {
                        p.predictor.to_string()
                    },
                    age_s: p.age_s,
                    samples: p.samples,
                    err_pct: if out { None } else { p.error_pct },
                }
            })
            .collect();
        Ok(out)
    }
}

/// The newest of `ms`.
fn newest(ms: &[Measurement]) -> Option<&Measurement> {
    ms.iter().max_by(|a, b| a.at.total_cmp(&b.at))
}

/// The peer of a record and whether this server sent to it. A `serve` record names the client
/// by address (no port) and the server's end by `ip:port`; one this server relayed (it names a
/// `next_hop`) is left out. A `probe` record (`haul serve --probe`, docs/relay.md) is a copy
/// between a peer's `ip:port` and this host (`local`); one between two other servers (a `haul
/// send` probe in a shared history) says nothing of this server's legs.
fn peer_of(kind: &str, r: &TransferRecord) -> Option<(String, bool)> {
    if kind == "serve" {
        // A transfer this server relayed ran at the whole chain's pace, not at this leg's.
        if r.params.extra.get("next_hop").is_some_and(|h| !h.is_null()) {
            return None;
        }
        return Some(if r.destination_host.parse::<IpAddr>().is_ok() {
            (r.destination_host.clone(), true)
        } else {
            (r.source_host.clone(), false)
        });
    }
    let peer = |h: &str| h.parse::<SocketAddr>().ok().map(|a| a.ip().to_string());
    match (r.source_host.as_str(), r.destination_host.as_str()) {
        (LOCAL, d) => peer(d).map(|p| (p, true)),
        (s, LOCAL) => peer(s).map(|p| (p, false)),
        _ => None,
    }
}

impl Predictions for HistoryPredictions {
    fn current(&self) -> Vec<PeerPrediction> {
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((at, v)) = cache.as_ref() {
            let held = at.elapsed();
            if held < REFRESH {
                // Their ages as of now, not of when they were computed.
                let aged = |p: &PeerPrediction| PeerPrediction {
                    age_s: p.age_s + held.as_secs_f64(),
                    ..p.clone()
                };
                return v.iter().map(aged).collect();
            }
        }
        let v = self.compute().unwrap_or_else(|e| {
            tracing::warn!("SITE BTC: history unreadable: {e}");
            Vec::new()
        });
        *cache = Some((Instant::now(), v.clone()));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(source_host: &str, destination_host: &str) -> TransferRecord {
        TransferRecord {
            id: None,
            kind: "probe".into(),
            started_at: 0.0,
            duration_s: 1.0,
            source: String::new(),
            destination: String::new(),
            source_host: source_host.into(),
            destination_host: destination_host.into(),
            params: Default::default(),
            files: 1,
            bytes: 1 << 20,
            outcome: Outcome::Ok,
            error: None,
            samples: Vec::new(),
        }
    }

    #[test]
    fn a_leg_is_down_from_a_failed_probe_until_a_probe_succeeds() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.sqlite");
        let now = crate::cmd::now_unix();
        let mut store = Store::open(&path).unwrap();
        let mut probe = |ago: f64, outcome: Outcome| {
            let mut r = rec("10.0.0.7:2811", LOCAL);
            (r.started_at, r.outcome) = (now - ago, outcome);
            if outcome == Outcome::Failed {
                r.bytes = 0;
            }
            store.insert(&r).unwrap();
        };
        let leg = || {
            let v = HistoryPredictions::new(path.clone()).compute().unwrap();
            assert_eq!(v.len(), 1, "{v:?}");
            (v[0].bps, v[0].predictor.clone())
        };
        for ago in [600.0, 500.0, 400.0] {
            probe(ago, Outcome::Ok);
        }
        assert!(leg().0 > 8e6, "{:?}", leg());
        probe(300.0, Outcome::Failed);
        assert_eq!(leg(), (0.0, "outage".to_string()));
        probe(200.0, Outcome::Ok);
        let (bps, predictor) = leg();
        assert!(bps > 0.0 && predictor != "outage", "{bps} {predictor}");
    }

    #[test]
    fn a_probe_names_its_peer_by_address_and_direction() {
        let from = rec("10.0.0.7:2811", LOCAL);
        assert_eq!(peer_of("probe", &from), Some(("10.0.0.7".into(), false)));
        let to = rec(LOCAL, "[2001:db8::1]:2811");
        assert_eq!(peer_of("probe", &to), Some(("2001:db8::1".into(), true)));
        // Between two other servers, or to a name never resolved: nothing of this server's.
        assert_eq!(
            peer_of("probe", &rec("10.0.0.7:2811", "10.0.0.8:2811")),
            None
        );
        assert_eq!(peer_of("probe", &rec("dtn1:2811", LOCAL)), None);
        // A served transfer names the client by address, the server's end by ip:port.
        let mut served = rec("10.0.0.1:2811", "10.0.0.9");
        assert_eq!(peer_of("serve", &served), Some(("10.0.0.9".into(), true)));
        // Relayed: the chain's rate says nothing of the leg to the client.
        served.params.extra = serde_json::json!({ "next_hop": "10.0.0.5:2811", "memory": true });
        assert_eq!(peer_of("serve", &served), None);
        served.params.extra = serde_json::json!({ "next_hop": null });
        assert_eq!(peer_of("serve", &served), Some(("10.0.0.9".into(), true)));
    }
}
