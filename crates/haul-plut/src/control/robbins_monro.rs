//! PLUT source-rate control by Robbins–Monro stochastic approximation (004 §IV-B).
//!
//! Each control step k the sender has r̂_S(k), x̂(k) and the receiver's ĝ_R(k). Eq. 2 combines
//! them into the estimate ĝ*(k) of the attainable goodput and Eq. 3 moves the rate by
//! ρ_k[ĝ_R(k) − ĝ*(k)] with ρ_k = b/k^γ. In steady state ĝ_R = r̂_S(1 − x̂) holds at every rate,
//! so Eq. 3 alone has no restoring force towards the bottleneck; haul adds to the same RM error
//! term the path's *excess* goodput shortfall — against the rate offered in the goodput window,
//! less the rate-independent (random) loss ℓ₀ — minus a small target. It is a monotone
//! regression in the rate (assumption A.1 of 004) whose root is just above the bottleneck.
//! Random loss keeps the shortfall flat as the rate grows; a bottleneck makes it jump as soon
//! as the rate passes it — that is how the two are told apart.
//!
//! haul's additions, all documented in `docs/plut.md`: a probe that doubles the rate per
//! verified measurement until goodput stops following it (measuring ℓ₀ on the way), one drain
//! step below the bottleneck estimate, Eq. 3 applied only to measurements of the current rate
//! (so the measurement lag cannot wind it up), a target that widens with measurement noise,
//! and ℓ₀ refined from samples clearly below the bottleneck. Steps are relative to the current
//! rate, so b is dimensionless.

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
    /// Excess goodput shortfall (beyond the path's base loss) the controller aims for (fraction).
    pub loss_target: f64,
    /// Relative rate increase per step while probing for the bottleneck (1.0 doubles).
    pub probe_gain: f64,
    /// Probing ends when one sample's goodput shortfall exceeds the base loss by this much:
    /// goodput stopped following the rate.
    pub probe_exit: f64,
    /// After probing the rate is held at this fraction of the bottleneck estimate for one step,
    /// to drain the queue the probe's overshoot built.
    pub drain: f64,
    /// Weight of the newest loss sample in the loss EWMA.
    pub loss_smoothing: f64,
    /// Samples the base-loss estimate averages over (a mean until then, an EWMA after).
    pub base_window: u32,
    /// In stabilisation, a sample offered more than this fraction below the bottleneck
    /// estimate refines the base loss.
    pub base_margin: f64,
    /// A stabilisation step uses a measurement only if the rate offered in its window is
    /// within this fraction of the current rate ...
    pub settle_tolerance: f64,
    /// ... or after this many measurements were passed over.
    pub max_stale: u32,
    /// Relative decay per step of the bottleneck estimate (the largest goodput seen).
    pub bottleneck_decay: f64,
    /// A probe sample losing more than this is congestion, never path loss: probing ends.
    pub max_base_loss: f64,
}

impl Default for RmParams {
    fn default() -> Self {
        RmParams {
            beta: 0.5,
            b: 0.1,
            gamma: 0.6,
            k_max: 256,
            loss_target: 0.005,
            probe_gain: 1.0,
            probe_exit: 0.05,
            drain: 0.75,
            loss_smoothing: 0.5,
            base_window: 64,
            base_margin: 0.1,
            settle_tolerance: 0.02,
            max_stale: 3,
            bottleneck_decay: 0.002,
            max_base_loss: 0.1,
        }
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
    /// Multiplicative probing until goodput stops following the rate or the NIC rate is reached.
    Probe,
    /// One step below the bottleneck estimate, draining the probe's queue.
    Drain,
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
    /// Sum of squares of the same samples (their spread sets the excess target).
    base_sq: f64,
    /// Largest goodput seen while probing: the bottleneck estimate when probing ends.
    max_goodput: f64,
    /// Bottleneck estimate, bytes/s (0 until probing ends).
    bottleneck: f64,
    /// Consecutive measurements ignored because they did not see the current rate.
    stale: u32,
    /// Measurements still to ignore because they reflect a rate set before a phase change.
    skip: u32,
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
            base_sq: 0.0,
            max_goodput: 0.0,
            bottleneck: 0.0,
            skip: 0,
            stale: 0,
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
            (self.base.0 / f64::from(self.base.1)).max(0.0)
        }
    }

    /// Folds one shortfall sample into the base-loss estimate: a mean over the first
    /// `base_window` samples, an exponential average with that window afterwards.
    fn add_base(&mut self, signal: f64) {
        let n = f64::from(self.base.1);
        let window = f64::from(self.params.base_window.max(1));
        let keep = if n >= window { (window - 1.0) / window } else { 1.0 };
        let count = if n >= window { self.base.1 } else { self.base.1 + 1 };
        let x = signal.clamp(-self.params.max_base_loss, self.params.max_base_loss);
        self.base = (self.base.0 * keep + x, count);
        self.base_sq = self.base_sq * keep + x * x;
    }

    /// The excess shortfall aimed for: `loss_target`, or the standard deviation of one
    /// base-loss sample if that is larger, so measurement noise cannot hide the setpoint.
    pub fn excess_target(&self) -> f64 {
        let n = f64::from(self.base.1);
        let sd = if self.base.1 < 2 {
            0.0
        } else {
            let mean = self.base.0 / n;
            ((self.base_sq / n - mean * mean).max(0.0) * n / (n - 1.0)).sqrt()
        };
        self.params.loss_target.max(sd)
    }

    /// Feeds one control step and returns the next target rate.
    pub fn update(&mut self, m: &Measurement) -> f64 {
        let p = self.params;
        let theta = m.loss_fraction();
        // What the path failed to deliver: the goodput shortfall against the rate offered
        // during the goodput window (a bottleneck caps goodput before its queue overflows and
        // anything is lost), or, when that is unknown, the reported losses.
        // Not clamped at 0: the noise of a sample must average out, not bias the estimates.
        let signal = if m.offered_rate > 0.0 { 1.0 - m.goodput / m.offered_rate } else { theta };
        match self.phase {
            RmPhase::Probe => {
                self.max_goodput = self.max_goodput.max(m.goodput);
                let saturated = self.base.1 >= 1 && signal - self.base_loss() > p.probe_exit;
                // The measurement lags the rate by about a step: grow again only once the
                // goodput window saw (most of) the current rate, so each doubling is checked.
                let caught_up = m.offered_rate <= 0.0 || m.offered_rate >= 0.8 * self.rate;
                if theta > p.max_base_loss || saturated || (self.rate >= self.max_rate && caught_up) {
                    // Goodput stopped following the rate: the largest goodput seen is the
                    // bottleneck less the path's base loss. Drain the queue below it for a step.
                    self.bottleneck = self.max_goodput / (1.0 - self.base_loss()).max(0.5);
                    if self.rate < self.max_rate {
                        let bottleneck = self.bottleneck;
                        self.rate = (bottleneck * p.drain).clamp(self.min_rate, self.max_rate);
                        self.phase = RmPhase::Drain;
                        self.loss_avg = None;
                        return self.rate;
                    }
                    self.phase = RmPhase::Stabilize;
                } else {
                    // Base loss is measured with the same signal the setpoint uses, so
                    // retransmissions and alignment biases cancel; only from windows sent at
                    // the current rate (not across a doubling, where the alignment is loose).
                    if (m.offered_rate / self.rate - 1.0).abs() < p.base_margin {
                        self.add_base(signal);
                    }
                    if caught_up {
                        self.rate = (self.rate * (1.0 + p.probe_gain)).min(self.max_rate);
                    }
                    return self.rate;
                }
            }
            RmPhase::Drain => {
                self.rate = (self.rate / p.drain).clamp(self.min_rate, self.max_rate);
                self.phase = RmPhase::Stabilize;
                // The next measurement still reflects the drain rate.
                self.skip = 1;
                return self.rate;
            }
            RmPhase::Stabilize => {}
        }
        // The bottleneck estimate: the largest goodput seen, forgotten slowly so a path that
        // became slower is followed. A sample offered clearly below it cannot have met the
        // bottleneck, so its shortfall is path loss and refines the base-loss estimate (which
        // the few probe samples may have got wrong).
        let delivered = m.goodput / (1.0 - self.base_loss()).max(0.5);
        self.bottleneck = delivered.max(self.bottleneck * (1.0 - p.bottleneck_decay));
        if m.offered_rate > 0.0 && m.offered_rate < self.bottleneck * (1.0 - p.base_margin) && self.skip == 0 {
            self.add_base(signal);
        }
        if self.skip > 0 {
            self.skip -= 1;
            return self.rate;
        }
        // The measurement lags the rate by a step or two. Eq. 3 is applied only to a
        // measurement of the current rate, so steps taken since cannot wind up on a stale
        // one; a sender that cannot reach its target rate is still measured after a few tries.
        let settled = m.offered_rate <= 0.0 || (m.offered_rate / self.rate - 1.0).abs() < p.settle_tolerance;
        if !settled && self.stale < p.max_stale {
            self.stale += 1;
            return self.rate;
        }
        self.stale = 0;
        let loss = match self.loss_avg {
            Some(avg) => avg + p.loss_smoothing * (signal - avg),
            None => signal,
        };
        self.loss_avg = Some(loss);
        let target_excess = self.excess_target();
        let excess = loss - self.base_loss() - target_excess;
        let scale = m.send_rate.max(self.min_rate);
        // Eq. 2 and the Eq. 3 error term ĝ_R(k) − ĝ*(k), relative to the measured rate.
        let target = attainable_goodput(m.send_rate, m.retransmit_fraction, m.goodput, p.beta);
        let paper = (m.goodput - target) / scale;
        // haul's setpoint: excess loss relative to the target, saturating at ±1.
        let setpoint = excess / target_excess.max(1e-6);
        let error = (paper + setpoint).clamp(-1.0, 1.0);
        self.k = (self.k + 1).min(p.k_max.max(1));
        // Eq. 3: r̂_S(k+1) = r̂_S(k) − ρ_k·error, with ρ_k = b/k^γ relative to the rate.
        let rho = gain(p.b, p.gamma, self.k);
        // r̂_S(k) is the rate measured over the window the error was measured on (the rate
        // the receiver's goodput answers), so steps taken since do not wind up on a lagging
        // measurement.
        let measured = if m.offered_rate > 0.0 { m.offered_rate } else { self.rate };
        self.rate = (measured * (1.0 - rho * error)).clamp(self.min_rate, self.max_rate);
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
    fn probe_doubles_then_drains_to_the_bottleneck() {
        let cap = 100e6;
        let mut c = RobbinsMonro::new(RmParams::default(), 10e6, 1e9);
        let mut rates = vec![c.rate()];
        while c.phase() == RmPhase::Probe && rates.len() < 20 {
            rates.push(c.update(&path(c.rate(), cap, 0.001)));
        }
        // Doubling per step from 10 MB/s: 20, 40, 80, 160 — then the overshoot is seen.
        assert_eq!(&rates[..5], &[10e6, 20e6, 40e6, 80e6, 160e6]);
        assert_eq!(c.phase(), RmPhase::Drain);
        let drained = c.rate();
        assert!((drained / (cap * 0.75) - 1.0).abs() < 0.01, "drain rate {drained}");
        let next = c.update(&path(drained, cap, 0.001));
        assert!((next / cap - 1.0).abs() < 0.01, "after drain {next}");
        assert_eq!(c.phase(), RmPhase::Stabilize);
    }

    #[test]
    fn a_lagging_measurement_does_not_move_the_rate() {
        let mut c = RobbinsMonro::new(RmParams::default(), 80e6, 125e6);
        for _ in 0..50 {
            let r = c.rate();
            c.update(&path(r, 80e6, 0.0));
        }
        let r = c.rate();
        // A window offered at half the current rate is stale: ignored.
        let mut stale = path(r / 2.0, 80e6, 0.0);
        stale.offered_rate = r / 2.0;
        assert_eq!(c.update(&stale), r);
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
