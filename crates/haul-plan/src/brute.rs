//! Exhaustive search over every path: the reference DPMS and CPMS are tested against.

use crate::cpms::cost_range;
use crate::model::{weigh, Instance, Plan, Weights};
use crate::PlanError;

/// The most complete paths [`brute_force`] will enumerate.
pub const BRUTE_FORCE_LIMIT: u128 = 1 << 22;

/// The most profitable complete path costing at most `cost_cap` (any cost if `None`), found by
/// trying every path in lexicographic order (the first of equally profitable paths wins).
///
/// For tests and tiny instances: O(number of paths · K), refused beyond [`BRUTE_FORCE_LIMIT`] paths.
pub fn brute_force(
    inst: &Instance,
    weights: &Weights,
    cost_cap: Option<u64>,
) -> Result<Plan, PlanError> {
    let profit = weigh(inst, weights)?;
    let paths = path_count(inst);
    if paths > BRUTE_FORCE_LIMIT {
        return Err(PlanError::TooLarge {
            what: "brute-force search",
            needed: paths,
            unit: "paths",
            limit: BRUTE_FORCE_LIMIT,
        });
    }
    let (cheapest, _) = cost_range(inst)?;
    let cap = cost_cap.unwrap_or(u64::MAX);
    let succ = successors(inst);
    let mut search = Search {
        inst,
        profit: &profit,
        succ: &succ,
        cap,
        path: Vec::with_capacity(inst.zone_count()),
        best: None,
    };
    for i in 0..inst.zones()[0].modules.len() {
        search.walk(i, 0.0, 0);
    }
    match search.best {
        Some((_, path)) => Ok(Plan::from_path(inst, &profit, path)),
        None => Err(PlanError::OverCap { cap, cheapest }),
    }
}

/// The depth-first enumeration state.
struct Search<'a> {
    inst: &'a Instance,
    profit: &'a [f64],
    succ: &'a [Vec<usize>],
    cap: u64,
    path: Vec<usize>,
    best: Option<(f64, Vec<usize>)>,
}

impl Search<'_> {
    /// Extends the current path with module `i` of the next zone and explores everything after it.
    fn walk(&mut self, i: usize, p: f64, c: u64) {
        let j = self.path.len();
        let g = self.inst.global(j, i);
        let (p, c) = (p + self.profit[g], c + u64::from(self.inst.cost(j, i)));
        self.path.push(i);
        if j + 1 == self.inst.zone_count() {
            if c <= self.cap && self.best.as_ref().is_none_or(|(b, _)| p > *b) {
                self.best = Some((p, self.path.clone()));
            }
        } else {
            for &s in &self.succ[g] {
                self.walk(s, p, c);
            }
        }
        self.path.pop();
    }
}

/// Successor lists by global module index (indices in the next zone), ascending.
fn successors(inst: &Instance) -> Vec<Vec<usize>> {
    let mut succ = vec![Vec::new(); inst.module_count()];
    for j in 1..inst.zone_count() {
        for b in 0..inst.zones()[j].modules.len() {
            for &a in inst.preds(j, b) {
                succ[inst.global(j - 1, a as usize)].push(b);
            }
        }
    }
    succ
}

/// The number of complete paths, saturating.
fn path_count(inst: &Instance) -> u128 {
    let mut prev = vec![1u128; inst.zones()[0].modules.len()];
    for j in 1..inst.zone_count() {
        prev = (0..inst.zones()[j].modules.len())
            .map(|b| {
                inst.preds(j, b)
                    .iter()
                    .fold(0u128, |n, &a| n.saturating_add(prev[a as usize]))
            })
            .collect();
    }
    prev.iter().fold(0u128, |n, &m| n.saturating_add(m))
}
