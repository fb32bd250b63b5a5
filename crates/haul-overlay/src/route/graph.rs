//! The graph of predicted legs: hosts indexed in sorted id order, legs stored by sending host
//! (compressed sparse rows), so the search walks each host's out-legs as one slice.

use std::collections::HashMap;

use super::{HostId, Leg, RouteError};

/// A leg as the search sees it: the receiving host's index, the prediction in bits per second,
/// and the predictor's recent error in percent (None: not known).
pub(crate) type Edge = (usize, f64, Option<f64>);

/// Predicted leg throughputs between hosts; at most one leg per ordered pair.
#[derive(Debug, Clone)]
pub struct Graph {
    /// Host ids, sorted; a host's index is its position here.
    hosts: Vec<HostId>,
    /// Host id to index.
    index: HashMap<HostId, usize>,
    /// The out-legs of host `i` are `legs[starts[i]..starts[i + 1]]`.
    starts: Vec<usize>,
    /// Each leg as an [`Edge`], parallel to `legs`, sorted by `to` within each host.
    edges: Vec<Edge>,
    /// The legs as given, sorted by (from, to) index.
    legs: Vec<Leg>,
}

impl Graph {
    /// A graph of `legs`, refusing bad throughputs, self-legs and two legs with the same ends.
    pub fn new(legs: impl IntoIterator<Item = Leg>) -> Result<Graph, RouteError> {
        let legs: Vec<Leg> = legs.into_iter().collect();
        check(&legs)?;
        let (hosts, ends) = number(&legs);
        // Sort the legs by (from, to) index through a permutation, not by moving them.
        let mut order: Vec<usize> = (0..legs.len()).collect();
        order.sort_unstable_by_key(|&i| ends[i]);
        if let Some(w) = order.windows(2).find(|w| ends[w[0]] == ends[w[1]]) {
            return Err(RouteError::DuplicateLeg {
                from: legs[w[0]].from.clone(),
                to: legs[w[0]].to.clone(),
            });
        }
        let mut starts = vec![0; hosts.len() + 1];
        for &(from, _) in &ends {
            starts[from + 1] += 1;
        }
        for i in 0..hosts.len() {
            starts[i + 1] += starts[i];
        }
        let edges = order
            .iter()
            .map(|&i| (ends[i].1, legs[i].bps, legs[i].err_pct))
            .collect();
        let mut slots: Vec<Option<Leg>> = legs.into_iter().map(Some).collect();
        let legs = order.iter().filter_map(|&i| slots[i].take()).collect();
        let index = hosts
            .iter()
            .enumerate()
            .map(|(i, h)| (h.clone(), i))
            .collect();
        Ok(Graph {
            hosts,
            index,
            starts,
            edges,
            legs,
        })
    }

    /// The leg from `from` to `to`, if it has a prediction.
    pub fn leg(&self, from: &str, to: &str) -> Option<&Leg> {
        let i = self.find(self.id(from)?, self.id(to)?)?;
        self.legs.get(i)
    }

    /// Every leg, sorted by sending then receiving host id.
    pub fn legs(&self) -> &[Leg] {
        &self.legs
    }

    /// Every host named by a leg, sorted.
    pub fn hosts(&self) -> &[HostId] {
        &self.hosts
    }

    /// The index of a host, if a leg names it.
    pub(crate) fn id(&self, host: &str) -> Option<usize> {
        self.index.get(host).copied()
    }

    /// The id of host `i`.
    pub(crate) fn host(&self, i: usize) -> &str {
        &self.hosts[i]
    }

    /// How many hosts.
    pub(crate) fn len(&self) -> usize {
        self.hosts.len()
    }

    /// Host `u`'s out-legs.
    pub(crate) fn out(&self, u: usize) -> &[Edge] {
        &self.edges[self.starts[u]..self.starts[u + 1]]
    }

    /// The leg from `u` to `v`, if known.
    pub(crate) fn edge(&self, u: usize, v: usize) -> Option<Edge> {
        self.find(u, v).map(|i| self.edges[i])
    }

    /// The position of the leg from `u` to `v` in `legs` / `edges`.
    fn find(&self, u: usize, v: usize) -> Option<usize> {
        let (lo, hi) = (self.starts[u], self.starts[u + 1]);
        self.edges[lo..hi]
            .binary_search_by_key(&v, |e| e.0)
            .ok()
            .map(|i| lo + i)
    }
}

/// Refuses a leg with a bad throughput or error, or from a host to itself.
fn check(legs: &[Leg]) -> Result<(), RouteError> {
    for leg in legs {
        if !(leg.bps.is_finite() && leg.bps >= 0.0) {
            return Err(RouteError::BadBps {
                from: leg.from.clone(),
                to: leg.to.clone(),
                bps: leg.bps,
            });
        }
        if let Some(e) = leg.err_pct.filter(|e| !(e.is_finite() && *e >= 0.0)) {
            return Err(RouteError::BadError {
                from: leg.from.clone(),
                to: leg.to.clone(),
                err_pct: e,
            });
        }
        if leg.from == leg.to {
            return Err(RouteError::SelfLeg {
                host: leg.from.clone(),
            });
        }
    }
    Ok(())
}

/// The host ids the legs name, sorted, and each leg's `(from, to)` indices into them.
fn number(legs: &[Leg]) -> (Vec<HostId>, Vec<(usize, usize)>) {
    // Number the ids in order of appearance first (one hash lookup per end), then re-number
    // them in sorted order.
    let mut seen: HashMap<&str, usize> = HashMap::new();
    let mut names: Vec<&str> = Vec::new();
    let mut intern = |host| {
        *seen.entry(host).or_insert_with(|| {
            names.push(host);
            names.len() - 1
        })
    };
    let ends: Vec<(usize, usize)> = legs
        .iter()
        .map(|l| (intern(l.from.as_str()), intern(l.to.as_str())))
        .collect();
    let mut order: Vec<usize> = (0..names.len()).collect();
    order.sort_unstable_by_key(|&i| names[i]);
    let mut rank = vec![0; names.len()];
    for (r, &i) in order.iter().enumerate() {
        rank[i] = r;
    }
    let hosts = order.iter().map(|&i| names[i].to_string()).collect();
    let ends = ends.into_iter().map(|(f, t)| (rank[f], rank[t])).collect();
    (hosts, ends)
}
