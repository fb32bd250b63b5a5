//! Gathering what a route choice needs without a central service (002 §1.6, "client plus
//! configuration"): every server involved (the two ends and the candidate relays) is asked for
//! its shared predictions (`SITE BTC`), and the client adds the legs its own history knows.
//! Servers name peers by address; each answer is mapped onto the hosts of the route by the
//! addresses the client saw: a server by the address it answered on, the client by the address
//! each server saw it come from.

use std::collections::HashMap;
use std::net::IpAddr;

use haul_proto::btc::Direction;
use haul_xfer::session::Session;
use haul_xfer::tls::ClientTls;
use haul_xfer::{PasvAddress, RemoteUrl};

use crate::route::{HostId, Leg};

/// The host id of the client's own end.
pub const LOCAL: &str = "local";

/// What the servers said, mapped onto hosts.
#[derive(Debug, Default, Clone)]
pub struct Gathered {
    /// Every leg some server predicted, one per ordered pair (the one with the most samples).
    pub legs: Vec<Leg>,
    /// The servers that relay (`relay=yes` in their `SITE BTC`).
    pub relays: Vec<HostId>,
    /// What could not be asked or answered, per server, for the report.
    pub notes: Vec<String>,
}

/// Asks every server in `servers` (id, URL) for its predictions, maps them onto the ids of
/// `servers` and [`LOCAL`], adds `local_legs` (the client's own history), and keeps one leg per
/// ordered pair.
pub fn gather(
    servers: &[(HostId, RemoteUrl)],
    local_legs: &[Leg],
    tls: Option<&ClientTls>,
) -> Gathered {
    let mut g = Gathered::default();
    let mut answers = Vec::new();
    let mut by_addr: HashMap<IpAddr, HostId> = HashMap::new();
    let mut local_addrs = Vec::new();
    // Every server at once: each answer costs a login, several round trips on a long path.
    let asked: Vec<Asked> = std::thread::scope(|sc| {
        let handles: Vec<_> = servers
            .iter()
            .map(|(_, url)| sc.spawn(move || ask(url, tls)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Asked::failed("asking panicked"))
            })
            .collect()
    });
    for ((id, _), a) in servers.iter().zip(asked) {
        if let Some((peer, local)) = a.addrs {
            by_addr.insert(peer, id.clone());
            local_addrs.push(local);
        }
        match a.answer {
            Ok(Some(shared)) => {
                if shared.relays {
                    g.relays.push(id.clone());
                }
                answers.push((id.clone(), shared.predictions));
            }
            Ok(None) => g
                .notes
                .push(format!("{id}: shares no predictions (no BTC in FEAT)")),
            Err(e) => g.notes.push(format!("{id}: {e}")),
        }
    }
    // The client is whoever the servers saw us as; a server's own address names the server.
    for a in local_addrs {
        by_addr.entry(a).or_insert_with(|| LOCAL.to_string());
    }
    let mut best: HashMap<(HostId, HostId), Leg> = HashMap::new();
    let mut keep = |leg: Leg| {
        if leg.from == leg.to {
            return;
        }
        let key = (leg.from.clone(), leg.to.clone());
        match best.get(&key) {
            Some(b) if b.samples >= leg.samples => {}
            _ => {
                best.insert(key, leg);
            }
        }
    };
    for (id, predictions) in answers {
        for p in predictions {
            let Some(peer) = p.peer.parse::<IpAddr>().ok().and_then(|a| by_addr.get(&a)) else {
                continue;
            };
            let (from, to) = match p.direction {
                Direction::Sent => (id.clone(), peer.clone()),
                Direction::Received => (peer.clone(), id.clone()),
            };
            keep(Leg {
                from,
                to,
                bps: p.bps,
                age_s: p.age_s,
                samples: p.samples,
            });
        }
    }
    for l in local_legs {
        keep(l.clone());
    }
    let mut legs: Vec<Leg> = best.into_values().collect();
    legs.sort_by(|a, b| (&a.from, &a.to).cmp(&(&b.from, &b.to)));
    g.legs = legs;
    g
}

/// One server's answer to `SITE BTC`, with the addresses the control connection had.
struct Asked {
    /// The server's and the client's address on the control connection.
    addrs: Option<(IpAddr, IpAddr)>,
    /// Its predictions (None: it shares none); Err: why it could not be asked, redacted.
    answer: Result<Option<haul_proto::btc::Shared>, String>,
}

impl Asked {
    fn failed(why: &str) -> Asked {
        Asked {
            addrs: None,
            answer: Err(why.to_string()),
        }
    }
}

/// Logs into `url` and asks for its predictions.
fn ask(url: &RemoteUrl, tls: Option<&ClientTls>) -> Asked {
    let tls = if url.tls || url.gsi { tls } else { None };
    let mut s = match Session::open(url, tls, PasvAddress::ControlPeer) {
        Ok(s) => s,
        Err(e) => return Asked::failed(&crate::redact(&e.to_string())),
    };
    let addrs = Some((s.ctl.peer.ip(), s.ctl.local.ip()));
    let answer = s.btc().map_err(|e| crate::redact(&e.to_string()));
    s.quit();
    Asked { addrs, answer }
}
