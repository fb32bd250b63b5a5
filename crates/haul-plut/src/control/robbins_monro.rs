//! PLUT source-rate control by Robbins–Monro stochastic approximation (004 §IV-B).
//!
//! Each control step k the sender has r̂_S(k), x̂(k) and the receiver's ĝ_R(k). Eq. 2 combines
//! them into the estimate ĝ*(k) of the attainable goodput and Eq. 3 moves the rate by
//! ρ_k[ĝ_R(k) − ĝ*(k)] with ρ_k = b/k^γ. In steady state ĝ_R = r̂_S(1 − x̂) holds at every rate,
//! so Eq. 3 alone has no restoring force towards the bottleneck; haul adds to the same RM error
//! term the path's *excess* loss — the goodput shortfall against the rate offered in the
//! goodput window (or, when that is unknown, the reported first-transmission loss), less the
//! rate-independent loss measured while probing — minus a small target. It is a monotone regression in the rate
//! (assumption A.1 of 004) whose root is just above the bottleneck. The rate starts with a
//! multiplicative probe that ends when excess loss first appears. Steps
//! are relative to the current rate, so b is dimensionless; see `docs/plut.md`.

use super::Measurement;

/// Parameters of the Robbins–Monro controller.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RmParams {
    /// β of Eq. 2, the weight of the sender-side estimate r̂_S(1 − x̂); 0.5 gives the paper's
    /// geometric mean √(r̂_S ĝ_R).
    pub beta: f64,
    /// b of ρ_k = b/k^γ (relative step, dimensionless).
    pub b: f64,
    /// γ of ρ_k = b/k^γ, in (0.5, 1).
    pub gamma: f64,
    /// k stops growing here, so ρ_k keeps a floor and the rate can still track a changing path.
    pub k_max: u32,
    /// Excess first-transmission loss the controller aims for (fraction).
    pub loss_target: f64,
    /// Relative rate increase per step while probing for the bottleneck.
    pub probe_gain: f64,
    /// Weight of the newest loss sample in the loss EWMA.
    pub loss_smoothing: f64,
    /// A probe sample losing more than this is congestion, never path loss: probing ends.
    pub max_base_loss: f64,
}

impl Default for RmParams {
    fn default() -> Self {
        RmParams { beta: 0.5, b: 0.1, gamma: 0.6, k_max: 256, loss_target: 0.015, probe_gain: 0.25, loss_smoothing: 0.5, max_base_loss: 0.1 }
    }
}

/// Eq. 2 of 004: ĝ*(k) = [r̂_S(k)(1 − x̂(k))]^β · ĝ_R(k)^(1−β).
pub fn attainable_goodput(send_rate: f64, retransmit_fraction: f64, goodput: f64, beta: f64) -> f64 {
    let sender = (send_rate * (1.0 - retransmit_fraction.clamp(0.0, 1.0))).max(0.0);
    sender.powf(beta) * goodput.max(0.0).powf(1.0 - beta)
}

/// ρ_k = b/k^γ (Eq. 3 of 004), with k counted from 1.
pub fn gain(b: f64, gamma: f64, k: u32) -> f64 {
    b / f64::from(k.max(1)).powf(gamma)
}

/// Where the controller is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RmPhase {
    /// Multiplicative probing until excess loss appears or the NIC rate is reached.
    Probe,
    /// Robbins–Monro stabilisation (Eq. 3) with decreasing steps.
    Stabilize,
}

/// The Robbins–Monro source-rate controller.
#[derive(Debug, Clone)]
pub struct RobbinsMonro {
    params: RmParams,
    rate: f64,
    min_rate: f64,
    max_rate: f64,
    k: u32,
    phase: RmPhase,
    loss_avg: Option<f64>,
    /// Rate-independent path loss: (sum, samples) while probing.
    base: (f64, u32),
}

impl RobbinsMonro {
    /// Starts probing at `initial` bytes/s, capped at `max` bytes/s (the NIC rate B).
    pub fn new(params: RmParams, initial: f64, max: f64) -> RobbinsMonro {
        let max_rate = max.max(1.0);
        let min_rate = (max_rate / 1e4).max(1.0);
        RobbinsMonro {
            params,
            rate: initial.clamp(min_rate, max_rate),
            min_rate,
            max_rate,
            k: 0,
            phase: RmPhase::Probe,
            loss_avg: None,
            base: (0.0, 0),
        }
    }

    /// The current target rate, bytes/s.
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// The current phase.
    pub fn phase(&self) -> RmPhase {
        self.phase
    }

    /// The estimate of the path's rate-independent loss fraction.
    pub fn base_loss(&self) -> f64 {
        if self.base.1 == 0 {
            0.0
        } else {
            self.base.0 / f64::from(self.base.1)
        }
    }

    /// Feeds one control step and returns the next target rate.
    pub fn update(&mut self, m: &Measurement) -> f64 {
        let p = self.params;
        let theta = m.loss_fraction();
        // What the path failed to deliver: reported losses, or the goodput shortfall against
        // the rate offered during the goodput window (a bottleneck caps goodput before its
        // queue overflows and anything is lost).
        let signal = if m.offered_rate > 0.0 { 1.0 - m.goodput / m.offered_rate } else { theta };
        let loss = match self.loss_avg {
            Some(avg) => avg + p.loss_smoothing * (signal - avg),
            None => signal,
        };
        self.loss_avg = Some(loss);
        let excess = loss - self.base_loss() - p.loss_target;
        match self.phase {
            RmPhase::Probe => {
                if theta > p.max_base_loss || (self.base.1 >= 2 && excess > 0.0) {
                    self.phase = RmPhase::Stabilize;
                } else {
                    self.base = (self.base.0 + theta, self.base.1 + 1);
                    self.rate = (self.rate * (1.0 + p.probe_gain)).min(self.max_rate);
                    return self.rate;
                }
            }
            RmPhase::Stabilize => {}
        }
        self.k = (self.k + 1).min(p.k_max.max(1));
        let scale = m.send_rate.max(self.min_rate);
        // Eq. 2 and the Eq. 3 error term ĝ_R(k) − ĝ*(k), relative to the measured rate.
        let target = attainable_goodput(m.send_rate, m.retransmit_fraction, m.goodput, p.beta);
        let paper = (m.goodput - target) / scale;
        // haul's setpoint: excess loss relative to the target, saturating at ±1.
        let setpoint = excess / p.loss_target.max(1e-6);
        let error = (paper + setpoint).clamp(-1.0, 1.0);
        // Eq. 3: r̂_S(k+1) = r̂_S(k) − ρ_k·error, with ρ_k = b/k^γ relative to the rate.
        let rho = gain(p.b, p.gamma, self.k);
        self.rate = (self.rate * (1.0 - rho * error)).clamp(self.min_rate, self.max_rate);
        self.rate
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic path: bottleneck `cap` bytes/s, rate-independent loss `p`, loss above
    /// the bottleneck as a drop-tail queue would give it, retransmissions equal to losses.
    fn path(rate: f64, cap: f64, p: f64) -> Measurement {
        let delivered = rate.min(cap) * (1.0 - p);
        let loss = 1.0 - delivered / rate;
        let n = 10_000u64;
        let lost = (loss * n as f64).round() as u64;
        Measurement {
            send_rate: rate,
            offered_rate: rate,
            goodput: delivered,
            retransmit_fraction: loss,
            lost,
            received: n - lost,
            occupancy: 0.0,
        }
    }

    #[test]
    fn eq2_is_geometric_mean_at_half_beta() {
        let g = attainable_goodput(100.0, 0.0, 25.0, 0.5);
        assert!((g - 50.0).abs() < 1e-9);
        assert!((attainable_goodput(100.0, 0.2, 25.0, 1.0) - 80.0).abs() < 1e-9);
        assert!((attainable_goodput(100.0, 0.2, 25.0, 0.0) - 25.0).abs() < 1e-9);
    }

    #[test]
    fn gains_satisfy_robbins_monro_conditions() {
        let p = RmParams::default();
        assert!(p.gamma > 0.5 && p.gamma < 1.0);
        assert!(gain(p.b, p.gamma, 1) > gain(p.b, p.gamma, 2));
        assert!((gain(0.2, 0.6, 32) - 0.2 / 8.0).abs() < 1e-12);
    }

    #[test]
    fn converges_to_the_bottleneck_from_below_and_above() {
        for (start, p) in [(1e6, 0.0), (1e6, 0.05), (120e6, 0.0), (60e6, 0.01)] {
            let cap = 80e6;
            let mut c = RobbinsMonro::new(RmParams::default(), start, 125e6);
            let mut rate = c.rate();
            for _ in 0..300 {
                rate = c.update(&path(rate, cap, p));
            }
            assert_eq!(c.phase(), RmPhase::Stabilize);
            assert!((rate / cap - 1.0).abs() < 0.03, "start {start} loss {p}: rate {rate}");
            assert!((c.base_loss() - p).abs() < 1e-3, "base loss {}", c.base_loss());
        }
    }

    #[test]
    fn stays_at_the_nic_rate_when_the_path_is_faster() {
        let mut c = RobbinsMonro::new(RmParams::default(), 1e6, 125e6);
        let mut rate = c.rate();
        for _ in 0..100 {
            rate = c.update(&path(rate, 1e9, 0.0));
        }
        assert_eq!(rate, 125e6);
    }
}
