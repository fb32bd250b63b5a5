//! Tabu search (Glover, ref. 44 of 000): from the current point, measure every non-tabu
//! neighbour one `step` away along each axis (2·d neighbours), move to the best of them even if
//! it is worse, and keep the last `tenure` visited points tabu. Measured points are remembered,
//! so a neighbour seen before costs no probe. Baseline for FastProf under the same stopping rules.

use std::collections::{HashMap, VecDeque};

use rand::rngs::StdRng;
use rand::SeedableRng;

use crate::spsa::Start;
use crate::stopping::Tracker;
use crate::{Optimizer, Point, Space, Stopping, TuneError};

/// Default neighbourhood step in iterate units.
pub const DEFAULT_STEP: f64 = 2.0;
/// Default tabu tenure (visited points kept tabu).
pub const DEFAULT_TENURE: usize = 7;

/// Tabu-search optimizer.
#[derive(Debug, Clone)]
pub struct Tabu {
    t: Tracker,
    rng: StdRng,
    at: Point,
    step: f64,
    tenure: usize,
    tabu: VecDeque<Vec<i64>>,
    seen: HashMap<Vec<i64>, f64>,
    queue: Vec<Point>,
    hood: Vec<Point>,
}

impl Tabu {
    /// A Tabu search over `space`.
    pub fn new(
        space: Space,
        start: Start,
        step: f64,
        tenure: usize,
        stopping: Stopping,
        seed: u64,
    ) -> Tabu {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut at = match start {
            Start::Random => space.random_point(&mut rng),
            Start::At(p) => p,
        };
        space.project(&mut at);
        let t = Tracker::new("tabu", space, stopping);
        let queue = vec![at.clone()];
        Tabu {
            t,
            rng,
            at,
            step,
            tenure,
            tabu: VecDeque::new(),
            seen: HashMap::new(),
            queue,
            hood: Vec::new(),
        }
    }

    fn neighbours(&self) -> Vec<Point> {
        let sp = self.t.space();
        let here = sp.key(&self.at);
        let mut out: Vec<Point> = Vec::new();
        for i in 0..self.at.len() {
            for s in [1.0, -1.0] {
                let mut p = self.at.clone();
                p[i] += s * self.step;
                sp.project(&mut p);
                let k = sp.key(&p);
                if k != here && !self.tabu.contains(&k) && !out.iter().any(|q| sp.key(q) == k) {
                    out.push(p);
                }
            }
        }
        out
    }

    // Moves to the best measured neighbour (tabu aspiration is not needed: tabu points are never
    // in the neighbourhood); jumps to a random point when every neighbour is tabu.
    fn advance(&mut self) {
        let sp = self.t.space().clone();
        let best = self
            .hood
            .iter()
            .filter_map(|p| self.seen.get(&sp.key(p)).map(|&y| (p.clone(), y)))
            .max_by(|a, b| a.1.total_cmp(&b.1));
        self.tabu.push_back(sp.key(&self.at));
        while self.tabu.len() > self.tenure {
            self.tabu.pop_front();
        }
        self.at = match best {
            Some((p, _)) => p,
            None => sp.random_point(&mut self.rng),
        };
        self.hood = self.neighbours();
        if self.hood.is_empty() {
            self.hood = vec![sp.random_point(&mut self.rng)];
        }
        self.queue = self.hood.clone();
    }
}

impl Optimizer for Tabu {
    fn ask(&mut self) -> Option<Point> {
        if let Some(p) = self.t.pending() {
            return Some(p.clone());
        }
        // Each round advances at least one step; the bound only guards against a space whose
        // every point is already known (then every neighbourhood is free and the walk goes on).
        for _ in 0..10_000 {
            if self.t.check().is_some() {
                return None;
            }
            while let Some(p) = self.queue.pop() {
                if !self.seen.contains_key(&self.t.space().key(&p)) {
                    return Some(self.t.issue(p));
                }
            }
            self.advance();
        }
        None
    }

    fn tell(&mut self, p: &Point, y: f64) -> Result<(), TuneError> {
        let probe = self.t.accept(p, y)?;
        self.seen.insert(self.t.space().key(&probe.point), y);
        if self.hood.is_empty() {
            // The start point was measured; open its neighbourhood.
            self.hood = self.neighbours();
            self.queue = self.hood.clone();
        }
        Ok(())
    }

    fn tracker(&self) -> &Tracker {
        &self.t
    }
}
