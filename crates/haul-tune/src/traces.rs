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
