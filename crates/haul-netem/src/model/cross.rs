//! Cross traffic: N Pareto on/off sources, each sending Poisson packets at a fixed rate while on
//! (the split-TCP thesis's emulation: shape 1.4, mean on/off 1.5 s, 5 Mb/s while on).

use rand::rngs::StdRng;
use rand::Rng;

use super::{ns, NS};
use crate::params::CrossTraffic;

#[derive(Clone, Debug)]
struct Source {
    on_until: u64,
    next: u64,
}

/// Generates the synthetic packet arrivals of all sources in time order.
#[derive(Clone, Debug)]
pub struct CrossGen {
    cfg: CrossTraffic,
    sources: Vec<Source>,
}

/// Pareto sample with the given shape and mean (scale = mean·(shape−1)/shape).
fn pareto(rng: &mut StdRng, shape: f64, mean: f64) -> f64 {
    let scale = mean * (shape - 1.0) / shape;
    let u: f64 = 1.0 - rng.gen::<f64>();
    scale / u.powf(1.0 / shape)
}

fn exp(rng: &mut StdRng, mean: f64) -> f64 {
    let u: f64 = 1.0 - rng.gen::<f64>();
    -mean * u.ln()
}

impl CrossGen {
    /// Starts all sources at `now`, each on or off with probability by the mean durations.
    pub fn new(cfg: CrossTraffic, now: u64, rng: &mut StdRng) -> Self {
        let mut g = CrossGen {
            cfg,
            sources: Vec::new(),
        };
        g.restart(now, rng);
        g
    }

    fn restart(&mut self, now: u64, rng: &mut StdRng) {
        let cfg = self.cfg;
        let p_on = cfg.mean_on / (cfg.mean_on + cfg.mean_off);
        self.sources = (0..cfg.sources)
            .map(|_| {
                let mut s = Source {
                    on_until: now,
                    next: now,
                };
                if rng.gen::<f64>() < p_on {
                    s.on_until = now + ns(pareto(rng, cfg.shape, cfg.mean_on));
                    s.next = now + ns(exp(rng, self.gap()));
                } else {
                    s.next = now + ns(pareto(rng, cfg.shape, cfg.mean_off));
                    s.on_until = s.next + ns(pareto(rng, cfg.shape, cfg.mean_on));
                }
                s
            })
            .collect();
    }

    /// Mean packet gap of one source while on, seconds.
    fn gap(&self) -> f64 {
        self.cfg.packet as f64 / self.cfg.rate
    }

    /// The configuration.
    pub fn config(&self) -> CrossTraffic {
        self.cfg
    }

    /// Pops the next synthetic packet `(time, bytes)` arriving at or before `until`.
    /// Far behind (`until` more than 2 s past the earliest pending packet) the sources are
    /// restarted 1 s before `until`: older cross packets can no longer affect the queue.
    pub fn next_before(&mut self, until: u64, rng: &mut StdRng) -> Option<(u64, u32)> {
        let (i, t) = self
            .sources
            .iter()
            .enumerate()
            .map(|(i, s)| (i, s.next))
            .min_by_key(|&(_, t)| t)?;
        if t > until {
            return None;
        }
        if until - t > 2 * NS as u64 {
            self.restart(until - NS as u64, rng);
            return self.next_before(until, rng);
        }
        let gap = self.gap();
        let (shape, mean_on, mean_off) = (self.cfg.shape, self.cfg.mean_on, self.cfg.mean_off);
        let s = &mut self.sources[i];
        let mut next = t + ns(exp(rng, gap));
        if next > s.on_until {
            // Off period, then a new on period.
            let start = s.on_until + ns(pareto(rng, shape, mean_off));
            s.on_until = start + ns(pareto(rng, shape, mean_on));
            next = start + ns(exp(rng, gap));
        }
        s.next = next;
        Some((t, self.cfg.packet))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn pareto_mean_is_close() {
        let mut rng = StdRng::seed_from_u64(1);
        // Shape 1.4 has infinite variance: use a large sample and a loose bound.
        let n = 400_000;
        let mean = (0..n).map(|_| pareto(&mut rng, 1.4, 1.5)).sum::<f64>() / n as f64;
        assert!((1.2..1.9).contains(&mean), "{mean}");
    }

    #[test]
    fn offered_load_is_half_peak_per_source() {
        let mut rng = StdRng::seed_from_u64(2);
        let cfg = CrossTraffic {
            sources: 20,
            ..Default::default()
        };
        let mut g = CrossGen::new(cfg, 0, &mut rng);
        let mut bytes = 0u64;
        let mut last = 0;
        for step in 1..=60_000u64 {
            while let Some((t, len)) = g.next_before(step * 10_000_000, &mut rng) {
                assert!(t >= last, "time order");
                last = t;
                bytes += len as u64;
            }
        }
        let rate = bytes as f64 / 600.0;
        let expect = 20.0 * cfg.rate * 0.5;
        assert!(
            (rate / expect - 1.0).abs() < 0.25,
            "rate {rate} expect {expect}"
        );
    }
}
