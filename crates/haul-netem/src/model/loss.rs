//! Loss models: Bernoulli, Gilbert–Elliott (two-state Markov, bursty) and periodic.

use rand::Rng;

use crate::params::LossModel;

/// The evolving state of a loss model.
#[derive(Clone, Debug)]
pub struct LossState {
    model: LossModel,
    bad: bool,
    count: u64,
}

impl LossState {
    /// A fresh state (Gilbert–Elliott starts in the good state).
    pub fn new(model: LossModel) -> Self {
        LossState {
            model,
            bad: false,
            count: 0,
        }
    }

    /// The model this state follows.
    pub fn model(&self) -> LossModel {
        self.model
    }

    /// Decides whether the next packet is lost.
    pub fn lose<R: Rng>(&mut self, rng: &mut R) -> bool {
        match self.model {
            LossModel::None => false,
            LossModel::Bernoulli { p } => p > 0.0 && rng.gen::<f64>() < p,
            LossModel::GilbertElliott { p, r, h, k } => {
                // Transition first, then lose with 1-k (good) or 1-h (bad).
                let u: f64 = rng.gen();
                self.bad = if self.bad { u >= r } else { u < p };
                let deliver = if self.bad { h } else { k };
                rng.gen::<f64>() >= deliver
            }
            LossModel::Periodic { n } => {
                self.count += 1;
                if self.count >= n {
                    self.count = 0;
                    true
                } else {
                    false
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{rngs::StdRng, SeedableRng};

    fn run(model: LossModel, n: usize) -> Vec<bool> {
        let mut rng = StdRng::seed_from_u64(7);
        let mut s = LossState::new(model);
        (0..n).map(|_| s.lose(&mut rng)).collect()
    }

    #[test]
    fn bernoulli_rate() {
        let lost = run(LossModel::Bernoulli { p: 0.01 }, 1_000_000)
            .iter()
            .filter(|&&l| l)
            .count();
        // mean 10000, sd ~99.5: 4 sd.
        assert!((9600..=10400).contains(&lost), "{lost}");
    }

    #[test]
    fn periodic_every_nth() {
        let v = run(LossModel::Periodic { n: 4 }, 12);
        let idx: Vec<usize> = v
            .iter()
            .enumerate()
            .filter(|(_, &l)| l)
            .map(|(i, _)| i)
            .collect();
        assert_eq!(idx, vec![3, 7, 11]);
    }

    #[test]
    fn gilbert_elliott_is_bursty_with_stationary_rate() {
        // p=1%, r=10%, h=0, k=1: stationary bad fraction p/(p+r) = 1/11, mean burst 1/r = 10.
        let v = run(
            LossModel::GilbertElliott {
                p: 0.01,
                r: 0.1,
                h: 0.0,
                k: 1.0,
            },
            2_000_000,
        );
        let lost = v.iter().filter(|&&l| l).count() as f64 / v.len() as f64;
        assert!((lost - 1.0 / 11.0).abs() < 0.005, "{lost}");
        let bursts = v.windows(2).filter(|w| w[1] && !w[0]).count() as f64;
        let mean_burst = v.iter().filter(|&&l| l).count() as f64 / bursts;
        assert!((mean_burst - 10.0).abs() < 1.0, "{mean_burst}");
    }
}
