//! Kiefer–Wolfowitz stochastic approximation (Eqs. 4.1, 4.4 of 000): two-sided finite
//! differences on every coordinate, 2·d probes per iteration. Baseline for FastProf; it uses the
//! same gain sequences and box handling so only the gradient estimator differs.

use rand::rngs::StdRng;
use rand::SeedableRng;

use crate::space::feasible_step;
use crate::spsa::{Gains, Start};
use crate::stopping::Tracker;
use crate::{Optimizer, Point, Space, Stopping, TuneError};

/// Kiefer–Wolfowitz optimizer.
#[derive(Debug, Clone)]
pub struct KieferWolfowitz {
    gains: Gains,
    t: Tracker,
    theta: Point,
    k: usize,
    coord: usize,
    plus: bool,
    y_plus: f64,
    steps: (f64, f64),
    grad: Vec<f64>,
    unit: f64,
}

impl KieferWolfowitz {
    /// A KW run over `space` from `start`, seeded with `seed` (used by a random start only).
    pub fn new(
        space: Space,
        gains: Gains,
        start: Start,
        stopping: Stopping,
        seed: u64,
    ) -> KieferWolfowitz {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut theta = match start {
            Start::Random => space.random_point(&mut rng),
            Start::At(p) => p,
        };
        space.project(&mut theta);
        let unit = stopping
            .target
            .map(|b| b / 10.0)
            .filter(|u| u.is_finite() && *u > 0.0)
            .unwrap_or(1.0);
        let grad = vec![0.0; space.dim()];
        let t = Tracker::new("kiefer-wolfowitz", space, stopping);
        KieferWolfowitz {
            gains,
            t,
            theta,
            k: 0,
            coord: 0,
            plus: true,
            y_plus: 0.0,
            steps: (0.0, 0.0),
            grad,
            unit,
        }
    }

    fn unit_vec(&self, sign: f64) -> Vec<f64> {
        (0..self.theta.len())
            .map(|i| if i == self.coord { sign } else { 0.0 })
            .collect()
    }
}

impl Optimizer for KieferWolfowitz {
    fn ask(&mut self) -> Option<Point> {
        if let Some(p) = self.t.pending() {
            return Some(p.clone());
        }
        if self.t.check().is_some() {
            return None;
        }
        let c_k = self.gains.c_k(self.k);
        if self.plus {
            let e = self.unit_vec(1.0);
            let c_plus = feasible_step(&self.theta, &e, c_k);
            let c_minus = feasible_step(&self.theta, &self.unit_vec(-1.0), c_k);
            self.steps = (c_plus, c_minus);
        }
        let mut p = self.theta.clone();
        if self.plus {
            p[self.coord] += self.steps.0;
        } else {
            p[self.coord] -= self.steps.1;
        }
        Some(self.t.issue(p))
    }

    fn tell(&mut self, p: &Point, y: f64) -> Result<(), TuneError> {
        self.t.accept(p, y)?;
        if self.plus {
            self.y_plus = y;
            self.plus = false;
            return Ok(());
        }
        // Eq. 4.4 of 000: (y(θ + c e_i) − y(θ − c e_i)) / 2c, with per-side shrink at the box edge.
        let span = self.steps.0 + self.steps.1;
        self.grad[self.coord] = if span > 0.0 {
            (self.y_plus - y) / self.unit / span
        } else {
            0.0
        };
        self.plus = true;
        self.coord += 1;
        if self.coord == self.theta.len() {
            let a_k = self.gains.a_k(self.k);
            for (x, g) in self.theta.iter_mut().zip(&self.grad) {
                *x += a_k * g;
            }
            self.t.space().project(&mut self.theta);
            self.coord = 0;
            self.k += 1;
        }
        Ok(())
    }

    fn tracker(&self) -> &Tracker {
        &self.t
    }
}
