//! DPMS (Alg. 2 and Eq. 2.13 of 000): the exact most profitable workflow under a cost cap.
//!
//! The table D(C, i, j) is filled zone by zone, one row of C_max + 1 cells per module. When the
//! whole table fits in [`KEEP_ALL_CELLS`] every zone's rows are kept and the path is read straight
//! back. Otherwise rows are kept only for every ⌈√K⌉-th zone and the path is read back segment by
//! segment, recomputing each segment's rows from its checkpoint: memory O(√K · max N_j · C_max)
//! for at most twice the arithmetic, instead of the thesis's full L(C, i, j) path table.

use crate::cpms::cost_range;
use crate::model::{weigh, Instance, Plan, Weights};
use crate::PlanError;

/// The most table cells DPMS keeps at once (8 bytes each: 1 GiB).
pub const DPMS_CELL_LIMIT: u128 = 1 << 27;

/// Up to this many cells (256 MiB) DPMS keeps every zone's rows and reads the path back without
/// recomputing; above it, only every ⌈√K⌉-th zone's.
pub const KEEP_ALL_CELLS: u128 = 1 << 25;

/// Source columns per tile in the sparse-predecessor maximum (2 KiB of each predecessor row).
const TILE: usize = 256;

/// DPMS, Alg. 2 of 000: the most profitable workflow whose total cost is at most `cost_cap`.
///
/// Exact for the integer costs of the model: it returns a plan of maximal profit among all
/// complete paths that cost ≤ `cost_cap` (on ties, the lowest module index, zone by zone from the
/// last), or [`PlanError::OverCap`] when even the cheapest path costs more. The cap is first
/// lowered to C_Gmax (no path costs more), so a huge cap costs no more than the dearest path.
///
/// Time O(|E| · C) where C = min(cost_cap, C_Gmax) + 1, as the thesis states for Alg. 2; when a
/// module's predecessors are its whole previous zone (d = 1) the zone-wide column maximum is shared,
/// so fully connected zones cost O(N_{j-1} · C + N_j · C). Memory O(|M| · C) up to
/// [`KEEP_ALL_CELLS`]; beyond it O((K/s + s) · max N_j · C) with s = ⌈√K⌉ and one more forward
/// pass to read the path back; never more than [`DPMS_CELL_LIMIT`] cells.
pub fn dpms(inst: &Instance, weights: &Weights, cost_cap: u64) -> Result<Plan, PlanError> {
    dpms_keeping(inst, weights, cost_cap, KEEP_ALL_CELLS)
}

/// [`dpms`] keeping every zone's rows only while the table has at most `keep_all` cells.
fn dpms_keeping(
    inst: &Instance,
    weights: &Weights,
    cost_cap: u64,
    keep_all: u128,
) -> Result<Plan, PlanError> {
    let profit = weigh(inst, weights)?;
    let (cheapest, dearest) = cost_range(inst)?;
    if cheapest > cost_cap {
        return Err(PlanError::OverCap {
            cap: cost_cap,
            cheapest,
        });
    }
    let cap = cost_cap.min(dearest);
    let k = inst.zone_count();
    let width = u128::from(cap) + 1;
    let all = inst.module_count() as u128 * width;
    let (stride, needed) = if all <= keep_all {
        (1, all)
    } else {
        let s = (1..=k).find(|s| s * s >= k).unwrap_or(k);
        let n_max = inst.zones().iter().map(|z| z.modules.len()).max();
        (
            s,
            (k.div_ceil(s) + s) as u128 * n_max.unwrap_or(1) as u128 * width,
        )
    };
    if needed > DPMS_CELL_LIMIT {
        return Err(PlanError::TooLarge {
            what: "the DPMS cost table (lower the cost cap or scale costs down)",
            needed,
            unit: "cells",
            limit: DPMS_CELL_LIMIT,
        });
    }
    let table = Table {
        inst,
        profit: &profit,
        width: cap as usize + 1,
    };
    let checkpoints = table.forward(stride);
    let path = table.read_back(&checkpoints, stride, cost_cap, cheapest)?;
    Ok(Plan::from_path(inst, &profit, path))
}

/// The DPMS table for one instance and one cap: rows of `width` = cap + 1 cells per module.
struct Table<'a> {
    inst: &'a Instance,
    profit: &'a [f64],
    width: usize,
}

impl Table<'_> {
    /// Eq. 2.13 of 000 for zone `j` from the rows of zone j − 1 (`prev`; one row of zeros for the
    /// virtual start): D(C, i, j) = 𝒫_{i,j} + max{D(C − C_{i,j}, i', j − 1) | e_{(i',j−1),(i,j)} = 1}.
    ///
    /// D(C, i, j) is the best profit of a path from zone 0 to m_{i,j} costing at most C, or −∞ where
    /// none exists (the thesis's −1; −∞ also works for profits ≤ 0).
    fn zone_rows(&self, j: usize, prev: &[f64]) -> Vec<f64> {
        let w = self.width;
        let n = self.inst.zones()[j].modules.len();
        let n_prev = prev.len() / w;
        let mut out = vec![f64::NEG_INFINITY; n * w];
        // Line 11–12 of Alg. 2: a module dearer than the cap stays −∞ for every C.
        let fits = |i: &usize| (self.inst.cost(j, *i) as usize) < w;
        let full = |i: &usize| j == 0 || self.inst.preds(j, *i).len() == n_prev;
        // Modules fed by the whole previous zone share one column maximum.
        if (0..n).filter(fits).any(|i| full(&i)) {
            let zone_max = column_max(prev, w);
            for i in (0..n).filter(fits).filter(full) {
                self.shift_add(&mut out, j, i, &zone_max, 0);
            }
        }
        // The rest one tile of source columns at a time, so the previous zone's tile stays in cache.
        let sparse: Vec<usize> = (0..n).filter(fits).filter(|i| !full(i)).collect();
        let mut acc = vec![f64::NEG_INFINITY; TILE];
        for c0 in (0..w).step_by(TILE) {
            for &i in &sparse {
                let span = w - self.inst.cost(j, i) as usize;
                let hi = (c0 + TILE).min(span);
                if c0 >= hi {
                    continue;
                }
                let acc = &mut acc[..hi - c0];
                acc.fill(f64::NEG_INFINITY);
                let slice = |p: u32| &prev[p as usize * w + c0..p as usize * w + hi];
                let mut quads = self.inst.preds(j, i).chunks_exact(4);
                for q in &mut quads {
                    max4_into(acc, [slice(q[0]), slice(q[1]), slice(q[2]), slice(q[3])]);
                }
                for &p in quads.remainder() {
                    max_into(acc, slice(p));
                }
                self.shift_add(&mut out, j, i, acc, c0);
            }
        }
        out
    }

    /// Row i of `out` from its predecessors' maximum: D(C_{i,j} + c0 + x, i, j) = 𝒫_{i,j} + best[x].
    fn shift_add(&self, out: &mut [f64], j: usize, i: usize, best: &[f64], c0: usize) {
        let w = self.width;
        let from = i * w + c0 + self.inst.cost(j, i) as usize;
        let p = self.profit[self.inst.global(j, i)];
        for (o, &v) in out[from..(i + 1) * w].iter_mut().zip(best) {
            *o = v + p;
        }
    }

    /// Fills the table zone by zone, keeping the rows of zones 0, s, 2s, ... and of the last zone.
    fn forward(&self, stride: usize) -> Vec<Vec<f64>> {
        let start = vec![0.0; self.width];
        let mut kept = Vec::new();
        let mut rows = self.zone_rows(0, &start);
        for j in 1..self.inst.zone_count() {
            let next = self.zone_rows(j, &rows);
            let done = std::mem::replace(&mut rows, next);
            if (j - 1).is_multiple_of(stride) {
                kept.push(done);
            }
        }
        kept.push(rows);
        kept
    }

    /// Reads the path back from D(C_max, 1, K + 1), recomputing one segment of rows at a time.
    fn read_back(
        &self,
        checkpoints: &[Vec<f64>],
        stride: usize,
        cost_cap: u64,
        cheapest: u64,
    ) -> Result<Vec<usize>, PlanError> {
        let k = self.inst.zone_count();
        let w = self.width;
        let last = checkpoints.last().map(Vec::as_slice).unwrap_or_default();
        // The virtual end m_{1,K+1} follows every module of the last zone (Line 18 of Alg. 2).
        let mut i = argmax(0..last.len() / w, last, w, w - 1).ok_or(PlanError::OverCap {
            cap: cost_cap,
            cheapest,
        })?;
        let mut path = vec![0; k];
        let (mut j, mut c) = (k - 1, w - 1);
        path[j] = i;
        while j > 0 {
            let a = (j - 1) / stride * stride;
            let mut seg: Vec<Vec<f64>> = Vec::with_capacity(j - a);
            for z in a + 1..j {
                let prev = seg.last().unwrap_or(&checkpoints[a / stride]);
                let rows = self.zone_rows(z, prev);
                seg.push(rows);
            }
            while j > a {
                c -= self.inst.cost(j, i) as usize;
                let prev = if j - 1 == a {
                    &checkpoints[a / stride]
                } else {
                    &seg[j - 2 - a]
                };
                let preds = self.inst.preds(j, i).iter().map(|&p| p as usize);
                i = argmax(preds, prev, w, c).unwrap_or(0);
                j -= 1;
                path[j] = i;
            }
        }
        Ok(path)
    }
}

/// The module among `candidates` with the largest finite D at cost `c` (lowest index on ties).
fn argmax(
    candidates: impl Iterator<Item = usize>,
    rows: &[f64],
    w: usize,
    c: usize,
) -> Option<usize> {
    let mut best: Option<(f64, usize)> = None;
    for i in candidates {
        let v = rows[i * w + c];
        if v > f64::NEG_INFINITY && best.is_none_or(|(b, _)| v > b) {
            best = Some((v, i));
        }
    }
    best.map(|(_, i)| i)
}

/// The column-wise maximum of a zone's rows.
fn column_max(rows: &[f64], w: usize) -> Vec<f64> {
    let mut out = vec![f64::NEG_INFINITY; w];
    let mut quads = rows.chunks_exact(4 * w);
    for q in &mut quads {
        let (r0, rest) = q.split_at(w);
        let (r1, rest) = rest.split_at(w);
        let (r2, r3) = rest.split_at(w);
        max4_into(&mut out, [r0, r1, r2, r3]);
    }
    for row in quads.remainder().chunks_exact(w) {
        max_into(&mut out, row);
    }
    out
}

/// acc[c] = max(acc[c], r0[c], r1[c], r2[c], r3[c]): four rows per pass over `acc`.
fn max4_into(acc: &mut [f64], [r0, r1, r2, r3]: [&[f64]; 4]) {
    let max = |a: f64, b: f64| if b > a { b } else { a };
    let rows = r0.iter().zip(r1).zip(r2).zip(r3);
    for (a, (((&b0, &b1), &b2), &b3)) in acc.iter_mut().zip(rows) {
        *a = max(*a, max(max(b0, b1), max(b2, b3)));
    }
}

/// acc[c] = max(acc[c], row[c]), written so that it compiles to packed max instructions.
fn max_into(acc: &mut [f64], row: &[f64]) {
    for (a, &b) in acc.iter_mut().zip(row) {
        *a = if b > *a { b } else { *a };
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    use super::*;
    use crate::{brute_force, cost_cap, generate, CapRule, GenParams};

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// With checkpoints every ⌈√K⌉ zones the read-back recomputes segments; same plan, still exact.
        #[test]
        fn checkpointed_read_back_is_exact(
            k in 1usize..=13, per in 1usize..=3, d in 0.2f64..=1.0, seed in any::<u64>(),
        ) {
            let params = GenParams::new(k * per, k, d).expect("valid params");
            let mut rng = StdRng::seed_from_u64(seed);
            let inst = generate(&params, &mut rng);
            let w = Weights::ones(1);
            for rule in [CapRule::Rgms, CapRule::QuarterMax] {
                let cap = cost_cap(rule, &inst, &w, &mut rng).expect("cap");
                let kept = dpms(&inst, &w, cap).expect("feasible");
                let segmented = dpms_keeping(&inst, &w, cap, 0).expect("feasible");
                prop_assert_eq!(&segmented, &kept);
                prop_assert!(inst.is_path(&segmented.modules) && segmented.cost <= cap);
                if k * per <= 13 {
                    let want = brute_force(&inst, &w, Some(cap)).expect("feasible");
                    prop_assert_eq!(segmented.profit, want.profit);
                }
            }
        }
    }
}
