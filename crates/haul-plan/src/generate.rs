//! The thesis's random instance generator (§2.7.1 of 000): ⟨|M|, K, d⟩, ξ = 1.5, values in [1, 100].

use rand::seq::index::sample;
use rand::Rng;

use crate::model::{Instance, Module, Term, Zone};
use crate::PlanError;

/// ξ of §2.7.1 of 000: zone sizes are drawn from [1, ξ · |M| / K].
pub const XI: f64 = 1.5;

/// The source label the generator puts on every profit term.
pub const GENERATED: &str = "generator";

/// Parameters of one random instance: the thesis's ⟨|M|, K, d⟩ plus ξ and the value range.
#[derive(Debug, Clone, PartialEq)]
pub struct GenParams {
    modules: usize,
    zones: usize,
    density: f64,
    xi: f64,
    values: (u32, u32),
    exact_total: bool,
}

impl GenParams {
    /// |M| modules in K zones with edge density d ∈ (0, 1]; ξ = 1.5, values in [1, 100], exactly |M| modules.
    pub fn new(modules: usize, zones: usize, density: f64) -> Result<Self, PlanError> {
        if zones == 0 {
            return Err(bad("K", zones, "there must be at least one zone"));
        }
        if modules < zones || modules > u32::MAX as usize {
            return Err(bad(
                "|M|",
                modules,
                "every zone needs a module: K ≤ |M| ≤ 2^32 − 1",
            ));
        }
        if !(density > 0.0 && density <= 1.0) {
            return Err(bad("d", density, "the edge density must be in (0, 1]"));
        }
        Ok(GenParams {
            modules,
            zones,
            density,
            xi: XI,
            values: (1, 100),
            exact_total: true,
        })
    }

    /// Sets ξ (> 0), which spreads the zone sizes.
    pub fn with_xi(mut self, xi: f64) -> Result<Self, PlanError> {
        if !(xi.is_finite() && xi > 0.0) {
            return Err(bad("ξ", xi, "it must be a finite number > 0"));
        }
        self.xi = xi;
        Ok(self)
    }

    /// Sets the range [lo, hi] both profits and costs are drawn from (integers, uniformly).
    pub fn with_values(mut self, lo: u32, hi: u32) -> Result<Self, PlanError> {
        if lo > hi {
            return Err(bad("values", format!("[{lo}, {hi}]"), "lo must be ≤ hi"));
        }
        self.values = (lo, hi);
        Ok(self)
    }

    /// Keeps the zone sizes as drawn, so the total is only about (1 + ξ|M|/K) · K / 2, not |M|.
    pub fn with_literal_sizes(mut self) -> Self {
        self.exact_total = false;
        self
    }

    /// The largest zone size: max(⌊ξ · |M| / K⌋, ⌈|M| / K⌉, 1).
    pub fn zone_size_max(&self) -> usize {
        let scaled = (self.xi * self.modules as f64 / self.zones as f64).floor() as usize;
        scaled.max(self.modules.div_ceil(self.zones)).max(1)
    }
}

fn bad(name: &'static str, value: impl ToString, why: &'static str) -> PlanError {
    PlanError::BadParams {
        name,
        value: value.to_string(),
        why,
    }
}

/// A random instance as in §2.7.1 of 000, deterministic for a given `rng` state.
///
/// - Zone sizes N_j are drawn uniformly from [1, `zone_size_max`]. The thesis leaves open how
///   that squares with |M|: drawn literally the sizes sum to about ¾ |M| for ξ = 1.5. By default
///   the sizes are then nudged one module at a time (a random zone still inside the range) until
///   they sum to exactly |M|; [`GenParams::with_literal_sizes`] keeps them as drawn.
/// - Every module of zone j gets max(1, round(d · N_{j+1})) distinct random successors in zone
///   j + 1; then every module of zone j + 1 without a predecessor gets one random predecessor.
/// - Profit (one term, labelled [`GENERATED`]) and cost are integers drawn uniformly from the
///   value range, [1, 100] by default. Use [`crate::Weights::ones`]`(1)` with these instances.
pub fn generate<R: Rng + ?Sized>(params: &GenParams, rng: &mut R) -> Instance {
    let sizes = zone_sizes(params, rng);
    let (lo, hi) = params.values;
    let zones: Vec<Zone> = sizes
        .iter()
        .enumerate()
        .map(|(j, &n)| {
            let modules = (0..n)
                .map(|i| {
                    let p = rng.gen_range(lo..=hi);
                    let c = rng.gen_range(lo..=hi);
                    Module::new(format!("m{j}.{i}"), vec![Term::new(p.into(), GENERATED)], c)
                })
                .collect();
            Zone::new(format!("z{j}"), modules)
        })
        .collect();
    let gaps = sizes
        .windows(2)
        .map(|pair| gap_preds(pair[0], pair[1], params.density, rng))
        .collect();
    Instance::from_preds(zones, gaps)
}

/// The K zone sizes, each in [1, `zone_size_max`], summing to |M| unless literal sizes were asked for.
fn zone_sizes<R: Rng + ?Sized>(params: &GenParams, rng: &mut R) -> Vec<usize> {
    let hi = params.zone_size_max();
    let k = params.zones;
    let mut sizes: Vec<usize> = (0..k).map(|_| rng.gen_range(1..=hi)).collect();
    if params.exact_total {
        // Terminates: K ≤ |M| ≤ K · hi, so some zone can always move towards the total.
        let mut total: usize = sizes.iter().sum();
        while total != params.modules {
            let j = rng.gen_range(0..k);
            if total < params.modules && sizes[j] < hi {
                sizes[j] += 1;
                total += 1;
            } else if total > params.modules && sizes[j] > 1 {
                sizes[j] -= 1;
                total -= 1;
            }
        }
    }
    sizes
}

/// Predecessor lists (sorted) of the `next` modules of a zone that follows a zone of `from` modules.
fn gap_preds<R: Rng + ?Sized>(
    from: usize,
    next: usize,
    density: f64,
    rng: &mut R,
) -> Vec<Vec<u32>> {
    let fanout = ((density * next as f64).round() as usize).clamp(1, next);
    let mut preds = vec![Vec::with_capacity(fanout * from / next + 1); next];
    for a in 0..from as u32 {
        if fanout == next {
            preds.iter_mut().for_each(|p| p.push(a));
        } else {
            for b in sample(rng, next, fanout) {
                preds[b].push(a);
            }
        }
    }
    for p in preds.iter_mut().filter(|p| p.is_empty()) {
        p.push(rng.gen_range(0..from as u32));
    }
    preds
}
