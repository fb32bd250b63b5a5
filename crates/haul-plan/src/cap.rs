//! The two cost-cap rules of the thesis's simulation (§2.7.2 of 000): C_RGMS and Eq. 2.14.

use rand::Rng;

use crate::cpms::cost_range;
use crate::model::{Instance, Weights};
use crate::rgms::rgms;
use crate::PlanError;

/// How the simulation sets C_max for DPMS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CapRule {
    /// C_max = C_RGMS, the cost of the (uncapped) RGMS plan on the same instance (Figs. 2.10–2.12 of 000).
    Rgms,
    /// C_max = max{C_Gmin, ⌊C_Gmax / 4⌋} (Eq. 2.14 of 000; the thesis does not say how ¼ · C_Gmax rounds).
    QuarterMax,
}

impl CapRule {
    /// A short name for tables and logs.
    pub fn name(self) -> &'static str {
        match self {
            CapRule::Rgms => "C_max = C_RGMS",
            CapRule::QuarterMax => "C_max = max{C_Gmin, C_Gmax/4} (Eq. 2.14)",
        }
    }
}

/// The cost cap `rule` gives on `inst`; `weights` and `rng` are used only by [`CapRule::Rgms`].
pub fn cost_cap<R: Rng + ?Sized>(
    rule: CapRule,
    inst: &Instance,
    weights: &Weights,
    rng: &mut R,
) -> Result<u64, PlanError> {
    match rule {
        CapRule::Rgms => Ok(rgms(inst, weights, None, rng)?.cost),
        CapRule::QuarterMax => {
            let (cheapest, dearest) = cost_range(inst)?;
            Ok(cheapest.max(dearest / 4))
        }
    }
}
