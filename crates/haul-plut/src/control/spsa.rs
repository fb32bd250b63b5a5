//! ACK-interval control at the receiver by one-measurement SPSA (004 §IV-C, Eqs. 4–5).
//!
//! The interval I is kept in units of the RTT. Each ACK period yields one goodput measurement
//! ĝ_R(k); Eq. 5 estimates the gradient from two consecutive (I, ĝ_R) pairs and Eq. 4 steps the
//! estimate Î along it. The applied interval is Î ± δ with the sign alternating every period
//! (the simultaneous perturbation), so consecutive intervals always differ by about 2δ and
//! Eq. 5 never divides by zero, while the perturbation does not accumulate into Î. The paper
//! writes Eq. 4 with a minus sign, but its limiting ODE dÎ/dt = E[ĝ(Î)] and its goal (maximise
//! G_I) are gradient ascent, which is what haul implements. Goodput is normalised by the mean
//! of the two samples, so the gains are dimensionless.

/// Parameters of the ACK-interval SPSA.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpsaParams {
    /// Initial interval estimate Î(0), RTTs.
    pub initial: f64,
    /// Smallest applied interval, RTTs.
    pub min: f64,
    /// Largest applied interval, RTTs.
    pub max: f64,
    /// c of the gain c_k = c/(k+1)^α (Eq. 4).
    pub c: f64,
    /// α of the gain c_k = c/(k+1)^α; Spall's 0.602.
    pub alpha: f64,
    /// d_k of Eq. 5 (held constant; any positive scalar is allowed).
    pub d: f64,
    /// Perturbation δ added to and subtracted from Î in alternate periods, RTTs.
    pub perturbation: f64,
    /// Largest change of Î in one step, RTTs.
    pub max_step: f64,
}

impl Default for SpsaParams {
    fn default() -> Self {
        SpsaParams {
            initial: 1.0,
            min: 0.25,
            max: 2.0,
            c: 0.5,
            alpha: 0.602,
            d: 1.0,
            perturbation: 0.1,
            max_step: 0.25,
        }
    }
}

/// One-measurement SPSA over the ACK interval.
#[derive(Debug, Clone)]
pub struct AckSpsa {
    params: SpsaParams,
    k: u32,
    estimate: f64,
    sign: f64,
    prev: Option<(f64, f64)>,
}

impl AckSpsa {
    /// Starts at `params.initial` RTTs (kept inside the bounds).
    pub fn new(params: SpsaParams) -> AckSpsa {
        let mut s = AckSpsa {
            params,
            k: 0,
            estimate: params.initial,
            sign: 1.0,
            prev: None,
        };
        s.estimate = s.clamp(params.initial);
        s
    }

    fn clamp(&self, i: f64) -> f64 {
        let p = self.params;
        let delta = p.perturbation.min(0.5 * (p.max - p.min)).max(0.0);
        i.clamp(p.min + delta, (p.max - delta).max(p.min + delta))
    }

    /// The interval to apply now, RTTs: Î(k) ± δ.
    pub fn interval(&self) -> f64 {
        (self.estimate + self.sign * self.params.perturbation)
            .clamp(self.params.min, self.params.max)
    }

    /// The estimate Î(k) of the best interval, RTTs.
    pub fn estimate(&self) -> f64 {
        self.estimate
    }

    /// Feeds the goodput measured over the interval just ended; returns the next interval.
    pub fn update(&mut self, goodput: f64) -> f64 {
        let p = self.params;
        let (i_k, g_k) = (self.interval(), goodput.max(0.0));
        if let Some((i_prev, g_prev)) = self.prev {
            let di = i_k - i_prev;
            let scale = 0.5 * (g_k + g_prev);
            if di.abs() > 1e-9 && scale > 0.0 {
                // Eq. 5: ĝ(I(k)) = [ĝ_R(k) − ĝ_R(k−1)] / [d_k (Î(k) − Î(k−1))].
                let grad = (g_k - g_prev) / scale / (p.d * di);
                // Eq. 4 (ascent), c_k = c/(k+1)^α.
                let c_k = p.c / f64::from(self.k + 1).powf(p.alpha);
                self.estimate =
                    self.clamp(self.estimate + (c_k * grad).clamp(-p.max_step, p.max_step));
            }
        }
        self.k = self.k.saturating_add(1);
        self.prev = Some((i_k, g_k));
        self.sign = -self.sign;
        self.interval()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A unimodal goodput-ACK regression (assumption A.2 of 004) peaking at `best` RTTs.
    fn goodput(i: f64, best: f64) -> f64 {
        100e6 * (1.0 - 0.2 * (i - best).powi(2))
    }

    #[test]
    fn climbs_to_the_goodput_peak() {
        for (start, best) in [(0.3, 1.4), (1.9, 0.6)] {
            let mut s = AckSpsa::new(SpsaParams {
                initial: start,
                ..SpsaParams::default()
            });
            for _ in 0..300 {
                let i = s.interval();
                s.update(goodput(i, best));
            }
            let settled = s.estimate();
            assert!(
                (settled - best).abs() < 0.05,
                "start {start}: settled at {settled}, peak {best}"
            );
        }
    }

    #[test]
    fn stays_in_bounds_and_keeps_perturbing() {
        let mut s = AckSpsa::new(SpsaParams::default());
        let mut last = s.interval();
        for k in 0..200 {
            // Goodput rising without bound in I pushes I to the upper bound.
            let i = s.update(1e6 * (1.0 + s.interval()) + f64::from(k % 3));
            assert!((0.25..=2.0).contains(&i), "interval {i}");
            assert!((i - last).abs() > 1e-9, "interval stuck at {i}");
            last = i;
        }
        assert!(s.estimate() >= 1.85, "did not climb: {}", s.estimate());
    }
}
