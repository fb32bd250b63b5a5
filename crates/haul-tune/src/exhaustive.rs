//! Exhaustive grid search: the TPG baseline of §4.1 of 000 (Δt·N_l·N_f runs). Scans an evenly
//! spaced grid in iterate space; only the ℳ budget can cut it short.

use crate::stopping::Tracker;
use crate::{Optimizer, Point, Space, StopReason, Stopping, TuneError};

/// Exhaustive search over `counts[i]` evenly spaced points per axis.
#[derive(Debug, Clone)]
pub struct Exhaustive {
    t: Tracker,
    counts: Vec<usize>,
    next: usize,
    total: usize,
}

impl Exhaustive {
    /// A scan of `counts[i]` points on axis i (e.g. [25, 513] for the full ANL table). `budget` is ℳ.
    pub fn new(
        space: Space,
        counts: Vec<usize>,
        budget: Option<usize>,
    ) -> Result<Exhaustive, TuneError> {
        if counts.len() != space.dim() || counts.contains(&0) {
            return Err(TuneError::BadParameter {
                name: "counts",
                reason: format!(
                    "need one positive count per axis ({} axes), got {counts:?}",
                    space.dim()
                ),
            });
        }
        let total = counts
            .iter()
            .try_fold(1usize, |a, &c| a.checked_mul(c))
            .ok_or(TuneError::BadParameter {
                name: "counts",
                reason: format!("grid {counts:?} is too large"),
            })?;
        let stopping = Stopping {
            target: None,
            gain_ratio: f64::INFINITY,
            patience: usize::MAX,
            budget,
        };
        Ok(Exhaustive {
            t: Tracker::new("exhaustive", space, stopping),
            counts,
            next: 0,
            total,
        })
    }

    fn grid_point(&self, mut idx: usize) -> Point {
        self.counts
            .iter()
            .map(|&c| {
                let i = idx % c;
                idx /= c;
                if c == 1 {
                    (crate::space::ITER_MIN + crate::space::ITER_MAX) / 2.0
                } else {
                    crate::space::ITER_MIN
                        + (crate::space::ITER_MAX - crate::space::ITER_MIN) * i as f64
                            / (c - 1) as f64
                }
            })
            .collect()
    }
}

impl Optimizer for Exhaustive {
    fn ask(&mut self) -> Option<Point> {
        if let Some(p) = self.t.pending() {
            return Some(p.clone());
        }
        if self.t.check().is_some() {
            return None;
        }
        if self.next >= self.total {
            self.t.finish(StopReason::Exhausted);
            return None;
        }
        let p = self.grid_point(self.next);
        self.next += 1;
        Some(self.t.issue(p))
    }

    fn tell(&mut self, p: &Point, y: f64) -> Result<(), TuneError> {
        self.t.accept(p, y).map(|_| ())
    }

    fn tracker(&self) -> &Tracker {
        &self.t
    }
}
