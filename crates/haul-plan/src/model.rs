//! The TSWOP model (§2.6 of 000): profit terms, modules, zones, the zone DAG, weights and plans.

use std::borrow::Cow;

use crate::PlanError;

/// One component p_{i,j,k} of a module's profit vector (Eq. 2.2 of 000) and where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Term {
    /// How well the module satisfies request element r_k (the thesis uses [0, 1]; any finite value is accepted).
    pub value: f64,
    /// Where the number came from: "history", "profile", "prediction", "operator", "generator", ...
    pub source: Cow<'static, str>,
}

impl Term {
    /// A profit term with its source label.
    pub fn new(value: f64, source: impl Into<Cow<'static, str>>) -> Self {
        Term {
            value,
            source: source.into(),
        }
    }
}

/// A workflow module m_{i,j}: a resource or service one zone can use (§2.6.2 of 000).
#[derive(Debug, Clone, PartialEq)]
pub struct Module {
    /// The module's name (e.g. "gridftp", "oscars-circuit"); its zone is the zone that holds it.
    pub id: String,
    /// Its profit vector p_{i,j}, one term per request element.
    pub profit: Vec<Term>,
    /// Its (financial) cost C_{i,j}, in integer units: scale money to integers, as the thesis does.
    pub cost: u32,
}

impl Module {
    /// A module with a profit vector and a cost.
    pub fn new(id: impl Into<String>, profit: Vec<Term>, cost: u32) -> Self {
        Module {
            id: id.into(),
            profit,
            cost,
        }
    }
}

/// One zone (layer) of the workflow: the modules that can perform one step of the transfer.
#[derive(Debug, Clone, PartialEq)]
pub struct Zone {
    /// The zone's name (e.g. "source host", "edge network", "transport").
    pub name: String,
    /// Its modules, N_j of them; a plan names one by its index here.
    pub modules: Vec<Module>,
}

impl Zone {
    /// A zone of modules.
    pub fn new(name: impl Into<String>, modules: Vec<Module>) -> Self {
        Zone {
            name: name.into(),
            modules,
        }
    }
}

/// A dependency e_{(from, zone), (to, zone + 1)}: module `to` of zone `zone + 1` may follow module `from` of zone `zone`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Edge {
    /// Zone of the source module.
    pub zone: usize,
    /// Index of the source module in `zone`.
    pub from: usize,
    /// Index of the target module in `zone + 1`.
    pub to: usize,
}

/// A TSWOP instance: K zones in order and the edges between modules of adjacent zones (a layered DAG).
///
/// The virtual start and end modules m_{1,0} and m_{1,K+1} of the thesis are implicit: every module
/// of the first zone follows the start and every module of the last zone leads to the end.
#[derive(Debug, Clone, PartialEq)]
pub struct Instance {
    zones: Vec<Zone>,
    /// `base[j]`: global index of zone j's first module; `base[K]` = |M|.
    base: Vec<usize>,
    /// Preds of global module g: `pred_list[pred_start[g]..pred_start[g + 1]]`, sorted, unique.
    pred_start: Vec<usize>,
    pred_list: Vec<u32>,
}

impl Instance {
    /// An instance from its zones and edges; duplicate edges are merged, bad ones rejected.
    pub fn new(zones: Vec<Zone>, edges: &[Edge]) -> Result<Self, PlanError> {
        check_zones(&zones)?;
        let mut preds: Vec<Vec<Vec<u32>>> = zones
            .iter()
            .map(|z| vec![Vec::new(); z.modules.len()])
            .collect();
        for e in edges {
            let bad = |why| PlanError::BadEdge {
                zone: e.zone,
                from: e.from,
                to: e.to,
                why,
            };
            if e.zone + 1 >= zones.len() {
                return Err(bad("edges join adjacent zones and there is no next zone"));
            }
            if e.from >= zones[e.zone].modules.len() {
                return Err(bad("the source zone has no such module"));
            }
            let targets = &mut preds[e.zone + 1];
            let Some(list) = targets.get_mut(e.to) else {
                return Err(bad("the target zone has no such module"));
            };
            list.push(e.from as u32);
        }
        for list in preds.iter_mut().flatten() {
            list.sort_unstable();
            list.dedup();
        }
        preds.remove(0);
        Ok(Self::from_preds(zones, preds))
    }

    /// An instance whose adjacent zones are fully connected (d = 1), as in the MCKP reduction of §2.6.6.
    pub fn fully_connected(zones: Vec<Zone>) -> Result<Self, PlanError> {
        check_zones(&zones)?;
        let gaps = zones
            .windows(2)
            .map(|pair| {
                let all: Vec<u32> = (0..pair[0].modules.len() as u32).collect();
                vec![all; pair[1].modules.len()]
            })
            .collect();
        Ok(Self::from_preds(zones, gaps))
    }

    /// Builds from checked zones and, for each zone after the first (`gaps[j]` is zone j + 1),
    /// its modules' predecessor lists (sorted, unique, in range).
    pub(crate) fn from_preds(zones: Vec<Zone>, gaps: Vec<Vec<Vec<u32>>>) -> Self {
        let mut base = vec![0];
        for z in &zones {
            base.push(base[base.len() - 1] + z.modules.len());
        }
        debug_assert_eq!(gaps.len() + 1, zones.len());
        // Zone 0 follows the virtual start only: empty lists.
        let mut pred_start = vec![0; zones[0].modules.len() + 1];
        let mut pred_list = Vec::with_capacity(gaps.iter().flatten().map(Vec::len).sum());
        for (zone_preds, z) in gaps.into_iter().zip(&zones[1..]) {
            debug_assert_eq!(zone_preds.len(), z.modules.len());
            for list in zone_preds {
                pred_list.extend_from_slice(&list);
                pred_start.push(pred_list.len());
            }
        }
        Instance {
            zones,
            base,
            pred_start,
            pred_list,
        }
    }

    /// The zones, in path order.
    pub fn zones(&self) -> &[Zone] {
        &self.zones
    }

    /// Number of zones K.
    pub fn zone_count(&self) -> usize {
        self.zones.len()
    }

    /// Number of modules |M| (without the two virtual ones).
    pub fn module_count(&self) -> usize {
        self.base[self.zones.len()]
    }

    /// Number of edges |E| between modules of adjacent zones (without the virtual start's and end's).
    pub fn edge_count(&self) -> usize {
        self.pred_list.len()
    }

    /// Module `module` of zone `zone`; panics if either is out of range.
    pub fn module(&self, zone: usize, module: usize) -> &Module {
        &self.zones[zone].modules[module]
    }

    /// Indices of the modules of zone `zone - 1` with an edge into module `module` of `zone` (none for
    /// zone 0); panics if either is out of range.
    pub fn preds(&self, zone: usize, module: usize) -> &[u32] {
        let g = self.base[zone] + module;
        &self.pred_list[self.pred_start[g]..self.pred_start[g + 1]]
    }

    /// Whether module `to` of zone `zone + 1` may follow module `from` of zone `zone`.
    pub fn has_edge(&self, zone: usize, from: usize, to: usize) -> bool {
        zone + 1 < self.zones.len()
            && to < self.zones[zone + 1].modules.len()
            && self
                .preds(zone + 1, to)
                .binary_search(&(from as u32))
                .is_ok()
    }

    /// Whether `modules` (one index per zone) is a complete path through the zone DAG.
    pub fn is_path(&self, modules: &[usize]) -> bool {
        modules.len() == self.zones.len()
            && modules
                .iter()
                .zip(&self.zones)
                .all(|(&i, z)| i < z.modules.len())
            && modules
                .windows(2)
                .enumerate()
                .all(|(j, w)| self.has_edge(j, w[0], w[1]))
    }

    /// Global index of module `module` of zone `zone` (zone-major order).
    pub(crate) fn global(&self, zone: usize, module: usize) -> usize {
        self.base[zone] + module
    }

    /// Cost C_{i,j} of module `module` of zone `zone`.
    pub(crate) fn cost(&self, zone: usize, module: usize) -> u32 {
        self.zones[zone].modules[module].cost
    }

    /// The name of zone `zone`.
    pub(crate) fn zone_name(&self, zone: usize) -> String {
        self.zones[zone].name.clone()
    }
}

/// Rejects an instance without zones, with an empty zone, or too big for 32-bit module indices.
pub(crate) fn check_zones(zones: &[Zone]) -> Result<(), PlanError> {
    if zones.is_empty() {
        return Err(PlanError::NoZones);
    }
    for (j, z) in zones.iter().enumerate() {
        if z.modules.is_empty() {
            return Err(PlanError::EmptyZone {
                zone: j,
                name: z.name.clone(),
            });
        }
        if z.modules.len() > u32::MAX as usize {
            return Err(PlanError::TooLarge {
                what: "a zone's module count",
                needed: z.modules.len() as u128,
                unit: "modules",
                limit: u32::MAX as u128,
            });
        }
    }
    Ok(())
}

/// The weight vector α of Eq. 2.3 of 000: how much each request element matters.
#[derive(Debug, Clone, PartialEq)]
pub struct Weights {
    alpha: Vec<f64>,
}

impl Weights {
    /// Weights α_1..α_n; each must be finite and ≥ 0.
    pub fn new(alpha: Vec<f64>) -> Result<Self, PlanError> {
        for (k, &a) in alpha.iter().enumerate() {
            if !a.is_finite() || a < 0.0 {
                return Err(PlanError::NotFinite {
                    what: format!("weight α_{}", k + 1),
                    value: a,
                    negative_ok: false,
                });
            }
        }
        Ok(Weights { alpha })
    }

    /// n weights of 1 (every request element counts the same).
    pub fn ones(n: usize) -> Self {
        Weights {
            alpha: vec![1.0; n],
        }
    }

    /// The weights, α_1 first.
    pub fn alpha(&self) -> &[f64] {
        &self.alpha
    }

    /// The module profit 𝒫 = Σ_k α_k · p_k (Eq. 2.3 of 000), or `None` if the lengths differ.
    pub fn profit(&self, module: &Module) -> Option<f64> {
        (module.profit.len() == self.alpha.len()).then(|| {
            self.alpha
                .iter()
                .zip(&module.profit)
                .map(|(a, t)| a * t.value)
                .sum()
        })
    }
}

/// Every module's weighted profit 𝒫_{i,j} (Eq. 2.3 of 000), indexed by global module index.
pub(crate) fn weigh(inst: &Instance, weights: &Weights) -> Result<Vec<f64>, PlanError> {
    let mut out = Vec::with_capacity(inst.module_count());
    for (j, z) in inst.zones.iter().enumerate() {
        for (i, m) in z.modules.iter().enumerate() {
            let Some(p) = weights.profit(m) else {
                return Err(PlanError::WeightMismatch {
                    zone: j,
                    module: i,
                    name: m.id.clone(),
                    terms: m.profit.len(),
                    weights: weights.alpha.len(),
                });
            };
            if !p.is_finite() {
                return Err(PlanError::NotFinite {
                    what: format!("the weighted profit of module {i} ({}) of zone {j}", m.id),
                    value: p,
                    negative_ok: true,
                });
            }
            out.push(p);
        }
    }
    Ok(out)
}

/// A chosen workflow: one module per zone, with its total profit and cost.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The index of the chosen module in each zone, zone 0 first.
    pub modules: Vec<usize>,
    /// Total profit Σ 𝒫_{i,j} (Eq. 2.4 of 000), summed in zone order.
    pub profit: f64,
    /// Total cost Σ C_{i,j} (Eq. 2.5 of 000).
    pub cost: u64,
}

impl Plan {
    /// The plan for a path, with profit and cost summed in zone order.
    pub(crate) fn from_path(inst: &Instance, profit: &[f64], modules: Vec<usize>) -> Self {
        let mut p = 0.0;
        let mut c = 0u64;
        for (j, &i) in modules.iter().enumerate() {
            p += profit[inst.global(j, i)];
            c += u64::from(inst.cost(j, i));
        }
        Plan {
            modules,
            profit: p,
            cost: c,
        }
    }

    /// The chosen modules with their zones, zone 0 first (`inst` must be the planned instance).
    pub fn chosen<'a>(
        &'a self,
        inst: &'a Instance,
    ) -> impl Iterator<Item = (&'a Zone, &'a Module)> {
        inst.zones
            .iter()
            .zip(&self.modules)
            .map(|(z, &i)| (z, &z.modules[i]))
    }
}
