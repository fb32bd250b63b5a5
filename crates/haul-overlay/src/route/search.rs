//! The chain search: a hop-bounded widest-path (maximin) search in `O(k · |E|)`, and the
//! brute-force enumeration it is checked against. Both see the same scaled legs
//! (`w(u, v) = bps · d_u · d_v · risk_factor(err)`, see the parent module) and break ties the
//! same way.
//!
//! The widest search runs in two passes, each a Bellman-Ford-style relaxation by number of
//! relays (level `j` reads only level `j − 1`, so a label never uses more relays than its level):
//!
//! 1. *Bottleneck.* `reach_j[v]` is the widest walk from the source to relay `v` through at most
//!    `j` relays; `F_j = max_v min(reach_j[v], w(v, dst))`. The best chain's prediction is
//!    `B* = F_k`, and the fewest relays that reach it `j* = min { j : F_j = B* }`.
//! 2. *Headroom.* Over legs with `w ≥ B*` only, the walk with exactly `j*` relays and the
//!    largest sum of `w`, with parent pointers to rebuild it.
//!
//! Walks, not paths: the relaxation does not track which relays a label has visited. That is
//! safe. Cutting a cycle out of a walk drops legs, so it never narrows the walk and uses fewer
//! relays: pass 1's maxima over walks equal those over simple paths. And every walk pass 2 can
//! return is simple: a repeated relay would leave, once its cycle is cut, a chain with fewer
//! than `j*` relays and every leg `≥ B*`, against the choice of `j*`. The source and the
//! destination are never relays, so they only start and end a chain.

use super::graph::{Edge, Graph};
use super::risk_factor;

/// A chain of relays between the source and the destination.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Chain {
    /// Relay indices, in order.
    pub(crate) relays: Vec<usize>,
    /// The chain's prediction: its narrowest scaled leg.
    pub(crate) bps: f64,
    /// The sum of its scaled legs, in hop order (the tie-break).
    pub(crate) sum: f64,
}

/// The search's view of a graph: endpoints, usable relays and their factors.
pub(crate) struct Net<'g> {
    /// The predicted legs.
    graph: &'g Graph,
    /// The source's index.
    src: usize,
    /// The destination's index.
    dst: usize,
    /// The usable relays' indices, sorted.
    relays: Vec<usize>,
    /// Per host: may it relay?
    is_relay: Vec<bool>,
    /// Per host: its discount if a relay, else 1.
    factor: Vec<f64>,
    /// Per host: the scaled leg to the destination if a relay and known, else 0.
    to_dst: Vec<f64>,
    /// Recent errors of margin a leg is judged by ([`super::RouteParams::risk`]).
    risk: f64,
}

impl<'g> Net<'g> {
    /// The view for `src` → `dst` with `relays` as `(index, discount)`, neither end among them,
    /// judging legs `risk` recent errors below their predictions.
    pub(crate) fn new(
        graph: &'g Graph,
        src: usize,
        dst: usize,
        relays: &[(usize, f64)],
        risk: f64,
    ) -> Self {
        let n = graph.len();
        let mut net = Net {
            graph,
            src,
            dst,
            relays: relays.iter().map(|r| r.0).collect(),
            is_relay: vec![false; n],
            factor: vec![1.0; n],
            to_dst: vec![0.0; n],
            risk,
        };
        net.relays.sort_unstable();
        for &(r, d) in relays {
            net.is_relay[r] = true;
            net.factor[r] = d;
        }
        for &r in &net.relays {
            net.to_dst[r] = graph.edge(r, dst).map_or(0.0, |e| net.weight(r, e));
        }
        net
    }

    /// The scaled prediction of the leg `u` → `e` (eq. in the parent module).
    fn weight(&self, u: usize, e: Edge) -> f64 {
        let (v, bps, err) = e;
        bps * self.factor[u] * self.factor[v] * risk_factor(err, self.risk)
    }

    /// The scaled legs out of `u` into relays, as `(relay, w)`, outages left out.
    fn relay_legs(&self, u: usize) -> impl Iterator<Item = (usize, f64)> + '_ {
        self.graph
            .out(u)
            .iter()
            .filter(|e| self.is_relay[e.0])
            .map(move |&e| (e.0, self.weight(u, e)))
            .filter(|e| e.1 > 0.0)
    }

    /// The prediction and leg sum of the chain through `relays`, if every leg is known and up.
    fn value(&self, relays: &[usize]) -> Option<(f64, f64)> {
        let mut hops = Vec::with_capacity(relays.len() + 2);
        hops.push(self.src);
        hops.extend_from_slice(relays);
        hops.push(self.dst);
        let (mut min, mut sum) = (f64::INFINITY, 0.0);
        for p in hops.windows(2) {
            let w = self.weight(p[0], self.graph.edge(p[0], p[1])?);
            if w <= 0.0 {
                return None;
            }
            min = min.min(w);
            sum += w;
        }
        Some((min, sum))
    }

    /// A chain through `relays` with its prediction and sum.
    fn chain(&self, relays: Vec<usize>) -> Option<Chain> {
        let (bps, sum) = self.value(&relays)?;
        Some(Chain { relays, bps, sum })
    }
}

/// The best chain with at most `max_relays` relays, by the two-pass widest-path search.
pub(crate) fn widest(net: &Net, max_relays: usize) -> Option<Chain> {
    let k = max_relays.min(net.relays.len());
    if k == 0 {
        return None;
    }
    let per_level = bottlenecks(net, k);
    let best = per_level.iter().copied().fold(0.0, f64::max);
    if best <= 0.0 {
        return None;
    }
    let j = per_level.iter().position(|&f| f == best)? + 1;
    let chain = net.chain(heaviest(net, j, best)?)?;
    debug_assert_eq!(chain.bps, best);
    Some(chain)
}

/// Pass 1: `F_j` for `j = 1..=k`, the widest chain's prediction with at most `j` relays
/// (0 when there is none).
fn bottlenecks(net: &Net, k: usize) -> Vec<f64> {
    let finish = |reach: &[f64]| {
        net.relays
            .iter()
            .map(|&r| reach[r].min(net.to_dst[r]))
            .fold(0.0, f64::max)
    };
    let mut reach = vec![0.0; net.graph.len()];
    for (v, w) in net.relay_legs(net.src) {
        reach[v] = w;
    }
    let mut per_level = Vec::with_capacity(k);
    per_level.push(finish(&reach));
    for _ in 1..k {
        let mut next = reach.clone();
        for &u in &net.relays {
            let bu = reach[u];
            if bu <= 0.0 {
                continue;
            }
            for (v, w) in net.relay_legs(u) {
                let b = bu.min(w);
                if b > next[v] {
                    next[v] = b;
                }
            }
        }
        reach = next;
        per_level.push(finish(&reach));
    }
    per_level
}

/// Pass 2: the relays of the chain with exactly `j` relays, every leg at least `floor`, and the
/// largest leg sum; the first found on equal sums.
fn heaviest(net: &Net, j: usize, floor: f64) -> Option<Vec<usize>> {
    const NONE: f64 = f64::NEG_INFINITY;
    let mut sum = vec![NONE; net.graph.len()];
    for (v, w) in net.relay_legs(net.src) {
        if w >= floor {
            sum[v] = w;
        }
    }
    let mut parents: Vec<Vec<usize>> = Vec::with_capacity(j - 1);
    for _ in 1..j {
        let mut next = vec![NONE; net.graph.len()];
        let mut parent = vec![usize::MAX; net.graph.len()];
        for &u in &net.relays {
            if sum[u] == NONE {
                continue;
            }
            for (v, w) in net.relay_legs(u) {
                if w >= floor && sum[u] + w > next[v] {
                    next[v] = sum[u] + w;
                    parent[v] = u;
                }
            }
        }
        parents.push(parent);
        sum = next;
    }
    let mut best: Option<(usize, f64)> = None;
    for &r in &net.relays {
        let to_dst = net.to_dst[r];
        if sum[r] != NONE && to_dst >= floor && best.is_none_or(|b| sum[r] + to_dst > b.1) {
            best = Some((r, sum[r] + to_dst));
        }
    }
    let mut relays = vec![best?.0];
    for parent in parents.iter().rev() {
        relays.push(*parent.get(*relays.last()?)?);
    }
    relays.reverse();
    Some(relays)
}

/// The best chain with at most `max_relays` relays, by enumerating every sequence of distinct
/// relays (the thesis's SCS); exponential in `max_relays`, for tests.
pub(crate) fn brute(net: &Net, max_relays: usize) -> Option<Chain> {
    let k = max_relays.min(net.relays.len());
    let mut best = None;
    extend(net, k, &mut Vec::with_capacity(k), &mut best);
    best
}

/// Tries the chain `seq` and every extension of it up to `k` relays.
fn extend(net: &Net, k: usize, seq: &mut Vec<usize>, best: &mut Option<Chain>) {
    if !seq.is_empty() {
        if let Some(c) = net.chain(seq.clone()) {
            if best.as_ref().is_none_or(|b| better(&c, b)) {
                *best = Some(c);
            }
        }
    }
    if seq.len() == k {
        return;
    }
    for &r in &net.relays {
        if !seq.contains(&r) {
            seq.push(r);
            extend(net, k, seq, best);
            seq.pop();
        }
    }
}

/// Whether `a` beats `b`: wider, then fewer relays, then a larger leg sum.
fn better(a: &Chain, b: &Chain) -> bool {
    if a.bps != b.bps {
        return a.bps > b.bps;
    }
    if a.relays.len() != b.relays.len() {
        return a.relays.len() < b.relays.len();
    }
    a.sum > b.sum
}
