//! Tsunami error-rate control with ARET threshold adaptation (000 §5, Eqs. 5.3–5.6 and the ξ
//! table), the comparison controller. The error rate ε is an EWMA of the interval's loss
//! fraction θ plus the receiver's buffer occupancy λ; the rate grows by α while ε ≤ ξ and
//! shrinks by β otherwise. ARET moves ξ itself each interval from the goodput and loss trends
//! and the direction of the last rate change.
//!
//! The dissertation leaves ξ's step, initial value and bounds and ρ open. haul's defaults:
//! ξ starts at Tsunami's default error rate 7.5%, moves multiplicatively by ±10% per step and
//! is kept in [0.001, 0.5]; ρ = 0.25 is Tsunami's default history weight.

use super::Measurement;

/// Parameters of the Tsunami/ARET controller.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AretParams {
    /// α of Eq. 5.6 (rate growth factor), 6/5 in Tsunami.
    pub alpha: f64,
    /// β of Eq. 5.6 (rate decay factor), 24/25 in Tsunami.
    pub beta: f64,
    /// ρ of Eq. 5.3, the weight of the previous error rate.
    pub rho: f64,
    /// Initial threshold ξ.
    pub xi_initial: f64,
    /// Relative change of ξ per ARET step.
    pub xi_step: f64,
    /// Lower bound of ξ.
    pub xi_min: f64,
    /// Upper bound of ξ.
    pub xi_max: f64,
}

impl Default for AretParams {
    fn default() -> Self {
        AretParams {
            alpha: 1.2,
            beta: 0.96,
            rho: 0.25,
            xi_initial: 0.075,
            xi_step: 0.1,
            xi_min: 0.001,
            xi_max: 0.5,
        }
    }
}

/// Direction the threshold moves in, from the ARET table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XiMove {
    /// ξ ↑.
    Up,
    /// ξ keep.
    Keep,
    /// ξ ↓.
    Down,
}

/// The ARET table (000 §5): the ξ move for the last rate change (`increased`), whether goodput
/// rose (G_{i−1} < G_i) and whether loss rose (θ_{i−1} < θ_i).
pub fn aret_move(increased: bool, goodput_rose: bool, loss_rose: bool) -> XiMove {
    match (increased, goodput_rose, loss_rose) {
        (true, true, true) => XiMove::Up,
        (true, true, false) => XiMove::Keep,
        (true, false, true) => XiMove::Down,
        (true, false, false) => XiMove::Keep,
        (false, true, true) => XiMove::Keep,
        (false, true, false) => XiMove::Down,
        (false, false, true) => XiMove::Keep,
        (false, false, false) => XiMove::Up,
    }
}

/// The Tsunami rate controller with ARET's adaptive threshold.
#[derive(Debug, Clone)]
pub struct Aret {
    params: AretParams,
    rate: f64,
    max_rate: f64,
    eps: f64,
    xi: f64,
    prev: Option<(f64, f64)>,
    increased: bool,
}

impl Aret {
    /// Starts at `initial` bytes/s with target rate S_max = `max` bytes/s.
    pub fn new(params: AretParams, initial: f64, max: f64) -> Aret {
        let max_rate = max.max(1.0);
        let xi = params.xi_initial.clamp(params.xi_min, params.xi_max);
        Aret {
            params,
            rate: initial.clamp(1.0, max_rate),
            max_rate,
            eps: 0.0,
            xi,
            prev: None,
            increased: true,
        }
    }

    /// The current rate, bytes/s.
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// The current error threshold ξ.
    pub fn threshold(&self) -> f64 {
        self.xi
    }

    /// The current error rate ε.
    pub fn error_rate(&self) -> f64 {
        self.eps
    }

    /// Feeds one report interval and returns the next rate.
    pub fn update(&mut self, m: &Measurement) -> f64 {
        let p = self.params;
        let theta = m.loss_fraction();
        // Eq. 5.3: ε_i = ρ ε_{i−1} + (1 − ρ)(θ_i + λ_i).
        self.eps = p.rho * self.eps + (1.0 - p.rho) * (theta + m.occupancy.clamp(0.0, 1.0));
        if let Some((g_prev, theta_prev)) = self.prev {
            let factor = match aret_move(self.increased, g_prev < m.goodput, theta_prev < theta) {
                XiMove::Up => 1.0 + p.xi_step,
                XiMove::Keep => 1.0,
                XiMove::Down => 1.0 - p.xi_step,
            };
            self.xi = (self.xi * factor).clamp(p.xi_min, p.xi_max);
        }
        self.prev = Some((m.goodput, theta));
        // Eq. 5.6: S_i = min(α S_{i−1}, S_max) if ε ≤ ξ, else β S_{i−1}.
        self.increased = self.eps <= self.xi;
        self.rate = if self.increased {
            (self.rate * p.alpha).min(self.max_rate)
        } else {
            (self.rate * p.beta).max(1.0)
        };
        self.rate
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_matches_the_dissertation() {
        use XiMove::*;
        let up = [
            aret_move(true, true, true),
            aret_move(true, true, false),
            aret_move(true, false, true),
            aret_move(true, false, false),
        ];
        let down = [
            aret_move(false, true, true),
            aret_move(false, true, false),
            aret_move(false, false, true),
            aret_move(false, false, false),
        ];
        assert_eq!(up, [Up, Keep, Down, Keep]);
        assert_eq!(down, [Keep, Down, Keep, Up]);
    }

    #[test]
    fn grows_without_loss_and_backs_off_above_threshold() {
        let mut a = Aret::new(AretParams::default(), 1e6, 100e6);
        let clean = Measurement {
            goodput: 1e6,
            received: 1000,
            ..Default::default()
        };
        assert!((a.update(&clean) - 1.2e6).abs() < 1.0);
        let lossy = Measurement {
            goodput: 1e6,
            lost: 300,
            received: 700,
            ..Default::default()
        };
        let before = a.rate();
        // ε = 0.25·0 + 0.75·0.3 = 0.225 > ξ ≈ 0.075: multiply by β.
        assert!((a.update(&lossy) - before * 0.96).abs() < 1.0);
        assert!((a.error_rate() - 0.225).abs() < 1e-12);
    }

    #[test]
    fn threshold_stays_in_bounds() {
        let mut a = Aret::new(AretParams::default(), 1e6, 100e6);
        for k in 0..1000u64 {
            let m = Measurement {
                goodput: (k % 7) as f64 * 1e6,
                lost: k % 5,
                received: 100,
                ..Default::default()
            };
            a.update(&m);
            assert!((0.001..=0.5).contains(&a.threshold()));
            assert!(a.rate() >= 1.0 && a.rate() <= 100e6);
        }
    }
}
