//! Random-walk search (Lawler & Limic, ref. 61 of 000): a lattice walk from a random start that
//! moves one step of `step` iterate units along a random non-zero {−1, 0, 1}^d direction every
//! probe, keeping the best point seen. Baseline for FastProf under the same stopping rules.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::spsa::Start;
use crate::stopping::Tracker;
use crate::{Optimizer, Point, Space, Stopping, TuneError};

/// Default step in iterate units (1/12 of the [1, 25] range).
pub const DEFAULT_STEP: f64 = 2.0;

/// Random-walk optimizer.
#[derive(Debug, Clone)]
pub struct RandomWalk {
    t: Tracker,
    rng: StdRng,
    at: Point,
    step: f64,
    started: bool,
}

impl RandomWalk {
    /// A walk over `space` with `step` iterate units per move.
    pub fn new(space: Space, start: Start, step: f64, stopping: Stopping, seed: u64) -> RandomWalk {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut at = match start {
            Start::Random => space.random_point(&mut rng),
            Start::At(p) => p,
        };
        space.project(&mut at);
        let t = Tracker::new("random-walk", space, stopping);
        RandomWalk {
            t,
            rng,
            at,
            step,
            started: false,
        }
    }
}

impl Optimizer for RandomWalk {
    fn ask(&mut self) -> Option<Point> {
        if let Some(p) = self.t.pending() {
            return Some(p.clone());
        }
        if self.t.check().is_some() {
            return None;
        }
        if self.started {
            let dim = self.at.len();
            let dir: Vec<f64> = loop {
                let d: Vec<f64> = (0..dim)
                    .map(|_| f64::from(self.rng.gen_range(-1i8..=1)))
                    .collect();
                if d.iter().any(|&x| x != 0.0) || dim == 0 {
                    break d;
                }
            };
            for (x, d) in self.at.iter_mut().zip(dir) {
                *x += d * self.step;
            }
            self.t.space().project(&mut self.at);
        }
        self.started = true;
        Some(self.t.issue(self.at.clone()))
    }

    fn tell(&mut self, p: &Point, y: f64) -> Result<(), TuneError> {
        self.t.accept(p, y).map(|_| ())
    }

    fn tracker(&self) -> &Tracker {
        &self.t
    }
}
