//! RGMS (§2.7.1 of 000): the ratio-based greedy baseline, zone by zone the best 𝒫/C module.

use rand::Rng;

use crate::cpms::cost_range;
use crate::model::{weigh, Instance, Plan, Weights};
use crate::PlanError;

/// RGMS, the thesis's Ratio-based Greedy Module Selection: in each zone, among the modules the
/// previous choice leads to, take the one with the largest 𝒫_{i,j} / C_{i,j} (a free module beats
/// any priced one; ties are broken uniformly at random with `rng`).
///
/// The thesis runs it without a cap. With `cost_cap = Some(c)` a module is only a candidate if the
/// cheapest completion through it still fits (spent + C_min-to-end ≤ c), so RGMS finds a plan
/// whenever one exists; modules that lead nowhere are never candidates. O(|M| log |M| + |E|).
pub fn rgms<R: Rng + ?Sized>(
    inst: &Instance,
    weights: &Weights,
    cost_cap: Option<u64>,
    rng: &mut R,
) -> Result<Plan, PlanError> {
    let profit = weigh(inst, weights)?;
    let to_end = cost_to_end(inst);
    let k = inst.zone_count();
    let cap = cost_cap.unwrap_or(u64::MAX);
    let mut path = Vec::with_capacity(k);
    let mut spent = 0u64;
    for j in 0..k {
        let mut best: Option<((bool, f64), usize)> = None;
        let mut ties = 0u32;
        for i in 0..inst.zones()[j].modules.len() {
            let reachable = path.last().is_none_or(|&p| inst.has_edge(j - 1, p, i));
            let Some(rest) = to_end[inst.global(j, i)] else {
                continue;
            };
            if !reachable || spent.saturating_add(rest) > cap {
                continue;
            }
            let cost = inst.cost(j, i);
            let p = profit[inst.global(j, i)];
            // (free, ratio): a free module ranks above every priced one, then by profit.
            let key = if cost == 0 {
                (true, p)
            } else {
                (false, p / f64::from(cost))
            };
            match best {
                Some((b, _)) if b > key => {}
                Some((b, _)) if b == key => {
                    ties += 1;
                    if rng.gen_range(0..ties) == 0 {
                        best = Some((key, i));
                    }
                }
                _ => {
                    best = Some((key, i));
                    ties = 1;
                }
            }
        }
        let Some((_, i)) = best else {
            return Err(no_plan(inst, cost_cap, j));
        };
        spent += u64::from(inst.cost(j, i));
        path.push(i);
    }
    Ok(Plan::from_path(inst, &profit, path))
}

/// Why RGMS found no candidate in zone `j`: no path at all, or none under the cap.
fn no_plan(inst: &Instance, cost_cap: Option<u64>, j: usize) -> PlanError {
    match (cost_range(inst), cost_cap) {
        (Err(e), _) => e,
        (Ok((cheapest, _)), Some(cap)) => PlanError::OverCap { cap, cheapest },
        // Unreachable with a path present and no cap: the first zone always has a candidate.
        (Ok(_), None) => PlanError::NoPath {
            zone: j,
            name: inst.zone_name(j),
        },
    }
}

/// For each module (global index), the cost of the cheapest path from it (inclusive) to the
/// last zone, or `None` if it leads nowhere.
fn cost_to_end(inst: &Instance) -> Vec<Option<u64>> {
    let k = inst.zone_count();
    let mut out = vec![None; inst.module_count()];
    for i in 0..inst.zones()[k - 1].modules.len() {
        out[inst.global(k - 1, i)] = Some(u64::from(inst.cost(k - 1, i)));
    }
    for j in (1..k).rev() {
        for b in 0..inst.zones()[j].modules.len() {
            let Some(rest) = out[inst.global(j, b)] else {
                continue;
            };
            for &a in inst.preds(j, b) {
                let a = a as usize;
                let via = u64::from(inst.cost(j - 1, a)) + rest;
                let slot = &mut out[inst.global(j - 1, a)];
                if slot.is_none_or(|s| via < s) {
                    *slot = Some(via);
                }
            }
        }
    }
    out
}
