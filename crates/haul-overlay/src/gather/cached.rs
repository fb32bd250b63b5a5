//! What aggregating registries (`SITE BTC ALL`) hold for the servers of a route: each server's
//! predictions as the registry that polled it most recently has them. A registry names a
//! server by `host:port` as its list does and by the address it reached it at; the client
//! finds its own servers by the first, else by the second.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};

use haul_proto::btc::{PeerPrediction, PolledServer, RegistryReply};
use haul_xfer::session::Session;
use haul_xfer::tls::ClientTls;
use haul_xfer::RemoteUrl;

use super::REGISTRY_WITHIN;
use crate::ask::ask_all;

/// One server's predictions as a registry holds them.
#[derive(Debug, Clone)]
pub(super) struct FromRegistry {
    /// The registry, `host:port`.
    pub registry: String,
    /// Its line about the server: how it reached it, whether it relays, how long ago.
    pub polled: PolledServer,
    /// The server's predictions, aged by the registry.
    pub predictions: Vec<PeerPrediction>,
}

/// What the registries answered.
#[derive(Debug, Default)]
pub(super) struct Cached {
    by_server: BTreeMap<String, FromRegistry>,
    by_addr: HashMap<SocketAddr, String>,
    /// The client's addresses as the registries saw them.
    pub local: Vec<IpAddr>,
}

/// Asks every registry at once, within [`REGISTRY_WITHIN`]; one that fails is skipped with a
/// warning and a note.
pub(super) fn ask_registries(
    registries: &[RemoteUrl],
    tls: Option<&ClientTls>,
    notes: &mut Vec<String>,
) -> Cached {
    let mut c = Cached::default();
    let asked = ask_all(
        registries,
        tls,
        (REGISTRY_WITHIN, false),
        ("BTC ALL", Session::btc_all),
    );
    for (url, a) in registries.iter().zip(asked) {
        let name = url.host_port();
        let why = match a.answer {
            Ok(Some(reply)) => {
                c.local.extend(a.local);
                c.merge(&name, reply);
                continue;
            }
            Ok(None) => "is no registry (no BTCREG in FEAT)".to_string(),
            Err(e) => e,
        };
        tracing::warn!("registry {name} skipped: {why}");
        notes.push(format!("registry {name}: {why}"));
    }
    c
}

impl Cached {
    /// Takes `registry`'s reply: each server it lists, unless another registry polled that
    /// server more recently.
    fn merge(&mut self, registry: &str, reply: RegistryReply) {
        let mut predictions: HashMap<String, Vec<PeerPrediction>> = HashMap::new();
        for r in reply.reported {
            predictions.entry(r.server).or_default().push(r.prediction);
        }
        for s in reply.servers {
            if let Some(old) = self.by_server.get(&s.server) {
                if old.polled.polled_s <= s.polled_s {
                    continue;
                }
            }
            if let Some(a) = s.addr {
                self.by_addr.insert(a, s.server.clone());
            }
            let from = FromRegistry {
                registry: registry.to_string(),
                predictions: predictions.remove(&s.server).unwrap_or_default(),
                polled: s,
            };
            self.by_server.insert(from.polled.server.clone(), from);
        }
    }

    /// What the registries hold for the server `id` at `url`: by its name, else by an
    /// address `url` resolves to that a registry reached a server at.
    pub fn find(&self, id: &str, url: &RemoteUrl) -> Option<&FromRegistry> {
        if let Some(f) = self.by_server.get(id) {
            return Some(f);
        }
        if self.by_addr.is_empty() {
            return None;
        }
        let mut addrs = (url.host.as_str(), url.port).to_socket_addrs().ok()?;
        addrs.find_map(|a| self.by_server.get(self.by_addr.get(&a)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use haul_proto::btc::{Direction, Reported};

    fn polled(server: &str, addr: &str, polled_s: f64) -> PolledServer {
        PolledServer {
            server: server.into(),
            addr: Some(addr.parse().unwrap()),
            relays: true,
            polled_s,
        }
    }

    fn reported(server: &str, bps: f64) -> Reported {
        Reported {
            server: server.into(),
            prediction: PeerPrediction {
                peer: "10.0.0.1".into(),
                direction: Direction::Sent,
                bps,
                predictor: "median".into(),
                age_s: 5.0,
                samples: 3,
                err_pct: None,
            },
        }
    }

    #[test]
    fn the_most_recent_poll_of_a_server_wins_and_addresses_find_it() {
        let mut c = Cached::default();
        c.merge(
            "reg1:2811",
            RegistryReply {
                servers: vec![polled("r:2811", "127.0.0.3:2811", 30.0)],
                reported: vec![reported("r:2811", 1e8), reported("elsewhere:1", 5e8)],
            },
        );
        c.merge(
            "reg2:2811",
            RegistryReply {
                servers: vec![polled("r:2811", "127.0.0.3:2811", 5.0)],
                reported: vec![reported("r:2811", 2e8)],
            },
        );
        c.merge(
            "reg3:2811",
            RegistryReply {
                servers: vec![polled("r:2811", "127.0.0.3:2811", 50.0)],
                reported: vec![reported("r:2811", 3e8)],
            },
        );
        let url = |host: &str| RemoteUrl {
            tls: false,
            gsi: false,
            user: None,
            pass: None,
            host: host.into(),
            port: 2811,
            path: "/".into(),
        };
        let f = c.find("r:2811", &url("r")).unwrap();
        assert_eq!(
            (f.registry.as_str(), f.predictions[0].bps),
            ("reg2:2811", 2e8)
        );
        // Named otherwise by the client, the server is found by its address.
        let f = c.find("127.0.0.3:2811", &url("127.0.0.3")).unwrap();
        assert_eq!(f.polled.server, "r:2811");
        assert!(c.find("127.0.0.4:2811", &url("127.0.0.4")).is_none());
        // A prediction of a server the reply does not list is not taken.
        assert!(c.find("elsewhere:1", &url("127.0.0.9")).is_none());
    }
}
