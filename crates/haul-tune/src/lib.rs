//! Pure tuning: every optimizer and throughput estimator haul uses, with no IO, no sleeping and
//! no sockets. A tuner is an ask/tell state machine: the caller asks for the next point, measures
//! it however it likes (a live profiling run, a profile table plus noise, a recorded trace) and
//! tells the result back. This makes every algorithm replayable thousands of times in a test.
//!
//! Seeds: FastProf and its baselines follow §4 of `000-digest.md` (Ch. 4 of the dissertation);
//! clusters, Alg. 3 concurrency search and the early-stopping estimators follow `003-digest.md`;
//! the BTC predictors and their NWS-style selector ([`predict`]) follow §2.3 of `002-digest.md`.

pub mod cluster;
pub mod concurrency;
pub mod estimate;
pub mod estimate_replay;
pub mod exhaustive;
pub mod kw;
pub mod predict;
pub mod random_walk;
pub mod replay;
pub mod space;
pub mod spsa;
pub mod stopping;
pub mod surface;
pub mod tabu;
pub mod traces;

use serde::{Deserialize, Serialize};
use thiserror::Error;

pub use space::{Axis, Point, Scale, Space};
pub use stopping::{StopReason, Stopping};

/// Everything that can go wrong in a tuner's input.
#[derive(Debug, Error, PartialEq)]
pub enum TuneError {
    /// `tell` was called without a pending `ask`, or with another point.
    #[error("tell without a matching ask: expected {expected:?}, got {got:?}")]
    UnexpectedTell {
        /// The point the optimizer asked for, if any.
        expected: Option<Point>,
        /// The point the caller reported.
        got: Point,
    },
    /// A measurement was NaN or infinite.
    #[error("measurement for {what} is not finite: {value}")]
    NonFinite {
        /// What was measured.
        what: String,
        /// The offending value.
        value: f64,
    },
    /// A configuration value is out of its range.
    #[error("bad parameter {name}: {reason}")]
    BadParameter {
        /// Parameter name.
        name: &'static str,
        /// Why it was rejected.
        reason: String,
    },
    /// A profile table could not be parsed.
    #[error("profile table line {line}: {reason}")]
    Table {
        /// 1-based line number (0 for whole-table problems).
        line: usize,
        /// What is wrong.
        reason: String,
    },
}

/// One measurement an optimizer made: the iterate, its real-unit parameters and the throughput.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Probe {
    /// Iterate in the scaled space ([1, 25] per axis).
    pub point: Point,
    /// The same point in real units (bytes, streams, ...), as sent to the profiler.
    pub real: Vec<f64>,
    /// Measured throughput, in the caller's unit (bytes/s for haul's own callers).
    pub y: f64,
}

/// The full record of one optimizer run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Trace {
    /// Name of the optimizer that produced the trace.
    pub optimizer: String,
    /// Every probe in order.
    pub probes: Vec<Probe>,
    /// Why the run ended, once it has.
    pub stop: Option<StopReason>,
}

impl Trace {
    /// The trace as pretty JSON (for `haul profile tune --trace`).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }
}

/// An ask/tell black-box maximiser over a [`Space`].
pub trait Optimizer {
    /// The next iterate to measure, or `None` once a stopping rule fired.
    fn ask(&mut self) -> Option<Point>;
    /// Reports the throughput `y` measured at `p` (the point returned by the last `ask`).
    fn tell(&mut self, p: &Point, y: f64) -> Result<(), TuneError>;
    /// The bookkeeping every optimizer shares: best probe, probe count, space and trace.
    fn tracker(&self) -> &stopping::Tracker;
    /// Best probe so far.
    fn best(&self) -> Option<&Probe> {
        self.tracker().best()
    }
    /// Number of measurements told so far.
    fn probes(&self) -> usize {
        self.tracker().probes()
    }
    /// The search space (to map iterates to real units).
    fn space(&self) -> &Space {
        self.tracker().space()
    }
    /// The run's trace.
    fn trace(&self) -> &Trace {
        self.tracker().trace()
    }
}
