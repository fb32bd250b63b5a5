//! Synthetic per-interval throughput traces for the estimator tests and the estimator replay
//! example: slow-start rise to a plateau, the a − b/t² shape, AR(1) noise, multiplicative noise.

use rand::rngs::StdRng;
use rand::SeedableRng;

use crate::surface::gaussian;

/// plateau·(1 − e^{−t/τ}) sampled at t = dt, 2dt, … (n readings): a slow-start ramp.
pub fn exp_rise(plateau: f64, tau_s: f64, dt: f64, n: usize) -> Vec<f64> {
    (1..=n)
        .map(|i| plateau * (1.0 - (-(i as f64) * dt / tau_s).exp()))
        .collect()
}

/// a − b/t² at t = 1, 2, … report intervals (Eq. 4.1 of 003), floored at 0.
pub fn neg_poly(a: f64, b: f64, n: usize) -> Vec<f64> {
    (1..=n)
        .map(|i| (a - b / (i as f64 * i as f64)).max(0.0))
        .collect()
}

/// A stationary AR(1) process around `mean`: x_t − μ = φ(x_{t−1} − μ) + σ·N(0,1), floored at 0.
pub fn ar1(mean: f64, phi: f64, sigma: f64, n: usize, seed: u64) -> Vec<f64> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut dev = 0.0;
    (0..n)
        .map(|_| {
            dev = phi * dev + sigma * gaussian(&mut rng);
            (mean + dev).max(0.0)
        })
        .collect()
}

/// `xs` with multiplicative Gaussian noise of relative σ, floored at 0.
pub fn with_noise(xs: &[f64], rel_sigma: f64, seed: u64) -> Vec<f64> {
    let mut rng = StdRng::seed_from_u64(seed);
    xs.iter()
        .map(|x| (x * (1.0 + rel_sigma * gaussian(&mut rng))).max(0.0))
        .collect()
}

/// A slow-start ramp that overshoots and settles (non-monotone, like TCP's first loss after slow
/// start): plateau·(1 − e^{−t/τ}) plus a bump of height `overshoot`·plateau peaking near 2τ and
/// decaying with time constant τ, sampled at t = dt, 2dt, … (n readings).
pub fn overshoot(plateau: f64, tau_s: f64, overshoot: f64, dt: f64, n: usize) -> Vec<f64> {
    (1..=n)
        .map(|i| {
            let t = i as f64 * dt;
            let bump = overshoot * (t / (2.0 * tau_s)) * (1.0 - t / (2.0 * tau_s)).exp();
            (plateau * (1.0 - (-t / tau_s).exp() + bump)).max(0.0)
        })
        .collect()
}

/// `zeros` zero readings (connection setup: nothing has moved yet) followed by `xs`.
pub fn with_setup(xs: &[f64], zeros: usize) -> Vec<f64> {
    let mut v = vec![0.0; zeros];
    v.extend_from_slice(xs);
    v
}

/// `xs` rounded to multiples of `step` (a reading counts whole blocks: 1 MiB per 100 ms is a
/// step of 84 Mb/s), with the remainder carried to the next reading so the total is kept.
pub fn quantized(xs: &[f64], step: f64) -> Vec<f64> {
    if !(step.is_finite() && step > 0.0) {
        return xs.to_vec();
    }
    let mut carry = 0.0;
    xs.iter()
        .map(|&x| {
            let v = x + carry;
            let q = (v / step).floor() * step;
            carry = v - q;
            q
        })
        .collect()
}
