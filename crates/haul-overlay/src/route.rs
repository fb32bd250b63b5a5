//! Route choice for the split-TCP overlay (002 §2.4, the Split Choice Service): from predicted
//! throughputs of the legs between hosts, pick the direct route or a chain through at most
//! `max_relays` relays, by maximin (widest path), and split only when the predicted gain over
//! direct is over a threshold (default 50 %, 002 §5.4). Pure: no IO, no clocks; hosts are opaque
//! string ids.
//!
//! **Legs.** A missing leg has no prediction and is never used; a leg predicted at 0 bps is an
//! outage and is never used either (002 §2.4).
//!
//! **Relay overhead** (beyond the thesis, which names overhead prediction its main open problem,
//! 002 §6). Each relay `r` has a factor `d_r ∈ (0, 1]` learned from its past relayed transfers
//! ([`learn_discount`]). Every leg is scaled by the factor of each relay at its ends:
//! `w(u, v) = bps(u, v) · d_u · d_v`, with `d = 1` for the source and the destination, and a
//! route's prediction is its smallest `w`. So a one-relay chain is predicted at
//! `d_r · min(a, b)`, exactly "the chain's throughput times the relay's discount", whichever leg
//! is the bottleneck, which is the quantity [`learn_discount`] estimates. Scaling only the legs
//! *leaving* `r` would miss the case the thesis measured (ACK-compression when the *first* leg is
//! the bottleneck, 002 §0); scaling a chain's minimum by the product of its relays' factors is
//! not a bottleneck objective, so no widest-path search could be exact for it. Scaling legs keeps
//! the objective maximin, and the search exact. A leg between two relays carries both factors:
//! both hosts slow it.
//!
//! **Risk** (beyond the thesis). A chain is the best of many candidates, each judged by its
//! narrowest leg's prediction, so on noisy predictions the winner is the chain whose errors
//! happened to run high (the winner's curse), and it then achieves less than predicted; and
//! direct, the one route that is not picked from many, does not suffer it. So each leg of a
//! chain is judged at `bps · (1 − risk · err)`, where `err` is its predictor's recent mean
//! absolute error (the NWS selector's score, shared with the prediction), at least
//! [`MIN_RISK_FACTOR`] of it; a leg with no known error is taken at its prediction. Direct is
//! judged at its prediction. A chain then has to win even with its legs as far below
//! prediction as they recently have been, and among chains the steadier legs win ties of the
//! same predicted width. `risk = 0` is the thesis's rule. The factor multiplies each leg like
//! the relay discounts, so the objective stays maximin and the search exact.
//!
//! **Search.** A hop-bounded widest path ([`choose`]): a Bellman-Ford-style relaxation by number
//! of relays, `O(k · |E|)` for `k = max_relays`, instead of the thesis's enumeration of
//! `O(R^k)` chains ([`brute_force`], kept for tests). The source and destination are never
//! relays.
//!
//! **Ties**, in order: the highest prediction; the fewest relays; the highest sum of the
//! (scaled) legs, i.e. the most headroom on the legs that are not the bottleneck; then the first
//! found, with hosts searched in sorted id order (so the choice does not depend on the order the
//! legs were given in).
//!
//! **Decision** (002 §2.4, the reconstructed SCS rule): with direct predicted at `D > 0` and the
//! best chain judged at `C` (discounts and risk applied), split when `(C − D) / D > threshold` (strictly). Direct predicted at 0
//! (an outage): take any known chain. Direct unknown (no history for the pair): take the best
//! known chain too, as a prediction beats no prediction: the chain's legs have histories and
//! direct has none; the caller can still fall back to, or probe, the direct route.

mod graph;
mod learn;
mod search;
mod url;

pub use graph::Graph;
pub use learn::{learn_discount, MIN_DISCOUNT};
pub use url::nest_url;

use std::collections::HashSet;

use search::{Chain, Net};

/// An opaque host id, as the predictions name hosts.
pub type HostId = String;

/// A predicted throughput from one host to another.
#[derive(Debug, Clone, PartialEq)]
pub struct Leg {
    /// The sending host.
    pub from: HostId,
    /// The receiving host.
    pub to: HostId,
    /// Predicted throughput, bits per second; 0 means an outage.
    pub bps: f64,
    /// Age of the newest measurement behind the prediction, seconds (carried, not used here).
    pub age_s: f64,
    /// How many measurements the prediction rests on (carried, not used here).
    pub samples: usize,
    /// The predictor's recent mean absolute error on this leg, percent (None: not known yet).
    pub err_pct: Option<f64>,
}

/// A host that may relay, with its learned overhead factor.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// The relay's host id.
    pub host: HostId,
    /// Its overhead factor in (0, 1], 1 for no overhead (see [`learn_discount`]).
    pub discount: f64,
}

/// The route chooser's settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RouteParams {
    /// The most relays in a chain (the thesis: 2).
    pub max_relays: usize,
    /// The predicted gain over direct a chain must exceed, as a fraction (0.5 = 50 %).
    pub threshold: f64,
    /// How many recent errors a chain's legs are judged below their predictions (see the
    /// module comment, "Risk"); 0 judges them at their predictions, as the thesis does.
    pub risk: f64,
}

impl Default for RouteParams {
    fn default() -> Self {
        RouteParams {
            max_relays: 2,
            threshold: 0.5,
            risk: DEFAULT_RISK,
        }
    }
}

/// The default [`RouteParams::risk`]: a chain's legs are judged one recent error below their
/// predictions.
pub const DEFAULT_RISK: f64 = 1.0;

/// The smallest share of its prediction a leg is judged at for its error: a leg that has erred
/// by more than its whole prediction is judged poor, not down.
pub const MIN_RISK_FACTOR: f64 = 0.05;

/// The share of a leg's prediction it is judged at, for a recent error of `err_pct` percent and
/// `risk` errors of margin: `1 − risk · err`, at least [`MIN_RISK_FACTOR`]; 1 with no error known.
pub fn risk_factor(err_pct: Option<f64>, risk: f64) -> f64 {
    match err_pct {
        Some(e) => (1.0 - risk * e / 100.0).max(MIN_RISK_FACTOR),
        None => 1.0,
    }
}

/// The chosen route and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Route {
    /// The source, the relays in order, the destination.
    pub hops: Vec<HostId>,
    /// The route's prediction: its smallest leg after relay discounts and, for a chain, the
    /// risk margin, bits per second (direct: its leg's prediction).
    pub predicted_bps: f64,
    /// The direct prediction, when the pair has one.
    pub direct_bps: Option<f64>,
    /// The best chain's predicted gain over direct, `(C − D) / D`, when both are known and D > 0.
    pub gain: Option<f64>,
    /// The route's legs as predicted (before discounts), in order; empty when none is known.
    pub legs: Vec<Leg>,
    /// Why this route.
    pub reason: Reason,
}

impl Route {
    /// The narrowest of the route's legs as predicted, before discounts and risk: what a relay's
    /// overhead factor is learned against ([`learn_discount`]); None when no leg is known.
    pub fn legs_bps(&self) -> Option<f64> {
        narrowest(&self.legs)
    }

    /// The relays of the route, in order (empty for direct).
    pub fn relays(&self) -> &[HostId] {
        match self.hops.len() {
            0..=2 => &[],
            n => &self.hops[1..n - 1],
        }
    }
}

/// Why a route was chosen.
#[derive(Debug, Clone, PartialEq)]
pub enum Reason {
    /// Direct is predicted at least as fast as every known chain, or no chain is known.
    DirectOnly,
    /// A chain is predicted faster, but not by more than the threshold: stay direct.
    BelowThreshold {
        /// The best chain's hops.
        best_chain: Vec<HostId>,
        /// The best chain's prediction as judged (discounts and risk applied), bits per second.
        chain_bps: f64,
        /// Its narrowest leg as predicted, before discounts and risk, bits per second.
        legs_bps: f64,
        /// Its predicted gain over direct.
        gain: f64,
    },
    /// The chain's predicted gain over direct is over the threshold.
    Split {
        /// The predicted gain over direct.
        gain: f64,
    },
    /// Direct is predicted at 0 (an outage): the best known chain, the thesis's rule.
    DirectDown,
    /// Direct has no prediction: the best known chain (see the module's decision rule).
    NoDirectPrediction,
    /// No route is known to carry data; the hops are the direct route, as a last resort.
    Unreachable,
}

/// Input the route chooser refuses. Messages name the host or value at fault.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RouteError {
    /// A leg's throughput is negative, infinite or NaN.
    #[error("leg {from} -> {to} has bps {bps}: want a finite number >= 0")]
    BadBps {
        /// The sending host.
        from: HostId,
        /// The receiving host.
        to: HostId,
        /// The value given.
        bps: f64,
    },
    /// Two legs with the same ends.
    #[error("two legs {from} -> {to}")]
    DuplicateLeg {
        /// The sending host.
        from: HostId,
        /// The receiving host.
        to: HostId,
    },
    /// A leg from a host to itself.
    #[error("leg from {host} to itself")]
    SelfLeg {
        /// The host.
        host: HostId,
    },
    /// A relay's discount is outside (0, 1].
    #[error("relay {relay} has discount {discount}: want a number in (0, 1]")]
    BadDiscount {
        /// The relay.
        relay: HostId,
        /// The value given.
        discount: f64,
    },
    /// A relay listed twice.
    #[error("relay {relay} is listed twice")]
    DuplicateRelay {
        /// The relay.
        relay: HostId,
    },
    /// The threshold is negative, infinite or NaN.
    #[error("threshold {threshold}: want a finite number >= 0")]
    BadThreshold {
        /// The value given.
        threshold: f64,
    },
    /// The risk margin is negative, infinite or NaN.
    #[error("risk {risk}: want a finite number >= 0")]
    BadRisk {
        /// The value given.
        risk: f64,
    },
    /// A leg's recent error is negative, infinite or NaN.
    #[error("leg {from} -> {to} has error {err_pct} %: want a finite number >= 0")]
    BadError {
        /// The sending host.
        from: HostId,
        /// The receiving host.
        to: HostId,
        /// The value given.
        err_pct: f64,
    },
    /// The source is the destination.
    #[error("source and destination are both {host}")]
    SameEndpoints {
        /// The host.
        host: HostId,
    },
    /// [`nest_url`] was given no hops.
    #[error("no hops to nest")]
    NoHops,
    /// A hop given to [`nest_url`] is not `scheme://host[:port]`.
    #[error("hop {index} is not scheme://host[:port] (no path, spaces or control characters)")]
    BadHopUrl {
        /// Its position in the list, from 0.
        index: usize,
    },
}

/// The route from `src` to `dst`: direct or the widest chain, by a hop-bounded widest-path search.
pub fn choose(
    graph: &Graph,
    src: &str,
    dst: &str,
    relays: &[Candidate],
    params: &RouteParams,
) -> Result<Route, RouteError> {
    route_with(graph, src, dst, relays, params, search::widest)
}

/// As [`choose`], by enumerating every chain (the thesis's SCS); for checking [`choose`].
pub fn brute_force(
    graph: &Graph,
    src: &str,
    dst: &str,
    relays: &[Candidate],
    params: &RouteParams,
) -> Result<Route, RouteError> {
    route_with(graph, src, dst, relays, params, search::brute)
}

/// Validates the input, finds the best chain with `find`, and decides against direct.
fn route_with(
    graph: &Graph,
    src: &str,
    dst: &str,
    relays: &[Candidate],
    params: &RouteParams,
    find: fn(&Net, usize) -> Option<Chain>,
) -> Result<Route, RouteError> {
    validate(src, dst, relays, params)?;
    let chain = match (graph.id(src), graph.id(dst)) {
        (Some(s), Some(d)) => {
            let usable: Vec<(usize, f64)> = relays
                .iter()
                .filter_map(|c| graph.id(&c.host).map(|i| (i, c.discount)))
                .filter(|&(i, _)| i != s && i != d)
                .collect();
            find(
                &Net::new(graph, s, d, &usable, params.risk),
                params.max_relays,
            )
        }
        _ => None,
    };
    Ok(decide(graph, src, dst, chain, params.threshold))
}

/// Refuses bad settings, discounts and relay lists.
fn validate(
    src: &str,
    dst: &str,
    relays: &[Candidate],
    params: &RouteParams,
) -> Result<(), RouteError> {
    if src == dst {
        return Err(RouteError::SameEndpoints { host: src.into() });
    }
    if !(params.threshold.is_finite() && params.threshold >= 0.0) {
        return Err(RouteError::BadThreshold {
            threshold: params.threshold,
        });
    }
    if !(params.risk.is_finite() && params.risk >= 0.0) {
        return Err(RouteError::BadRisk { risk: params.risk });
    }
    let mut seen = HashSet::new();
    for c in relays {
        if !(c.discount > 0.0 && c.discount <= 1.0) {
            return Err(RouteError::BadDiscount {
                relay: c.host.clone(),
                discount: c.discount,
            });
        }
        if !seen.insert(c.host.as_str()) {
            return Err(RouteError::DuplicateRelay {
                relay: c.host.clone(),
            });
        }
    }
    Ok(())
}

/// Direct or the chain, by the thesis's rule with the threshold (see the module comment).
fn decide(graph: &Graph, src: &str, dst: &str, chain: Option<Chain>, threshold: f64) -> Route {
    let direct = graph.leg(src, dst);
    let direct_bps = direct.map(|l| l.bps);
    let direct_route = |predicted_bps: f64, gain: Option<f64>, reason: Reason| Route {
        hops: vec![src.into(), dst.into()],
        predicted_bps,
        direct_bps,
        gain,
        legs: direct.into_iter().cloned().collect(),
        reason,
    };
    let Some(chain) = chain else {
        return match direct_bps {
            Some(d) if d > 0.0 => direct_route(d, None, Reason::DirectOnly),
            _ => direct_route(0.0, None, Reason::Unreachable),
        };
    };
    let hops = chain_hops(graph, src, dst, &chain);
    let legs: Vec<Leg> = hops
        .windows(2)
        .filter_map(|p| graph.leg(&p[0], &p[1]).cloned())
        .collect();
    let chain_route = |gain: Option<f64>, reason: Reason| Route {
        legs: legs.clone(),
        hops: hops.clone(),
        predicted_bps: chain.bps,
        direct_bps,
        gain,
        reason,
    };
    match direct_bps {
        None => chain_route(None, Reason::NoDirectPrediction),
        Some(d) if d <= 0.0 => chain_route(None, Reason::DirectDown),
        Some(d) => {
            let gain = (chain.bps - d) / d;
            if chain.bps <= d {
                direct_route(d, Some(gain), Reason::DirectOnly)
            } else if gain > threshold {
                chain_route(Some(gain), Reason::Split { gain })
            } else {
                let reason = Reason::BelowThreshold {
                    best_chain: hops.clone(),
                    chain_bps: chain.bps,
                    legs_bps: narrowest(&legs).unwrap_or(0.0),
                    gain,
                };
                direct_route(d, Some(gain), reason)
            }
        }
    }
}

/// The smallest prediction of `legs`, if any.
fn narrowest(legs: &[Leg]) -> Option<f64> {
    legs.iter().map(|l| l.bps).reduce(f64::min)
}

/// The hop ids of a chain: source, relays, destination.
fn chain_hops(graph: &Graph, src: &str, dst: &str, chain: &Chain) -> Vec<HostId> {
    let mut hops = Vec::with_capacity(chain.relays.len() + 2);
    hops.push(src.to_string());
    hops.extend(chain.relays.iter().map(|&r| graph.host(r).to_string()));
    hops.push(dst.to_string());
    hops
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod proptests;
