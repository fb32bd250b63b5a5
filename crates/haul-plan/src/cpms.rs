//! CPMS (Alg. 1 of 000): the longest-profit path through the zone DAG without a cost cap, and the
//! cheapest / dearest path costs C_Gmin / C_Gmax that Eq. 2.14 of 000 needs.

use std::ops::Add;

use crate::model::{weigh, Instance, Plan, Weights};
use crate::PlanError;

/// The best path through the layered DAG by `value`, with `better(a, b)` meaning a beats b.
///
/// Alg. 1 of 000: D(i, j) = max{D(i', j-1) | e_{(i',j-1),(i,j)} = 1} + value(i, j), with the
/// argmax predecessor kept for the path. Ties go to the lowest predecessor index. O(|M| + |E|).
pub(crate) fn best_path<T, V, B>(
    inst: &Instance,
    value: V,
    better: B,
) -> Result<(T, Vec<usize>), PlanError>
where
    T: Copy + Add<Output = T>,
    V: Fn(usize, usize) -> T,
    B: Fn(T, T) -> bool,
{
    let k = inst.zone_count();
    // D per zone (None: unreachable) and the chosen predecessor of each module.
    let mut prev: Vec<Option<T>> = Vec::new();
    let mut back: Vec<Vec<u32>> = Vec::with_capacity(k);
    for j in 0..k {
        let n = inst.zones()[j].modules.len();
        let mut cur = Vec::with_capacity(n);
        let mut arg = vec![0u32; n];
        for (i, slot) in arg.iter_mut().enumerate() {
            let d = if j == 0 {
                Some(value(0, i))
            } else {
                let mut best: Option<(T, u32)> = None;
                for &p in inst.preds(j, i) {
                    if let Some(v) = prev[p as usize] {
                        if best.is_none_or(|(b, _)| better(v, b)) {
                            best = Some((v, p));
                        }
                    }
                }
                best.map(|(b, p)| {
                    *slot = p;
                    b + value(j, i)
                })
            };
            cur.push(d);
        }
        if cur.iter().all(Option::is_none) {
            return Err(PlanError::NoPath {
                zone: j,
                name: inst.zone_name(j),
            });
        }
        prev = cur;
        back.push(arg);
    }
    // The virtual end module m_{1,K+1} follows every module of the last zone.
    let mut end: Option<(T, usize)> = None;
    for (i, d) in prev.iter().enumerate() {
        if let Some(v) = *d {
            if end.is_none_or(|(b, _)| better(v, b)) {
                end = Some((v, i));
            }
        }
    }
    let Some((total, mut i)) = end else {
        return Err(PlanError::NoPath {
            zone: k - 1,
            name: inst.zone_name(k - 1),
        });
    };
    let mut path = vec![0; k];
    for j in (0..k).rev() {
        path[j] = i;
        i = back[j][i] as usize;
    }
    Ok((total, path))
}

/// CPMS, Alg. 1 of 000: the most profitable workflow when modules are free (C_max = ∞). O(|M| + |E|).
pub fn cpms(inst: &Instance, weights: &Weights) -> Result<Plan, PlanError> {
    let profit = weigh(inst, weights)?;
    let (_, path) = best_path(inst, |j, i| profit[inst.global(j, i)], |a, b| a > b)?;
    Ok(Plan::from_path(inst, &profit, path))
}

/// The costs (C_Gmin, C_Gmax) of the cheapest and the dearest complete workflow (Table 2.4 of 000).
pub fn cost_range(inst: &Instance) -> Result<(u64, u64), PlanError> {
    let cost = |j, i| u64::from(inst.cost(j, i));
    let (min, _) = best_path(inst, cost, |a, b| a < b)?;
    let (max, _) = best_path(inst, cost, |a, b| a > b)?;
    Ok((min, max))
}
