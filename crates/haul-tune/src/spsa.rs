//! FastProf: simultaneous-perturbation stochastic approximation over the parameter box
//! (§4.4 of 000, Eqs. 4.6, 4.7). Two measurements per iteration whatever the dimension.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::space::feasible_step;
use crate::stopping::Tracker;
use crate::{Optimizer, Point, Space, Stopping, TuneError};

/// Gain sequences a_k = a/(A+k+1)^α and c_k = c/(k+1)^γ (§4.4.1 step 3 of 000).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Gains {
    /// a: step gain (25 in the emulation trace, 30 in the real runs).
    pub a: f64,
    /// c: perturbation size in iterate units (9.5).
    pub c: f64,
    /// Stability constant A (0.0).
    pub big_a: f64,
    /// α (0.602).
    pub alpha: f64,
    /// γ (0.101).
    pub gamma: f64,
}

impl Default for Gains {
    fn default() -> Self {
        Gains {
            a: 25.0,
            c: 9.5,
            big_a: 0.0,
            alpha: 0.602,
            gamma: 0.101,
        }
    }
}

impl Gains {
    /// a_k.
    pub fn a_k(&self, k: usize) -> f64 {
        self.a / (self.big_a + k as f64 + 1.0).powf(self.alpha)
    }

    /// c_k.
    pub fn c_k(&self, k: usize) -> f64 {
        self.c / (k as f64 + 1.0).powf(self.gamma)
    }
}

/// Where the search starts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Start {
    /// Uniform random point in the box (beats a fixed start, §4.5.3 of 000).
    Random,
    /// A given iterate, e.g. the history store's best setting mapped by [`Space::to_iterate`].
    At(Point),
}

/// FastProf configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpsaConfig {
    /// Gain sequences.
    pub gains: Gains,
    /// Start point.
    pub start: Start,
    /// Stopping rules.
    pub stopping: Stopping,
    /// Throughput that counts as 1.0 in the gradient. The thesis measured y in Gb/s on a
    /// 10 Gb/s link with a = 25, c = 9.5; the default B/10 keeps those gains valid for any
    /// unit and link rate (1.0 without a target).
    pub gain_unit: Option<f64>,
    /// The author's code variant: also measure the updated iterate (3 probes per iteration)
    /// and restart every iteration from the best point seen.
    pub restart_from_best: bool,
}

impl SpsaConfig {
    /// Defaults of §4.4 of 000 with the given stopping rules.
    pub fn new(stopping: Stopping) -> SpsaConfig {
        SpsaConfig {
            gains: Gains::default(),
            start: Start::Random,
            stopping,
            gain_unit: None,
            restart_from_best: true,
        }
    }
}

#[derive(Debug, Clone)]
enum Phase {
    Plus,
    Minus { y_plus: f64 },
    Update,
}

/// The FastProf optimizer.
#[derive(Debug, Clone)]
pub struct Spsa {
    cfg: SpsaConfig,
    t: Tracker,
    rng: StdRng,
    theta: Point,
    k: usize,
    delta: Vec<f64>,
    c_plus: f64,
    c_minus: f64,
    phase: Phase,
    unit: f64,
}

impl Spsa {
    /// A FastProf run over `space` seeded with `seed`.
    pub fn new(space: Space, cfg: SpsaConfig, seed: u64) -> Spsa {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut theta = match &cfg.start {
            Start::Random => space.random_point(&mut rng),
            Start::At(p) => p.clone(),
        };
        space.project(&mut theta);
        let unit = cfg
            .gain_unit
            .or(cfg.stopping.target.map(|b| b / 10.0))
            .filter(|u| u.is_finite() && *u > 0.0)
            .unwrap_or(1.0);
        let t = Tracker::new("fastprof", space, cfg.stopping.clone());
        Spsa {
            cfg,
            t,
            rng,
            theta,
            k: 0,
            delta: Vec::new(),
            c_plus: 0.0,
            c_minus: 0.0,
            phase: Phase::Plus,
            unit,
        }
    }

    /// The current iterate θ̂_k.
    pub fn theta(&self) -> &Point {
        &self.theta
    }

    /// Iterations completed.
    pub fn iterations(&self) -> usize {
        self.k
    }

    fn offset(&self, sign: f64, c: f64) -> Point {
        self.theta
            .iter()
            .zip(&self.delta)
            .map(|(x, d)| x + sign * c * d)
            .collect()
    }

    // Eq. 4.7 of 000 with the per-side step shrink: ĝ_i = (y+ − y−)/((c+ + c−)·Δ_i).
    fn update(&mut self, y_plus: f64, y_minus: f64) {
        let span = self.c_plus + self.c_minus;
        if span > 0.0 {
            let a_k = self.cfg.gains.a_k(self.k);
            let diff = (y_plus - y_minus) / self.unit;
            for (x, d) in self.theta.iter_mut().zip(&self.delta) {
                *x += a_k * diff / (span * d);
            }
        }
        self.t.space().project(&mut self.theta);
        self.k += 1;
    }
}

impl Optimizer for Spsa {
    fn ask(&mut self) -> Option<Point> {
        if let Some(p) = self.t.pending() {
            return Some(p.clone());
        }
        if self.t.check().is_some() {
            return None;
        }
        let p = match self.phase {
            Phase::Plus => {
                let c_k = self.cfg.gains.c_k(self.k);
                let dim = self.t.space().dim();
                // Bernoulli ±1 perturbation, p = 0.5 (Eq. 4.6 of 000).
                self.delta = (0..dim)
                    .map(|_| if self.rng.gen_bool(0.5) { 1.0 } else { -1.0 })
                    .collect();
                let minus: Vec<f64> = self.delta.iter().map(|d| -d).collect();
                self.c_plus = feasible_step(&self.theta, &self.delta, c_k);
                self.c_minus = feasible_step(&self.theta, &minus, c_k);
                self.offset(1.0, self.c_plus)
            }
            Phase::Minus { .. } => self.offset(-1.0, self.c_minus),
            Phase::Update => self.theta.clone(),
        };
        Some(self.t.issue(p))
    }

    fn tell(&mut self, p: &Point, y: f64) -> Result<(), TuneError> {
        self.t.accept(p, y)?;
        self.phase = match self.phase {
            Phase::Plus => Phase::Minus { y_plus: y },
            Phase::Minus { y_plus } => {
                self.update(y_plus, y);
                if self.cfg.restart_from_best {
                    Phase::Update
                } else {
                    Phase::Plus
                }
            }
            Phase::Update => {
                if let Some(b) = self.t.best() {
                    self.theta = b.point.clone();
                }
                Phase::Plus
            }
        };
        Ok(())
    }

    fn tracker(&self) -> &Tracker {
        &self.t
    }
}
