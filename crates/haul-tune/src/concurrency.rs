//! Live concurrency search (Alg. 3 of 003): double cc while the utility γ of Eq. 3.1 says the
//! larger value pays, then hill-climb in steps of ±2, then hold. Beyond the thesis it keeps
//! watching throughput after convergence and re-tunes when it moves by more than a threshold
//! (as Falcon does), and offers a utility that charges for every extra channel.
//!
//! It is a pure state machine: [`ConcurrencySearch::next`] takes the throughput measured for the
//! last decision and returns the next one. The caller switches the live transfer's channel count
//! and measures (a 15 s window in the thesis, or until an early-stopping estimator converges).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::TuneError;

/// How two concurrency levels are compared.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum Utility {
    /// Eq. 3.1 of 003: γ = ((thr₂ − thr₁)/thr₁) / ((cc₂/cc₁)·tolerance); the larger cc wins iff γ ≥ 1.
    Gamma {
        /// Expected minimum gain per doubling-ratio unit (0.10 in the thesis).
        tolerance: f64,
    },
    /// Channel-cost utility U(cc) = thr(cc)/k^cc (Falcon's form; k = 1.02 charges ~2% per channel).
    ChannelCost {
        /// Per-channel cost factor k > 1.
        k: f64,
    },
}

impl Default for Utility {
    fn default() -> Self {
        Utility::Gamma { tolerance: 0.10 }
    }
}

/// Eq. 3.1 of 003 for cc₂ > cc₁.
pub fn gamma(cc1: u32, thr1: f64, cc2: u32, thr2: f64, tolerance: f64) -> f64 {
    let gain = (thr2 - thr1) / thr1;
    let expected = f64::from(cc2) / f64::from(cc1) * tolerance;
    gain / expected
}

impl Utility {
    /// True when the parameter is usable: a finite tolerance > 0, a finite k ≥ 1.
    pub fn is_valid(&self) -> bool {
        match *self {
            Utility::Gamma { tolerance } => tolerance.is_finite() && tolerance > 0.0,
            Utility::ChannelCost { k } => k.is_finite() && k >= 1.0,
        }
    }

    /// True when level `a` (throughput `ta`) is preferred over `b` (throughput `tb`).
    pub fn better(&self, a: u32, ta: f64, b: u32, tb: f64) -> bool {
        if a == b {
            return false;
        }
        match *self {
            Utility::Gamma { tolerance } => {
                let (lo, tlo, hi, thi) = if a < b {
                    (a, ta, b, tb)
                } else {
                    (b, tb, a, ta)
                };
                let hi_wins = if tlo > 0.0 {
                    gamma(lo, tlo, hi, thi, tolerance) >= 1.0
                } else {
                    thi > tlo
                };
                hi_wins == (a == hi)
            }
            Utility::ChannelCost { k } => {
                let ua = ta / k.powf(f64::from(a));
                let ub = tb / k.powf(f64::from(b));
                ua > ub || (ua == ub && a < b)
            }
        }
    }
}

/// Re-tuning after convergence (beyond the thesis).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Retune {
    /// Relative change from the converged throughput that counts as a move (default 0.20). A
    /// rise must exceed both the rebased reference and the search's own sample of the level by
    /// as much; a drop is measured from the higher of the two (see
    /// [`ConcurrencySearch::rebase`]).
    pub threshold: f64,
    /// Consecutive moved readings needed before re-tuning (default 2, to ignore one-off dips).
    pub consecutive: usize,
}

impl Default for Retune {
    fn default() -> Self {
        Retune {
            threshold: 0.20,
            consecutive: 2,
        }
    }
}

/// Search configuration.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ConcurrencyConfig {
    /// First level measured: 1, or the history store's best setting.
    pub start: u32,
    /// Upper limit (UPPERLIMIT = 32 in the thesis).
    pub cap: u32,
    /// Lowest level the search measures (1 in the thesis). Seeking does not step below it, and
    /// a re-tune after a rise does not halve below it.
    #[serde(default = "one")]
    pub floor: u32,
    /// Comparison rule.
    pub utility: Utility,
    /// Re-tuning after convergence; `None` holds forever, as the thesis does.
    pub retune: Option<Retune>,
}

fn one() -> u32 {
    1
}

impl Default for ConcurrencyConfig {
    fn default() -> Self {
        ConcurrencyConfig {
            start: 1,
            cap: 32,
            floor: 1,
            utility: Utility::default(),
            retune: Some(Retune::default()),
        }
    }
}

/// Alg. 3 phases.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Phase {
    /// Doubling.
    FastIncrease,
    /// ±2 hill-climb.
    Seeking,
    /// Converged; holding (and watching, if re-tuning is on).
    Finished,
}

/// What the caller should do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Decision {
    /// Run with this many channels for one sample and report its throughput.
    Measure(u32),
    /// Search converged: run with this many channels and keep reporting readings.
    Run(u32),
}

impl Decision {
    /// The concurrency to use now.
    pub fn cc(&self) -> u32 {
        match *self {
            Decision::Measure(c) | Decision::Run(c) => c,
        }
    }
}

/// The Alg. 3 state machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConcurrencySearch {
    cfg: ConcurrencyConfig,
    phase: Phase,
    cc: u32,
    thr: BTreeMap<u32, f64>,
    last: Decision,
    reference: f64,
    drift: usize,
    retunes: usize,
    measured: usize,
}

impl ConcurrencySearch {
    /// A search; `cap` is clamped to ≥ 1, `floor` to [1, cap] and `start` to [floor, cap].
    pub fn new(mut cfg: ConcurrencyConfig) -> Result<ConcurrencySearch, TuneError> {
        if !cfg.utility.is_valid() {
            return Err(TuneError::BadParameter {
                name: "utility",
                reason: format!("{:?} out of range", cfg.utility),
            });
        }
        cfg.cap = cfg.cap.max(1);
        cfg.floor = cfg.floor.clamp(1, cfg.cap);
        cfg.start = cfg.start.clamp(cfg.floor, cfg.cap);
        let cc = cfg.start;
        Ok(ConcurrencySearch {
            cfg,
            phase: Phase::FastIncrease,
            cc,
            thr: BTreeMap::new(),
            last: Decision::Measure(cc),
            reference: 0.0,
            drift: 0,
            retunes: 0,
            measured: 0,
        })
    }

    /// The first decision (measure the start level).
    pub fn start(&self) -> Decision {
        Decision::Measure(self.cfg.start)
    }

    /// Current phase.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// Current concurrency.
    pub fn current(&self) -> u32 {
        self.cc
    }

    /// Sets the throughput re-tuning compares against, once converged: a driver that measures
    /// the settled transfer more steadily than the search sample did (which may have caught
    /// new connections' slow-start burst) re-bases on that. Ignored before convergence and for
    /// non-finite or non-positive values. A rise must beat both the rebased value and the
    /// search's own sample of the level; a drop is judged against the higher of the two, so a
    /// level that settles well below its sample is searched again.
    pub fn rebase(&mut self, throughput: f64) {
        if self.phase == Phase::Finished && throughput.is_finite() && throughput > 0.0 {
            self.reference = throughput;
            self.drift = 0;
        }
    }

    /// How many times the search restarted after convergence.
    pub fn retunes(&self) -> usize {
        self.retunes
    }

    /// Search samples taken (Measure decisions answered), across re-tunes.
    pub fn samples(&self) -> usize {
        self.measured
    }

    /// Memoised throughput per level in the current search.
    pub fn measurements(&self) -> &BTreeMap<u32, f64> {
        &self.thr
    }

    /// Feeds the throughput measured for the last decision; returns the next decision.
    pub fn next(&mut self, throughput: f64) -> Result<Decision, TuneError> {
        if !throughput.is_finite() || throughput < 0.0 {
            return Err(TuneError::NonFinite {
                what: format!("throughput at cc {}", self.last.cc()),
                value: throughput,
            });
        }
        match self.last {
            Decision::Measure(c) => {
                self.measured += 1;
                self.thr.insert(c, throughput);
            }
            Decision::Run(_) => {
                if let Some(r) = self.cfg.retune {
                    // A rise is news only if the level now also beats what the search measured
                    // for it: a rise re-tune looks for fewer channels, and a level that merely
                    // recovers toward its own search sample has not made channels spare. On a
                    // lossy 40 ms path the samples caught new connections' slow-start bursts
                    // (5–10 s after convergence a level carried a median 40% of its sample), and
                    // windows climbing back from the decayed reference re-tuned from half the
                    // level again and again.
                    //
                    // A drop is judged against the higher of the two. A level that settles well
                    // below its own sample was measured in a burst: the sample that made the
                    // search stop there does not hold, so the search runs again from the level,
                    // which it now measures steady. On the same path a level settled at 8 from an
                    // 820 Mb/s sample faded to 340 Mb/s before the watch's first window, and the
                    // reference taken there saw no drop for 70 s
                    // (bench/results/retune-netem-20261123T000903Z).
                    let up = 1.0 + r.threshold;
                    let sampled = self.sampled();
                    let rise = throughput > self.reference * up && throughput > sampled * up;
                    let drop = throughput < self.reference.max(sampled) * (1.0 - r.threshold);
                    let moved = self.reference > 0.0 && (rise || drop);
                    self.drift = if moved { self.drift + 1 } else { 0 };
                    if self.drift >= r.consecutive.max(1) {
                        // Restart Alg. 3 with a fresh memo. After a drop (cross traffic, or a
                        // cluster of the dataset running out) more channels are the likely cure,
                        // so doubling starts from the current level, and Seeking still steps
                        // down if that is no better. After a rise, fewer channels may do: start
                        // from half the level so both directions are open.
                        self.retunes += 1;
                        self.drift = 0;
                        self.thr.clear();
                        self.phase = Phase::FastIncrease;
                        if rise && !drop {
                            self.cc = (self.cc / 2).max(self.cfg.floor);
                        }
                    }
                }
            }
        }
        self.last = self.plan();
        Ok(self.last)
    }

    /// The search's own sample of the current level (once converged, the memo still holds the
    /// sample it settled on: `reference` before any rebase); 0 if it has none.
    fn sampled(&self) -> f64 {
        self.thr.get(&self.cc).copied().unwrap_or(0.0)
    }

    fn better(&self, a: u32, b: u32) -> bool {
        match (self.thr.get(&a), self.thr.get(&b)) {
            (Some(&ta), Some(&tb)) => self.cfg.utility.better(a, ta, b, tb),
            _ => false,
        }
    }

    // Advances the phases as far as memoised measurements allow (Alg. 3 of 003).
    fn plan(&mut self) -> Decision {
        loop {
            let cc = self.cc;
            match self.phase {
                Phase::FastIncrease => {
                    if !self.thr.contains_key(&cc) {
                        return Decision::Measure(cc);
                    }
                    // Upper-limit edge case: doubling may land exactly on the cap, and a search
                    // that is still improving there enters SEEKING at the cap (the prose of
                    // §3.2 of 003) instead of halving back (the literal `cc*2 < UPPERLIMIT`).
                    if cc >= self.cfg.cap {
                        self.phase = Phase::Seeking;
                        continue;
                    }
                    let up = cc.saturating_mul(2).min(self.cfg.cap);
                    if !self.thr.contains_key(&up) {
                        return Decision::Measure(up);
                    }
                    if self.better(up, cc) {
                        self.cc = up;
                    } else {
                        self.phase = Phase::Seeking;
                    }
                }
                Phase::Seeking => {
                    let lo = cc.saturating_sub(2).max(self.cfg.floor);
                    let hi = cc.saturating_add(2).min(self.cfg.cap);
                    for n in [cc, lo, hi] {
                        if !self.thr.contains_key(&n) {
                            return Decision::Measure(n);
                        }
                    }
                    let down = lo != cc && self.better(lo, cc) && (hi == cc || self.better(lo, hi));
                    let upward =
                        hi != cc && self.better(hi, cc) && (lo == cc || self.better(hi, lo));
                    if down {
                        self.cc = lo;
                    } else if upward {
                        self.cc = hi;
                    } else {
                        self.phase = Phase::Finished;
                        self.reference = self.sampled();
                        self.drift = 0;
                    }
                }
                Phase::Finished => return Decision::Run(cc),
            }
        }
    }
}
