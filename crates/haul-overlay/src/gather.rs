//! Gathering what a route choice needs without a central service (002 §1.6, "client plus
//! configuration"): every server involved (the two ends and the candidate relays) is asked for
//! its shared predictions (`SITE BTC`), and the client adds the legs its own history knows.
//! Servers name peers by address; each answer is mapped onto the hosts of the route by the
//! addresses the client saw: a server by the address it answered on, the client by the address
//! each server saw it come from.
//!
//! With aggregating registries (`--registry`, `SITE BTC ALL`), they are asked first (`cached`):
//! a relay a registry holds predictions of is not asked itself; the ends still are, and a
//! server's own answer wins over a registry's copy of it. A registry that fails costs at most
//! [`REGISTRY_WITHIN`] and a warning.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::Duration;

use haul_proto::btc::{Direction, PeerPrediction};
use haul_xfer::session::Session;
use haul_xfer::tls::ClientTls;
use haul_xfer::RemoteUrl;

use crate::ask::ask_all;
use crate::route::{HostId, Leg};

mod cached;

/// How long the servers of a route get to answer, all together.
pub const DIRECT_WITHIN: Duration = Duration::from_secs(60);

/// How long registries get to answer, all together.
pub const REGISTRY_WITHIN: Duration = Duration::from_secs(10);

/// The host id of the client's own end.
pub const LOCAL: &str = "local";

/// What the servers said, mapped onto hosts.
#[derive(Debug, Default, Clone)]
pub struct Gathered {
    /// Every leg some server predicted, one per ordered pair (the one with the most samples).
    pub legs: Vec<Leg>,
    /// The servers that relay (`relay=yes` in their `SITE BTC` or a registry's line).
    pub relays: Vec<HostId>,
    /// What could not be asked or answered, per server and registry, and which servers'
    /// predictions came from a registry, for the report.
    pub notes: Vec<String>,
}

/// A server of the route: its host id and URL, and whether it is an end of the copy (always
/// asked itself; a candidate relay is not when a registry holds its predictions).
#[derive(Debug, Clone)]
pub struct Server {
    /// Its host id (`host:port`).
    pub id: HostId,
    /// Where to ask it.
    pub url: RemoteUrl,
    /// An end of the copy, not a candidate relay.
    pub end: bool,
}

/// Asks `registries` and then every one of `servers` they do not cover for their predictions,
/// maps them onto the ids of `servers` and [`LOCAL`], adds `local_legs` (the client's own
/// history), and keeps one leg per ordered pair. With `keep`, the logged-in sessions of the
/// servers that answered come back too, for the copy that follows to take over (a copy's
/// first hop then costs no login of its own); without, they are quit.
pub fn gather(
    servers: &[Server],
    registries: &[RemoteUrl],
    local_legs: &[Leg],
    (tls, keep): (Option<&ClientTls>, bool),
) -> (Gathered, Vec<Session>) {
    let mut g = Gathered::default();
    let reg = cached::ask_registries(registries, tls, &mut g.notes);
    let covered: Vec<_> = servers.iter().map(|s| reg.find(&s.id, &s.url)).collect();
    let direct: Vec<usize> = (0..servers.len())
        .filter(|&i| servers[i].end || covered[i].is_none())
        .collect();
    let urls: Vec<RemoteUrl> = direct.iter().map(|&i| servers[i].url.clone()).collect();
    let asked = ask_all(&urls, tls, (DIRECT_WITHIN, keep), ("BTC", Session::btc));
    let mut sessions = Vec::new();
    let mut answers: Vec<(HostId, Vec<PeerPrediction>)> = Vec::new();
    let mut by_addr: HashMap<IpAddr, HostId> = HashMap::new();
    let mut local_addrs = reg.local.clone();
    let mut answered = vec![false; servers.len()];
    for (&i, a) in direct.iter().zip(asked) {
        let id = &servers[i].id;
        sessions.extend(a.session);
        if let (Some(peer), Some(local)) = (a.peer, a.local) {
            by_addr.insert(peer.ip(), id.clone());
            local_addrs.push(local);
        }
        match a.answer {
            Ok(Some(shared)) => {
                if shared.relays {
                    g.relays.push(id.clone());
                }
                answers.push((id.clone(), shared.predictions));
                answered[i] = true;
            }
            Ok(None) => g
                .notes
                .push(format!("{id}: shares no predictions (no BTC in FEAT)")),
            Err(e) => g.notes.push(format!("{id}: {e}")),
        }
    }
    // What no server said itself, a registry's copy says.
    for (i, c) in covered.iter().enumerate() {
        let (Some(c), false) = (c, answered[i]) else {
            continue;
        };
        let id = &servers[i].id;
        if let Some(a) = c.polled.addr {
            by_addr.entry(a.ip()).or_insert_with(|| id.clone());
        }
        if c.polled.relays {
            g.relays.push(id.clone());
        }
        g.notes.push(format!(
            "{id}: predictions from registry {} (polled {:.0} s ago)",
            c.registry, c.polled.polled_s
        ));
        answers.push((id.clone(), c.predictions.clone()));
    }
    // The client is whoever the servers saw us as; a server's own address names the server.
    for a in local_addrs {
        by_addr.entry(a).or_insert_with(|| LOCAL.to_string());
    }
    g.legs = legs(answers, &by_addr, local_legs);
    (g, sessions)
}

/// One leg per ordered pair of hosts (the one with the most samples) from the servers'
/// `answers`, their peers mapped to hosts by `by_addr`, and the client's `local_legs`.
fn legs(
    answers: Vec<(HostId, Vec<PeerPrediction>)>,
    by_addr: &HashMap<IpAddr, HostId>,
    local_legs: &[Leg],
) -> Vec<Leg> {
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
                err_pct: p.err_pct,
            });
        }
    }
    for l in local_legs {
        keep(l.clone());
    }
    let mut legs: Vec<Leg> = best.into_values().collect();
    legs.sort_by(|a, b| (&a.from, &a.to).cmp(&(&b.from, &b.to)));
    legs
}
