//! Pure controllers: source-rate control at the sender (Robbins–Monro, Eqs. 1–3 of 004, or
//! Tsunami with ARET threshold adaptation, 000 §5) and ACK-interval control at the receiver
//! (one-measurement SPSA, Eqs. 4–5 of 004). They take measurements and return the next
//! parameter; no clocks, sockets or randomness from outside.

pub mod aret;
pub mod robbins_monro;
pub mod spsa;

pub use aret::{Aret, AretParams};
pub use robbins_monro::{RmParams, RobbinsMonro};
pub use spsa::{AckSpsa, SpsaParams};

/// What the sender measured over one control step (at least one RTT of ACKs).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Measurement {
    /// Measured source rate r̂_S, bytes per second, retransmissions included.
    pub send_rate: f64,
    /// Goodput ĝ_R the receiver reported in its latest ACK, bytes per second.
    pub goodput: f64,
    /// Send rate over the window that goodput measured (aligned by the ACK's timestamp echo),
    /// bytes per second; 0 when unknown.
    pub offered_rate: f64,
    /// Fraction x̂ of the bytes sent in the step that were retransmissions.
    pub retransmit_fraction: f64,
    /// First transmissions the ACKs of this step newly reported lost (L).
    pub lost: u64,
    /// First transmissions the ACKs of this step newly reported received (K).
    pub received: u64,
    /// Receiver reorder-buffer occupancy as a fraction of its window (λ).
    pub occupancy: f64,
    /// The goodput window began after the controller last changed its rate, so the
    /// measurement answers the current rate, whatever rate the sender actually achieved.
    pub at_current_rate: bool,
    /// Queueing delay: smoothed RTT over the smallest RTT seen, less one (0 when unknown).
    pub queue_delay: f64,
}

impl Measurement {
    /// Loss fraction of first transmissions, θ = L / (L + K) (Eq. 5.4 of 000).
    pub fn loss_fraction(&self) -> f64 {
        let n = self.lost + self.received;
        if n == 0 {
            0.0
        } else {
            self.lost as f64 / n as f64
        }
    }
}

/// Which source-rate controller the sender runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RateControl {
    /// PLUT's Robbins–Monro stabilisation (Eqs. 1–3 of 004).
    RobbinsMonro(RmParams),
    /// Tsunami's error-rate control with ARET threshold adaptation (000 §5).
    Aret(AretParams),
}

impl Default for RateControl {
    fn default() -> Self {
        RateControl::RobbinsMonro(RmParams::default())
    }
}

/// A running source-rate controller of either kind.
#[derive(Debug, Clone)]
pub enum RateController {
    /// See [`RobbinsMonro`].
    RobbinsMonro(RobbinsMonro),
    /// See [`Aret`].
    Aret(Aret),
}

impl RateController {
    /// Starts the selected controller at `initial` bytes/s, never exceeding `max` bytes/s.
    pub fn new(kind: RateControl, initial: f64, max: f64) -> RateController {
        match kind {
            RateControl::RobbinsMonro(p) => {
                RateController::RobbinsMonro(RobbinsMonro::new(p, initial, max))
            }
            RateControl::Aret(p) => RateController::Aret(Aret::new(p, initial, max)),
        }
    }

    /// Feeds one control step's measurement and returns the new target rate, bytes/s.
    pub fn update(&mut self, m: &Measurement) -> f64 {
        match self {
            RateController::RobbinsMonro(c) => c.update(m),
            RateController::Aret(c) => c.update(m),
        }
    }

    /// True while the controller probes for the bottleneck: it then wants a measurement at
    /// every ACK rather than once per RTT, to see the bottleneck as soon as possible.
    pub fn probing(&self) -> bool {
        matches!(self, RateController::RobbinsMonro(c) if c.phase() == robbins_monro::RmPhase::Probe)
    }

    /// The current target rate, bytes/s.
    pub fn rate(&self) -> f64 {
        match self {
            RateController::RobbinsMonro(c) => c.rate(),
            RateController::Aret(c) => c.rate(),
        }
    }
}

/// Eq. 1 of 004: the source rate produced by idle time `idle` seconds between datagrams of
/// `mds` bytes on a NIC writing at `nic` bytes/s (window of one datagram).
pub fn rate_from_idle(idle: f64, nic: f64, mds: f64) -> f64 {
    nic * mds / (nic * idle.max(0.0) + mds)
}

/// Eq. 1 of 004 solved for the idle time that yields `rate` bytes/s (0 when `rate ≥ nic`).
pub fn idle_for_rate(rate: f64, nic: f64, mds: f64) -> f64 {
    if rate >= nic || rate <= 0.0 {
        return if rate <= 0.0 { f64::INFINITY } else { 0.0 };
    }
    mds / rate - mds / nic
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eq1_idle_time_round_trips() {
        let (nic, mds) = (125e6, 1472.0);
        for rate in [1e6, 50e6, 124e6] {
            let idle = idle_for_rate(rate, nic, mds);
            assert!(
                (rate_from_idle(idle, nic, mds) - rate).abs() / rate < 1e-9,
                "rate {rate}"
            );
        }
        assert_eq!(idle_for_rate(200e6, nic, mds), 0.0);
        assert_eq!(rate_from_idle(0.0, nic, mds), nic);
        assert!(
            (Measurement {
                lost: 1,
                received: 3,
                ..Default::default()
            }
            .loss_fraction()
                - 0.25)
                .abs()
                < 1e-12
        );
    }
}
