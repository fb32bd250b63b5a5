//! FastProf's stopping rules (§4.4.3 of 000), shared by every optimizer so comparisons are fair:
//! 𝒞 (gain ratio y/B), ℛ (consecutive non-improving probes) and ℳ (total probes).

use serde::{Deserialize, Serialize};

use crate::{Point, Probe, Space, Trace, TuneError};

/// Why a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum StopReason {
    /// The best y/B reached 𝒞.
    GainRatio,
    /// ℛ consecutive probes brought no improvement.
    NoImprovement,
    /// ℳ probes were spent.
    Budget,
    /// The optimizer has nothing left to try (exhaustive grid done).
    Exhausted,
}

/// The three stopping rules. `target` is B, the reserved bandwidth, in the caller's unit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stopping {
    /// B; the 𝒞 rule is off without it.
    pub target: Option<f64>,
    /// 𝒞: stop when best/B ≥ this (0.75 in the author's code, 0.80–0.95 in the emulations).
    pub gain_ratio: f64,
    /// ℛ: consecutive non-improving probes (30 in the experiments). One probe is one
    /// one-time profiling, as the author's code counts it.
    pub patience: usize,
    /// ℳ: total probes; `None` is ∞.
    pub budget: Option<usize>,
}

impl Stopping {
    /// The experiments' setting: 𝒞 = 0.90, ℛ = 30, ℳ = 2ℛ (§4.4.3 of 000).
    pub fn new(target: Option<f64>) -> Stopping {
        Stopping {
            target,
            gain_ratio: 0.90,
            patience: 30,
            budget: Some(60),
        }
    }

    /// Sets 𝒞.
    pub fn gain_ratio(mut self, c: f64) -> Stopping {
        self.gain_ratio = c;
        self
    }

    /// Sets ℛ and ℳ = 2ℛ (the recommended default).
    pub fn patience(mut self, r: usize) -> Stopping {
        self.patience = r;
        self.budget = Some(2 * r);
        self
    }

    /// Sets ℳ (`None` = ∞).
    pub fn budget(mut self, m: Option<usize>) -> Stopping {
        self.budget = m;
        self
    }
}

/// Bookkeeping every optimizer shares: the pending ask, best, counters and the trace.
#[derive(Debug, Clone)]
pub struct Tracker {
    stopping: Stopping,
    space: Space,
    pending: Option<Point>,
    best: Option<Probe>,
    no_improve: usize,
    trace: Trace,
}

impl Tracker {
    /// A fresh tracker for `optimizer` over `space`.
    pub fn new(optimizer: &str, space: Space, stopping: Stopping) -> Tracker {
        let trace = Trace {
            optimizer: optimizer.to_string(),
            probes: Vec::new(),
            stop: None,
        };
        Tracker {
            stopping,
            space,
            pending: None,
            best: None,
            no_improve: 0,
            trace,
        }
    }

    /// The space.
    pub fn space(&self) -> &Space {
        &self.space
    }

    /// The stopping rules.
    pub fn stopping(&self) -> &Stopping {
        &self.stopping
    }

    /// Checks the rules; records and returns the reason once one fires.
    pub fn check(&mut self) -> Option<StopReason> {
        if let Some(r) = self.trace.stop {
            return Some(r);
        }
        let s = &self.stopping;
        let reason = if let (Some(b), Some(best)) = (s.target, &self.best) {
            (b > 0.0 && best.y / b >= s.gain_ratio).then_some(StopReason::GainRatio)
        } else {
            None
        }
        .or_else(|| {
            s.budget
                .filter(|&m| self.trace.probes.len() >= m)
                .map(|_| StopReason::Budget)
        })
        .or_else(|| (self.no_improve >= s.patience).then_some(StopReason::NoImprovement));
        self.trace.stop = reason;
        reason
    }

    /// Marks the run as finished for `reason`.
    pub fn finish(&mut self, reason: StopReason) {
        self.trace.stop.get_or_insert(reason);
    }

    /// Issues `p` as the pending ask (projected into the box); returns it.
    pub fn issue(&mut self, mut p: Point) -> Point {
        self.space.project(&mut p);
        self.pending = Some(p.clone());
        p
    }

    /// Accepts a measurement for the pending point; returns the probe.
    pub fn accept(&mut self, p: &Point, y: f64) -> Result<Probe, TuneError> {
        if self.pending.as_ref() != Some(p) {
            return Err(TuneError::UnexpectedTell {
                expected: self.pending.clone(),
                got: p.clone(),
            });
        }
        if !y.is_finite() {
            return Err(TuneError::NonFinite {
                what: format!("{:?}", self.space.to_real(p)),
                value: y,
            });
        }
        self.pending = None;
        let probe = Probe {
            point: p.clone(),
            real: self.space.to_real(p),
            y,
        };
        if !self.best.as_ref().is_some_and(|b| y <= b.y) {
            self.best = Some(probe.clone());
            self.no_improve = 0;
        } else {
            self.no_improve += 1;
        }
        self.trace.probes.push(probe.clone());
        Ok(probe)
    }

    /// True while an ask is waiting for its tell.
    pub fn has_pending(&self) -> bool {
        self.pending.is_some()
    }

    /// The pending point, if any (asking twice returns the same point).
    pub fn pending(&self) -> Option<&Point> {
        self.pending.as_ref()
    }

    /// Best probe so far.
    pub fn best(&self) -> Option<&Probe> {
        self.best.as_ref()
    }

    /// Probes told.
    pub fn probes(&self) -> usize {
        self.trace.probes.len()
    }

    /// The trace.
    pub fn trace(&self) -> &Trace {
        &self.trace
    }
}
