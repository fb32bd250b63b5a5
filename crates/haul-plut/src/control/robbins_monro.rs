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
//! rate, so b is dimensionless. They move the *commanded* rate (a busy host's pacer delivers
//! less than commanded, and stepping from the measured rate would compound that), with
//! Kesten's rule for k, a bound on the standing queue, and a cut for a clear overrun.

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
    /// The target widens with the error of the base-loss estimate, up to this: every point
    /// of it is a point of overshoot above the bottleneck, and an ℓ₀ estimated too low is
    /// corrected from samples below the bottleneck anyway.
    pub max_loss_target: f64,
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
    /// Eq. 3 moves the *commanded* rate, but never to more than this fraction above the rate
    /// the sender actually offered in the measured window: a host that cannot pace as fast as
    /// commanded (a busy CPU, 004 §III) keeps its compensation, without winding the rate up.
    pub headroom: f64,
    /// Standing queue (queueing delay as a fraction of the smallest RTT) beyond which the
    /// error is pushed up, so the setpoint just above the bottleneck does not fill the
    /// bottleneck's queue until it overflows (0: off).
    pub max_queue: f64,
    /// When the smoothed excess shortfall exceeds this many times its target (and twice the
    /// sample noise σ), the bottleneck is clearly overrun: the rate is cut by the excess at
    /// once (a Newton step on the shortfall, which is 1 − C/r above the bottleneck) rather
    /// than by ρ_k.
    pub overrun: f64,
}

impl Default for RmParams {
    fn default() -> Self {
        RmParams {
            beta: 0.5,
            b: 0.1,
            gamma: 0.6,
            k_max: 256,
            loss_target: 0.005,
            max_loss_target: 0.02,
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
            headroom: 0.25,
            max_queue: 0.25,
            overrun: 4.0,
        }
    }
}

/// Eq. 2 of 004: ĝ*(k) = [r̂_S(k)(1 − x̂(k))]^β · ĝ_R(k)^(1−β).
pub fn attainable_goodput(
    send_rate: f64,
    retransmit_fraction: f64,
    goodput: f64,
    beta: f64,
) -> f64 {
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
    /// Sign of the last error Eq. 3 used (0 before the first).
    last_sign: f64,
    /// Consecutive saturated errors of one sign (signed count).
    push: i32,
    phase: RmPhase,
    loss_avg: Option<f64>,
    /// Rate-independent path loss: (sum, samples) while probing.
    base: (f64, u32),
    /// Sum of squares of the same samples (their spread sets the excess target).
    base_sq: f64,
    /// Datagrams the same samples covered (for the binomial error of ℓ₀).
    base_datagrams: f64,
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
            last_sign: 0.0,
            push: 0,
            phase: RmPhase::Probe,
            loss_avg: None,
            base: (0.0, 0),
            base_sq: 0.0,
            base_datagrams: 0.0,
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

    /// The bottleneck estimate, bytes/s (0 while probing).
    pub fn bottleneck(&self) -> f64 {
        self.bottleneck
    }

    /// The smoothed goodput shortfall ℓ̄ the last stabilisation step used.
    pub fn loss_avg(&self) -> Option<f64> {
        self.loss_avg
    }

    /// The step counter k of ρ_k.
    pub fn steps(&self) -> u32 {
        self.k
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
    fn add_base(&mut self, signal: f64, datagrams: u64) {
        let n = f64::from(self.base.1);
        let window = f64::from(self.params.base_window.max(1));
        let keep = if n >= window {
            (window - 1.0) / window
        } else {
            1.0
        };
        let count = if n >= window {
            self.base.1
        } else {
            self.base.1 + 1
        };
        let mut x = signal.clamp(-self.params.max_base_loss, self.params.max_base_loss);
        if self.base.1 >= 2 {
            // Huber's clip: a sample far from the estimate (a host stall that moved the
            // window) moves it by a bounded amount, so neither ℓ₀ nor σ is carried off by
            // one outlier. The bound is four binomial errors of a sample this size, or four
            // loss targets.
            let mean = self.base.0 / n;
            let p = mean.clamp(1e-4, 0.5);
            let binomial = (p * (1.0 - p) / (datagrams.max(1) as f64)).sqrt();
            let bound = 4.0 * binomial.max(self.params.loss_target);
            x = x.clamp(mean - bound, mean + bound);
        }
        self.base = (self.base.0 * keep + x, count);
        self.base_sq = self.base_sq * keep + x * x;
        self.base_datagrams = self.base_datagrams * keep + datagrams as f64;
    }

    /// Standard deviation σ of one shortfall sample below the bottleneck (the measurement
    /// noise: host scheduling on both ends and the path's jitter move the goodput window
    /// against the offered one), from the base-loss samples; 0 before two.
    pub fn sample_sd(&self) -> f64 {
        let n = f64::from(self.base.1);
        if self.base.1 < 2 {
            return 0.0;
        }
        let mean = self.base.0 / n;
        ((self.base_sq / n - mean * mean).max(0.0) * n / (n - 1.0)).sqrt()
    }

    /// Standard error of the base-loss estimate ℓ₀: from the spread of its samples (σ/√n),
    /// but never below the binomial error of a loss fraction estimated from the datagrams
    /// they covered (with one loss and one delivery added, so a few samples without a loss
    /// do not claim certainty). At first ℓ₀ rests on one or two probe samples of a few
    /// hundred datagrams; with 1% path loss such a sample often shows a third of it.
    pub fn base_error(&self) -> f64 {
        let n = f64::from(self.base.1.min(self.params.base_window.max(1)));
        let spread = if n >= 2.0 {
            self.sample_sd() / n.sqrt()
        } else {
            0.0
        };
        let d = self.base_datagrams.max(0.0);
        if self.base.1 == 0 || d < 1.0 {
            return 0.0;
        }
        let p = (self.base_loss() * d + 1.0) / (d + 2.0);
        spread.max((p * (1.0 - p) / (d + 2.0)).sqrt())
    }

    /// The excess shortfall aimed for: `loss_target`, or two standard errors of the base-loss
    /// estimate if that is larger (at most `max_loss_target`), so an ℓ₀ estimated too low
    /// cannot put the setpoint below the bottleneck (below it the shortfall is the true ℓ₀,
    /// and a setpoint under that walks the rate down). It used to be max(`loss_target`, σ):
    /// on a noisy path — σ of 3–5% on a busy 2-core host — the controller then aimed 3–5%
    /// above the bottleneck and overflowed its queue every few seconds; the Robbins–Monro
    /// steps average the noise of the samples themselves, what the target must cover is the
    /// error of ℓ₀.
    pub fn excess_target(&self) -> f64 {
        self.params
            .loss_target
            .max((2.0 * self.base_error()).min(self.params.max_loss_target))
    }

    /// Feeds one control step and returns the next target rate.
    pub fn update(&mut self, m: &Measurement) -> f64 {
        let signal = shortfall(m);
        match self.phase {
            RmPhase::Probe => {
                if let Some(rate) = self.probe(m, signal) {
                    return rate;
                }
            }
            RmPhase::Drain => return self.end_drain(),
            RmPhase::Stabilize => {}
        }
        self.stabilize(m, signal)
    }

    /// One probe step: doubles the rate, or ends probing once goodput stops following it.
    /// Returns the next rate, or `None` when probing ended at the NIC rate and this
    /// measurement goes on to the first stabilisation step.
    fn probe(&mut self, m: &Measurement, signal: f64) -> Option<f64> {
        let p = self.params;
        let theta = m.loss_fraction();
        // A window that offered no more than the path has already delivered cannot show
        // the bottleneck: a shortfall there is measurement noise (a host stall moved the
        // window), and ending the probe on it would start stabilisation far below.
        // Before any base-loss sample ℓ₀ counts as 0 (a sender that cannot reach its
        // probe rate never offers a window within `base_margin` of it).
        let beyond =
            self.max_goodput > 0.0 && m.offered_rate > self.max_goodput * (1.0 + p.base_margin);
        self.max_goodput = self.max_goodput.max(m.goodput);
        let saturated = beyond && signal - self.base_loss() > p.probe_exit;
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
                return Some(self.rate);
            }
            self.phase = RmPhase::Stabilize;
            None
        } else {
            // Base loss is measured with the same signal the setpoint uses, so
            // retransmissions and alignment biases cancel; only from windows sent at
            // the current rate (not across a doubling, where the alignment is loose,
            // nor a window the sender did not fill: before ℓ₀ is known that cannot be
            // told from one the bottleneck capped).
            if (m.offered_rate / self.rate - 1.0).abs() < p.base_margin {
                self.add_base(signal, m.lost + m.received);
            }
            if caught_up {
                self.rate = (self.rate * (1.0 + p.probe_gain)).min(self.max_rate);
            }
            Some(self.rate)
        }
    }

    /// The drain step: restores the rate drained from and starts stabilisation.
    fn end_drain(&mut self) -> f64 {
        let p = self.params;
        self.rate = (self.rate / p.drain).clamp(self.min_rate, self.max_rate);
        self.phase = RmPhase::Stabilize;
        // The next measurement still reflects the drain rate.
        self.skip = 1;
        self.rate
    }

    /// One stabilisation step: Eq. 3 with haul's setpoint, queue bound, recovery and overrun
    /// cut, applied to a measurement of the current rate.
    fn stabilize(&mut self, m: &Measurement, signal: f64) -> f64 {
        let p = self.params;
        let achieved = self.track_bottleneck(m, signal);
        if self.skip > 0 {
            self.skip -= 1;
            return self.rate;
        }
        if !self.settled(m) {
            return self.rate;
        }
        let loss = match self.loss_avg {
            Some(avg) => avg + p.loss_smoothing * (signal - avg),
            None => signal,
        };
        self.loss_avg = Some(loss);
        let target_excess = self.excess_target();
        let excess = loss - self.base_loss() - target_excess;
        let error = self.error(m, excess, target_excess);
        self.advance_k(error);
        let mut next = self.step_rate(m, error, achieved);
        // The smoothed shortfall (weight ½) has about 0.6σ of noise: an overrun is clear only
        // well beyond it.
        if excess > (p.overrun * target_excess).max(2.0 * self.sample_sd()) {
            next = next.min(self.rate * (1.0 - excess.min(0.5)));
        }
        self.rate = next.clamp(self.min_rate, self.max_rate);
        self.rate
    }

    /// Updates the bottleneck estimate and refines the base loss from a sample clearly below
    /// it; returns whether the sender achieved the current rate in the goodput window.
    fn track_bottleneck(&mut self, m: &Measurement, signal: f64) -> bool {
        let p = self.params;
        // The bottleneck estimate: the largest goodput seen, forgotten slowly so a path that
        // became slower is followed. A sample offered clearly below it cannot have met the
        // bottleneck, so its shortfall is path loss and refines the base-loss estimate (which
        // the few probe samples may have got wrong) — but only at a rate the controller chose
        // to hold below it, and only if the sender achieved it: a window the sender did not
        // fill (a host stall, flow control) is below the bottleneck too, but its shortfall is
        // the host's timing, not the path's loss.
        let delivered = m.goodput / (1.0 - self.base_loss()).max(0.5);
        self.bottleneck = delivered.max(self.bottleneck * (1.0 - p.bottleneck_decay));
        let chosen_below = self.rate < self.bottleneck * (1.0 - p.base_margin);
        let achieved = (m.offered_rate / self.rate - 1.0).abs() < p.base_margin;
        if m.offered_rate > 0.0 && chosen_below && achieved && self.skip == 0 {
            self.add_base(signal, m.lost + m.received);
        }
        achieved
    }

    /// Whether Eq. 3 may use `m`, counting the measurements passed over as stale.
    fn settled(&mut self, m: &Measurement) -> bool {
        let p = self.params;
        // The measurement lags the rate by a step or two. Eq. 3 is applied only to a
        // measurement of the current rate — one whose goodput window began after the rate
        // last changed, or that offered within `settle_tolerance` of it — so steps taken
        // since cannot wind up on a stale one; a sender that cannot reach its target rate is
        // still measured after a few tries.
        let settled = m.offered_rate <= 0.0
            || m.at_current_rate
            || (m.offered_rate / self.rate - 1.0).abs() < p.settle_tolerance;
        if !settled && self.stale < p.max_stale {
            self.stale += 1;
            return false;
        }
        self.stale = 0;
        true
    }

    /// The error term of Eq. 3 in [−1, 1]: the paper's ĝ_R(k) − ĝ*(k) plus haul's loss
    /// setpoint and queue bound.
    fn error(&self, m: &Measurement, excess: f64, target_excess: f64) -> f64 {
        let p = self.params;
        let scale = m.send_rate.max(self.min_rate);
        // Eq. 2 and the Eq. 3 error term ĝ_R(k) − ĝ*(k), relative to the measured rate.
        let target = attainable_goodput(m.send_rate, m.retransmit_fraction, m.goodput, p.beta);
        let paper = (m.goodput - target) / scale;
        // haul's setpoint: excess loss relative to the target, saturating at ±1.
        let setpoint = excess / target_excess.max(1e-6);
        // haul's queue bound: past `max_queue` of the path's RTT in queueing delay, an error
        // of up to +1 more. The loss setpoint alone sits ℓ_t above the bottleneck and so fills
        // its queue at ℓ_t·C until it overflows — every few seconds with a bandwidth-delay
        // product of queue at 1 Gb/s — and the burst of losses then stalls the window on
        // holes whose retransmissions are lost in the same full queue. With the bound the
        // queue hovers near `max_queue` and the loss signal still finds the bottleneck.
        let queued = if p.max_queue > 0.0 {
            ((m.queue_delay - p.max_queue) / p.max_queue).clamp(0.0, 1.0)
        } else {
            0.0
        };
        (paper + setpoint + queued).clamp(-1.0, 1.0)
    }

    /// Advances the step counter k of ρ_k by Kesten's rule, halving it after repeated
    /// saturated pushes the same way.
    fn advance_k(&mut self, error: f64) {
        let p = self.params;
        // k advances only when the error changes sign (Kesten's rule for stochastic
        // approximation): while the rate is far from the root — after a probe that ended
        // early on a noisy sample, a host stall or a path change — the errors keep their sign
        // and the step stays large, so the rate gets there in a few steps; near the root the
        // noise alternates the sign and ρ_k decreases as in Eq. 3.
        let sign = if error < 0.0 { -1.0 } else { 1.0 };
        if self.k == 0 || sign != self.last_sign {
            self.k = (self.k + 1).min(p.k_max.max(1));
        }
        self.last_sign = sign;
        // Three saturated pushes the same way in a row (near the root the noise alternates
        // the sign) halve k: the path changed, or stabilisation began far from the
        // bottleneck, and the steps grow again until the rate gets there.
        self.push = if error.abs() >= 1.0 && (self.push == 0 || self.push.signum() == sign as i32) {
            self.push + sign as i32
        } else {
            0
        };
        if self.push.abs() >= 3 {
            self.k = (self.k / 2).max(1);
            self.push = 0;
        }
    }

    /// The rate after Eq. 3's step on `error`, bounded by the offered rate's headroom and
    /// raised by haul's recovery (before the overrun cut and the clamp to the rate limits).
    fn step_rate(&self, m: &Measurement, error: f64, achieved: bool) -> f64 {
        let p = self.params;
        // Eq. 3: r̂_S(k+1) = r̂_S(k) − ρ_k·error, with ρ_k = b/k^γ relative to the rate.
        // A sample clearly below the bottleneck estimate with no excess shortfall (the rate
        // fell far after a long host stall or a spurious loss signal, when k had grown) takes
        // the first step's gain, so the rate climbs back in a few steps.
        let below =
            m.offered_rate > 0.0 && m.offered_rate < self.bottleneck * (1.0 - p.base_margin);
        let rho = gain(p.b, p.gamma, if below && error < 0.0 { 1 } else { self.k });
        // The step moves the commanded rate. (It used to move the rate measured over the
        // window: a sender whose pacer delivers a few per cent less than commanded — any
        // busy host — then loses those per cent at every step and walks its rate down until
        // ρ_k balances them, leaving the link idle with no loss to show for it.) The measured
        // window still bounds it, so a sender that cannot reach its rate does not wind up;
        // the bound only holds the rate back, it never lowers it: a sender that had nothing
        // to send for a while (flow control, a slow source, a hole being repaired) offered
        // little without the path or the pacer being at fault.
        let mut next = self.rate * (1.0 - rho * error);
        if m.offered_rate > 0.0 {
            next = next.min((m.offered_rate * (1.0 + p.headroom)).max(self.rate));
        }
        // Recovery (haul's): a rate that fell below half the bottleneck it held — a burst of
        // losses at a receiver that fell behind can cut it to the floor — which the sender
        // achieves with no excess shortfall doubles per step, as in the probe, up to the
        // bottleneck estimate. Eq. 3's relative steps (at most ρ₁ = 10 %) would take some
        // 70 steps back from B/10⁴, each waiting for `min_step_datagrams` at the floor rate.
        if below && achieved && error <= -0.5 && self.rate < 0.5 * self.bottleneck {
            next = next.max((self.rate * (1.0 + p.probe_gain)).min(self.bottleneck));
        }
        next
    }
}

/// What the path failed to deliver: the goodput shortfall against the rate offered
/// during the goodput window (a bottleneck caps goodput before its queue overflows and
/// anything is lost), or, when that is unknown, the reported losses.
/// Not clamped at 0: the noise of a sample must average out, not bias the estimates.
/// Bounded below: a window in which the sender was idle while its queue drained shows
/// goodput many times the offer, which says nothing about the path's loss.
fn shortfall(m: &Measurement) -> f64 {
    if m.offered_rate > 0.0 {
        (1.0 - m.goodput / m.offered_rate).max(-0.5)
    } else {
        m.loss_fraction()
    }
}

#[cfg(test)]
mod tests;
