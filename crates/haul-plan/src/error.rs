//! `PlanError`: everything that can go wrong building an instance or planning over it.

use thiserror::Error;

/// Why an instance could not be built or no workflow could be planned on it.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum PlanError {
    /// The workflow has no zones at all.
    #[error("the workflow has no zones: give at least one zone of modules")]
    NoZones,
    /// A zone holds no module, so no path can cross it.
    #[error("zone {zone} ({name}) has no modules: every zone needs at least one")]
    EmptyZone {
        /// Index of the zone.
        zone: usize,
        /// Name of the zone.
        name: String,
    },
    /// An edge names a zone or module that does not exist.
    #[error("edge from module {from} of zone {zone} to module {to} of zone {}: {why}", zone + 1)]
    BadEdge {
        /// Zone of the edge's source module (the target is in `zone + 1`).
        zone: usize,
        /// Index of the source module in `zone`.
        from: usize,
        /// Index of the target module in `zone + 1`.
        to: usize,
        /// What is wrong with it.
        why: &'static str,
    },
    /// A module's profit vector and the weight vector differ in length (Eq. 2.3 of 000).
    #[error(
        "module {module} ({name}) of zone {zone} has {terms} profit terms but there are {weights} weights"
    )]
    WeightMismatch {
        /// Zone of the module.
        zone: usize,
        /// Index of the module in its zone.
        module: usize,
        /// Name of the module.
        name: String,
        /// Length of its profit vector.
        terms: usize,
        /// Length of the weight vector.
        weights: usize,
    },
    /// A profit term, a weight or a weighted profit is NaN or infinite, or a weight is negative.
    #[error("{what} is {value}: it must be a finite number{}", if *.negative_ok { "" } else { " ≥ 0" })]
    NotFinite {
        /// What the number is (names the module or the weight).
        what: String,
        /// The offending value.
        value: f64,
        /// Whether negative values are allowed for this number.
        negative_ok: bool,
    },
    /// No module of `zone` can be reached from the first zone along the edges.
    #[error("no complete workflow: no module of zone {zone} ({name}) is reachable from zone 0")]
    NoPath {
        /// First zone none of whose modules is reachable.
        zone: usize,
        /// Name of that zone.
        name: String,
    },
    /// Every complete workflow costs more than the cap.
    #[error("no workflow costs at most the cap of {cap}: the cheapest complete workflow costs {cheapest}")]
    OverCap {
        /// The cost cap C_max asked for.
        cap: u64,
        /// The cost of the cheapest complete workflow (C_Gmin).
        cheapest: u64,
    },
    /// The work or memory an exact algorithm would need exceeds its limit.
    #[error("{what} needs {needed} {unit}, over the limit of {limit}")]
    TooLarge {
        /// Which algorithm and why (e.g. the DPMS cost table).
        what: &'static str,
        /// How much it would need.
        needed: u128,
        /// The unit of `needed` and `limit` (cells, paths).
        unit: &'static str,
        /// The limit.
        limit: u128,
    },
    /// A random-generator parameter is out of range.
    #[error("bad generator parameter {name} = {value}: {why}")]
    BadParams {
        /// Parameter name (|M|, K, d, ξ, values).
        name: &'static str,
        /// Its value, as given.
        value: String,
        /// Why it was rejected.
        why: &'static str,
    },
}
