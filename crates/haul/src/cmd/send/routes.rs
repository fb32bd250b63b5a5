//! The route zone of a request's module database: direct, and through each relay the client
//! knows (`--relays`, and the relays an operator prices in a services file: `--services`, else
//! `$XDG_CONFIG_HOME/haul/services.toml` when it exists; its `registry` list adds to
//! `--registry`). A relayed route's rate comes from the
//! history of transfers along that very route (real ones before probes), else from the route
//! chooser's leg predictions (002 §2.4); a route nothing predicts is left unknown for `haul send`
//! to probe through the relay itself (`/dev/zero` on the source, relayed). After the probes a
//! relayed route stays in the plan only when it is predicted faster than direct by the split
//! threshold (`--threshold`, 50 %), as the route chooser splits.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::Context;
use haul_overlay::route::Leg;
use haul_plan::request::Request;
use haul_plan::workflow::{effective_bps, Estimate, Facts, RouteOption};
use haul_store::TransferRecord;
use haul_xfer::{Endpoint, RemoteUrl};

use super::facts::{predicted, Found};
use super::RequestArgs;
use crate::cmd::human_rate;
use crate::cmd::route::{relay_urls, through_route};

/// An operator's price list (`--services`).
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Services {
    #[serde(default)]
    relay: Vec<PaidRelay>,
    /// Aggregating registries to ask for predictions, as `--registry`.
    #[serde(default)]
    registry: Vec<String>,
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct PaidRelay {
    address: String,
    cost: u32,
}

/// The route zone: options with, per option, the URLs that take it and a probe's ends.
pub struct Zone {
    /// Direct first, then relayed routes.
    pub options: Vec<RouteOption>,
    /// Per option, the source and destination of the copy.
    pub urls: Vec<(String, String)>,
    /// Per option, the `/dev/zero` and `/dev/null` ends of a memory-to-memory probe.
    pub probes: Vec<(String, String)>,
}

/// The services file: `--services`, else the user's `services.toml` when there is one.
fn services_path(a: &RequestArgs) -> Option<PathBuf> {
    a.services.clone().or_else(|| {
        let base = std::env::var_os("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
        Some(base.join("haul").join("services.toml")).filter(|p| p.is_file())
    })
}

fn services(a: &RequestArgs) -> anyhow::Result<Services> {
    let Some(p) = services_path(a) else {
        return Ok(Services::default());
    };
    let text = std::fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))?;
    toml::from_str(&text).with_context(|| format!("services file {}", p.display()))
}

/// The `/dev/zero` and `/dev/null` ends of a memory-to-memory run between `src` and `dst`.
fn zero_null(src: &Endpoint, dst: &Endpoint) -> (String, String) {
    let end = |e: &Endpoint, dev: &str| match e {
        Endpoint::Remote(u) => format!("{}{dev}", u.server(true)),
        Endpoint::Local(_) => dev.to_string(),
    };
    (end(src, "/dev/zero"), end(dst, "/dev/null"))
}

/// The estimate of a route from transfers along exactly its hops.
fn along(rows: &[TransferRecord], src: &str, dst: &str) -> Option<Estimate> {
    let hops = (crate::cmd::route(src), crate::cmd::route(dst));
    let all: Vec<&TransferRecord> = rows
        .iter()
        .filter(|r| {
            (
                crate::cmd::route(&r.source),
                crate::cmd::route(&r.destination),
            ) == hops
        })
        .collect();
    predicted(all, "route").0
}

/// The route chooser's settings with every relay the client knows (`--relays` and the services
/// file's), and the services file's prices.
fn candidates(
    a: &RequestArgs,
) -> anyhow::Result<(crate::cmd::route::RouteArgs, BTreeMap<String, u32>)> {
    let mut choice = a.route.clone();
    let services = services(a)?;
    let prices: BTreeMap<String, u32> = services
        .relay
        .iter()
        .map(|r| (r.address.clone(), r.cost))
        .collect();
    for r in services.registry {
        if !choice.registry.contains(&r) {
            choice.registry.push(r);
        }
    }
    for k in prices.keys() {
        if !choice.relays.contains(k) {
            choice.relays.push(k.clone());
        }
    }
    Ok((choice, prices))
}

/// The route zone of `req`: direct, and each relayed route worth planning (see the module).
pub fn discover(
    req: &Request,
    a: &RequestArgs,
    rows: &[TransferRecord],
    notes: &mut Vec<String>,
    encrypted: bool,
) -> anyhow::Result<Zone> {
    let (s, d) = (Endpoint::parse(&req.src)?, Endpoint::parse(&req.dst)?);
    let (choice, prices) = candidates(a)?;
    let mut zone = Zone {
        options: vec![RouteOption {
            name: "direct".into(),
            relays: Vec::new(),
            estimate: None,
            encrypted,
            cost: 0,
        }],
        urls: vec![(req.src.clone(), req.dst.clone())],
        probes: vec![zero_null(&s, &d)],
    };
    if choice.relays.is_empty() {
        return Ok(zone);
    }
    let p = crate::cmd::route::plan(&req.src, &req.dst, &choice, (&a.history, &a.ca), false)?;
    notes.extend(p.gathered.notes.iter().cloned());
    zone.options[0].estimate = p.route.direct_bps.map(|b| Estimate {
        bps: b,
        source: format!("prediction: direct leg ({})", human_rate(b)),
    });
    let relays = relay_urls(choice.relays.iter().map(String::as_str), &req.src, &req.dst)?;
    // Each relay alone, and the chooser's chain when it is longer.
    let mut chains: Vec<Vec<&RemoteUrl>> = relays.iter().map(|r| vec![r]).collect();
    let picked = p.route.relays().to_vec();
    if picked.len() > 1 {
        chains.push(
            picked
                .iter()
                .filter_map(|id| relays.iter().find(|u| &u.host_port() == id))
                .collect(),
        );
    }
    let ends = (crate::cmd::host_id(&s), crate::cmd::host_id(&d));
    let (zs, zd) = zone.probes[0].clone();
    for chain in chains {
        let ids: Vec<String> = chain.iter().map(|u| u.host_port()).collect();
        let (src, dst) = through_route(&req.src, &req.dst, &chain)?;
        let name = format!("via {}", ids.join(", "));
        let estimate = match along(rows, &src, &dst) {
            Some(e) => Some(e),
            None if ids == picked => Some(Estimate {
                bps: p.route.predicted_bps,
                source: format!(
                    "prediction: narrowest of {} legs after relay discounts ({})",
                    ids.len() + 1,
                    human_rate(p.route.predicted_bps)
                ),
            }),
            // The chooser judged it from known legs and did not pick it.
            None if judged(&p.gathered.legs, &ends, &ids) => {
                notes.push(format!(
                    "{name}: not planned: the route chooser predicts it no better than \
                     direct by the split threshold"
                ));
                continue;
            }
            None => None,
        };
        let cost = ids
            .iter()
            .map(|r| {
                prices
                    .iter()
                    .find(|(k, _)| k.ends_with(r.as_str()) || r.ends_with(k.as_str()))
                    .map_or(0, |(_, c)| *c)
            })
            .sum();
        zone.options.push(RouteOption {
            name,
            estimate,
            encrypted: encrypted && !src.contains("ftp://") && !dst.contains("ftp://"),
            relays: ids,
            cost,
        });
        zone.urls.push((src, dst));
        zone.probes.push(through_route(&zs, &zd, &chain)?);
    }
    Ok(zone)
}

/// Whether the legs the chooser knew cover direct and every leg of the chain `ids` between
/// `ends`, so its choice against the chain was an informed one.
fn judged(legs: &[Leg], ends: &(String, String), ids: &[String]) -> bool {
    let known = |from: &str, to: &str| legs.iter().any(|l| l.from == from && l.to == to);
    let hops: Vec<&str> = std::iter::once(ends.0.as_str())
        .chain(ids.iter().map(String::as_str))
        .chain(std::iter::once(ends.1.as_str()))
        .collect();
    known(&ends.0, &ends.1) && hops.windows(2).all(|w| known(w[0], w[1]))
}

/// The relayed routes nothing predicts.
pub fn unknown(found: &Found) -> Vec<usize> {
    (1..found.facts.routes.len())
        .filter(|&i| found.facts.routes[i].estimate.is_none())
        .collect()
}

/// The best predicted rate of any transport on the direct route, on these files.
pub fn best_direct_bps(facts: &Facts) -> Option<f64> {
    facts
        .transports
        .iter()
        .filter_map(|t| effective_bps(facts, &facts.routes[0], t))
        .reduce(f64::max)
}

/// Takes route `i` out of the plan, with its URLs.
pub fn drop_route(found: &mut Found, i: usize) {
    found.facts.routes.remove(i);
    found.urls.remove(i);
    found.probe_urls.remove(i);
}

/// Drops each relayed route predicted no faster than `1 + threshold` times the best direct
/// workflow (the route chooser's split rule, applied after the probes), with a note. Nothing is
/// dropped while direct has no prediction, nor a route measured through its relays (copies,
/// probes and trials along it: their rate includes the relays' overhead, which the threshold
/// stands in for in a prediction composed from legs measured apart).
pub fn split_threshold(found: &mut Found, threshold: f64) {
    let Some(direct) = best_direct_bps(&found.facts) else {
        return;
    };
    for i in (1..found.facts.routes.len()).rev() {
        let r = &found.facts.routes[i];
        let Some(e) = &r.estimate else { continue };
        // Measured through the relay (copies and probes along it, trials), the route's rate
        // includes the relay's overhead: the faster wins. The threshold guards the chooser's
        // predictions, composed from legs measured apart.
        if !e.source.starts_with("prediction:") {
            continue;
        }
        if e.bps < direct * (1.0 + threshold) {
            found.notes.push(format!(
                "{}: not planned: {} is not {:.0} % over direct's {}",
                r.name,
                human_rate(e.bps),
                threshold * 100.0,
                human_rate(direct)
            ));
            drop_route(found, i);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leg(from: &str, to: &str) -> Leg {
        Leg {
            from: from.into(),
            to: to.into(),
            bps: 1e8,
            age_s: 0.0,
            samples: 1,
            err_pct: None,
        }
    }

    #[test]
    fn a_chain_is_judged_only_when_direct_and_all_its_legs_are_known() {
        let ends = ("a:1".to_string(), "local".to_string());
        let ids = vec!["b:1".to_string()];
        let mut legs = vec![leg("a:1", "b:1"), leg("b:1", "local")];
        assert!(!judged(&legs, &ends, &ids), "direct unknown");
        legs.push(leg("a:1", "local"));
        assert!(judged(&legs, &ends, &ids));
        legs.remove(1);
        assert!(!judged(&legs, &ends, &ids), "second leg unknown");
    }

    #[test]
    fn probes_are_memory_to_memory_between_the_same_servers() {
        let s = Endpoint::parse("ftp://a:2811/data/f").unwrap();
        let d = Endpoint::parse("/tmp/out").unwrap();
        assert_eq!(
            zero_null(&s, &d),
            ("ftp://a:2811/dev/zero".into(), "/dev/null".into())
        );
    }
}
