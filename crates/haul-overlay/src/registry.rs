//! An aggregating registry of throughput predictions (`haul serve --registry-gather`): it polls
//! other haul servers' `SITE BTC` every interval and caches what they answer, so that many
//! clients ask one registry (`SITE BTC ALL`) instead of every relay (002 §2.4).
//!
//! [`Cache`] is the pure part: each server's last answer and when it came. A prediction's age
//! grows while it is cached, and it expires past [`MAX_AGE_S`] as at its server. A server's
//! predictions are dropped when a poll of it fails, and when no poll has answered for
//! [`Cache::stale_after`] (a poll that hangs). [`Registry`] polls, one thread per server.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use haul_proto::btc::{PeerPrediction, PolledServer, RegistryReply, Reported, Shared, MAX_AGE_S};
use haul_xfer::session::Session;
use haul_xfer::tls::ClientTls;
use haul_xfer::RemoteUrl;

use crate::ask::ask;

/// Predictions kept of one server, at most (the freshest).
pub const MAX_PER_SERVER: usize = 1_000;

/// Lines of a `SITE BTC ALL` reply, at most: a client reads 10,000 lines of a reply.
pub const MAX_LINES: usize = 9_000;

/// Servers one registry polls, at most.
pub const MAX_SERVERS: usize = 500;

/// One server's last answer.
#[derive(Debug, Clone)]
struct Answer {
    at: Instant,
    addr: Option<SocketAddr>,
    relays: bool,
    predictions: Vec<PeerPrediction>,
}

/// What a registry holds: each server's last answer and when it came.
#[derive(Debug, Clone)]
pub struct Cache {
    servers: BTreeMap<String, Answer>,
    stale_after: Duration,
}

impl Cache {
    /// An empty cache whose servers' answers go stale `stale_after` after they came.
    pub fn new(stale_after: Duration) -> Cache {
        Cache {
            servers: BTreeMap::new(),
            stale_after,
        }
    }

    /// How long an answer is shared when no later poll answers.
    pub fn stale_after(&self) -> Duration {
        self.stale_after
    }

    /// `server` (reached at `addr`) answered `shared` at `at`: it replaces what it said before.
    pub fn answered(
        &mut self,
        server: &str,
        addr: Option<SocketAddr>,
        shared: Shared,
        at: Instant,
    ) {
        let mut predictions = shared.predictions;
        predictions.sort_by(|a, b| a.age_s.total_cmp(&b.age_s));
        predictions.truncate(MAX_PER_SERVER);
        let a = Answer {
            at,
            addr,
            relays: shared.relays,
            predictions,
        };
        self.servers.insert(server.to_string(), a);
    }

    /// A poll of `server` failed: what it said before is no longer shared.
    pub fn failed(&mut self, server: &str) {
        self.servers.remove(server);
    }

    /// What `SITE BTC ALL` answers at `now`: a line per server with a fresh answer, then their
    /// predictions, aged by the time they spent here, freshest first, without the expired
    /// ones, within [`MAX_LINES`].
    pub fn snapshot(&self, now: Instant) -> RegistryReply {
        let mut out = RegistryReply::default();
        for (server, a) in &self.servers {
            let held = now.saturating_duration_since(a.at);
            if held > self.stale_after {
                continue;
            }
            out.servers.push(PolledServer {
                server: server.clone(),
                addr: a.addr,
                relays: a.relays,
                polled_s: held.as_secs_f64(),
            });
            out.reported.extend(a.predictions.iter().filter_map(|p| {
                let age_s = p.age_s + held.as_secs_f64();
                (age_s <= MAX_AGE_S).then(|| Reported {
                    server: server.clone(),
                    prediction: PeerPrediction { age_s, ..p.clone() },
                })
            }));
        }
        out.servers.truncate(MAX_LINES);
        out.reported
            .sort_by(|a, b| a.prediction.age_s.total_cmp(&b.prediction.age_s));
        out.reported.truncate(MAX_LINES - out.servers.len());
        out
    }
}

/// A registry polling its servers, each on a thread of its own.
#[derive(Debug)]
pub struct Registry {
    cache: Arc<Mutex<Cache>>,
}

impl Registry {
    /// Starts polling `servers` every `interval` (TLS or GSI from `tls` where a URL's scheme
    /// asks for it). An answer stays shared for two intervals and a minute without a later
    /// one.
    pub fn start(
        servers: Vec<RemoteUrl>,
        tls: Option<ClientTls>,
        interval: Duration,
    ) -> std::io::Result<Registry> {
        if servers.len() > MAX_SERVERS {
            return Err(std::io::Error::other(format!(
                "{} servers to poll: a registry polls {MAX_SERVERS} at most",
                servers.len()
            )));
        }
        let stale = interval * 2 + Duration::from_secs(60);
        let cache = Arc::new(Mutex::new(Cache::new(stale)));
        for url in servers {
            let (cache, tls) = (cache.clone(), tls.clone());
            std::thread::Builder::new()
                .name("haul-registry".into())
                .spawn(move || loop {
                    poll(&cache, &url, tls.as_ref());
                    std::thread::sleep(interval);
                })?;
        }
        Ok(Registry { cache })
    }
}

/// Asks `url` once and records its answer, or its failure, in `cache`.
fn poll(cache: &Mutex<Cache>, url: &RemoteUrl, tls: Option<&ClientTls>) {
    let name = url.host_port();
    let a = ask(url, tls, ("BTC", Session::btc), false);
    let mut c = cache.lock().unwrap_or_else(|p| p.into_inner());
    match a.answer {
        Ok(Some(shared)) => {
            tracing::debug!(server = %name, predictions = shared.predictions.len(), "registry polled");
            c.answered(&name, a.peer, shared, Instant::now());
        }
        Ok(None) => {
            tracing::warn!(server = %name, "registry: shares no predictions (no BTC in FEAT)");
            c.failed(&name);
        }
        Err(e) => {
            tracing::warn!(server = %name, "registry: poll failed: {e}");
            c.failed(&name);
        }
    }
}

impl haul_server::journal::Aggregated for Registry {
    fn snapshot(&self) -> RegistryReply {
        let c = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        c.snapshot(Instant::now())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use haul_proto::btc::Direction;

    fn shared(ages: &[f64]) -> Shared {
        Shared {
            predictions: ages
                .iter()
                .enumerate()
                .map(|(i, &age_s)| PeerPrediction {
                    peer: format!("10.0.0.{i}"),
                    direction: Direction::Received,
                    bps: 1e8,
                    predictor: "median".into(),
                    age_s,
                    samples: 2,
                    err_pct: None,
                })
                .collect(),
            relays: true,
        }
    }

    #[test]
    fn ages_grow_while_cached_and_expire_at_seven_days() {
        let t0 = Instant::now();
        let mut c = Cache::new(Duration::from_secs(3600));
        c.answered("a:2811", None, shared(&[10.0, MAX_AGE_S - 100.0]), t0);
        let s = c.snapshot(t0 + Duration::from_secs(50));
        assert_eq!(s.servers.len(), 1);
        assert!(s.servers[0].relays && (s.servers[0].polled_s - 50.0).abs() < 1e-6);
        let ages: Vec<f64> = s.reported.iter().map(|r| r.prediction.age_s).collect();
        assert_eq!(ages, [60.0, MAX_AGE_S - 50.0]);
        assert!(s.reported.iter().all(|r| r.server == "a:2811"));
        // 101 s on, the older prediction is past seven days; the newer one stays.
        let s = c.snapshot(t0 + Duration::from_secs(101));
        assert_eq!(s.reported.len(), 1);
        assert_eq!(s.reported[0].prediction.age_s, 111.0);
    }

    #[test]
    fn a_failed_or_stale_poll_drops_the_server() {
        let t0 = Instant::now();
        let mut c = Cache::new(Duration::from_secs(180));
        c.answered("a:2811", None, shared(&[1.0]), t0);
        c.answered(
            "b:2811",
            None,
            shared(&[1.0]),
            t0 + Duration::from_secs(100),
        );
        let s = c.snapshot(t0 + Duration::from_secs(200));
        let names: Vec<&str> = s.servers.iter().map(|s| s.server.as_str()).collect();
        assert_eq!(names, ["b:2811"], "a's answer is stale");
        assert!(s.reported.iter().all(|r| r.server == "b:2811"));
        c.failed("b:2811");
        assert_eq!(
            c.snapshot(t0 + Duration::from_secs(200)),
            RegistryReply::default()
        );
    }

    #[test]
    fn a_reply_stays_within_its_line_bound_keeping_the_freshest() {
        let t0 = Instant::now();
        let mut c = Cache::new(Duration::from_secs(180));
        let ages: Vec<f64> = (0..MAX_PER_SERVER + 5).map(|i| i as f64).collect();
        for k in 0..10 {
            c.answered(&format!("s{k}:2811"), None, shared(&ages), t0);
        }
        let s = c.snapshot(t0);
        assert_eq!(s.servers.len() + s.reported.len(), MAX_LINES);
        let oldest = s
            .reported
            .iter()
            .map(|r| r.prediction.age_s)
            .fold(0.0, f64::max);
        assert!(
            oldest < MAX_PER_SERVER as f64,
            "the freshest are kept: {oldest}"
        );
    }
}
