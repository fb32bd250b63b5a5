//! The TSWOP planner (000 §2): zones of modules, and the workflow that maximises profit.
//!
//! A transfer is composed by choosing one module (resource or service) in each of K zones so that
//! chosen modules of adjacent zones are joined by an edge of the zone DAG. Each module has a profit
//! vector weighted into one profit (Eq. 2.3 of 000) and an integer cost. Pure: no IO, no clocks, no
//! threads; every random choice comes from a caller-supplied RNG.
//!
//! - [`cpms`]: Alg. 1 of 000, the longest-profit path without a cost cap, O(|M| + |E|).
//! - [`dpms`]: Alg. 2 / Eq. 2.13 of 000, exact under a cost cap, O(|E| · C_max).
//! - [`rgms`]: the thesis's greedy baseline (best 𝒫/C per zone).
//! - [`generate`]: the thesis's random instances; [`cost_cap`]: its two cap rules (Eq. 2.14).
//! - [`brute_force`]: every path tried, for tests.
//! - [`request`]: the user request r with its weights α; [`workflow`]: a request's module
//!   database (routes and transports with their estimates) planned into a workflow.

mod brute;
mod cap;
mod cpms;
mod dpms;
mod error;
mod generate;
mod model;
pub mod request;
mod rgms;
pub mod workflow;

pub use brute::{brute_force, BRUTE_FORCE_LIMIT};
pub use cap::{cost_cap, CapRule};
pub use cpms::{cost_range, cpms};
pub use dpms::{dpms, DPMS_CELL_LIMIT, KEEP_ALL_CELLS};
pub use error::PlanError;
pub use generate::{generate, GenParams, GENERATED, XI};
pub use model::{Edge, Instance, Module, Plan, Term, Weights, Zone};
pub use rgms::rgms;
