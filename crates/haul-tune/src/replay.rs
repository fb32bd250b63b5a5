//! Replay harness (§4.5 of 000): runs an optimizer many times against a surface plus noise and
//! reports the four metrics of Figs. 4.3–4.8: mean throughput, percent of runs meeting 𝒞, and
//! mean and maximum probe counts.

use rand::rngs::StdRng;
use rand::SeedableRng;
use serde::{Deserialize, Serialize};

use crate::surface::{Noise, Surface};
use crate::{Optimizer, Trace, TuneError};

/// Hard cap on probes in one replayed run, so an optimizer without a budget still terminates.
pub const MAX_PROBES_PER_RUN: usize = 100_000;

/// Outcome of one replayed run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    /// Noise-free surface value at the returned best setting (what a transfer would get).
    pub throughput: f64,
    /// Probes spent.
    pub probes: usize,
    /// The full trace.
    pub trace: Trace,
}

/// The four replay metrics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplayStats {
    /// Optimizer name.
    pub optimizer: String,
    /// Runs replayed.
    pub runs: usize,
    /// Mean noise-free throughput at the returned setting.
    pub mean_throughput: f64,
    /// Percent of runs whose returned setting truly reaches 𝒞·B.
    pub pct_meeting: f64,
    /// Mean probe count.
    pub mean_probes: f64,
    /// Maximum probe count.
    pub max_probes: usize,
}

/// Runs `opt` to completion against `surface` with `noise` drawn from `noise_seed`.
pub fn run_once<O: Optimizer, S: Surface + ?Sized>(
    opt: &mut O,
    surface: &S,
    noise: Noise,
    noise_seed: u64,
) -> Result<RunResult, TuneError> {
    let mut rng = StdRng::seed_from_u64(noise_seed);
    while opt.probes() < MAX_PROBES_PER_RUN {
        let Some(p) = opt.ask() else { break };
        let real = opt.space().to_real(&p);
        let y = noise.sample(surface.value(&real), &mut rng);
        opt.tell(&p, y)?;
    }
    let throughput = opt.best().map_or(0.0, |b| surface.value(&b.real));
    Ok(RunResult {
        throughput,
        probes: opt.probes(),
        trace: opt.trace().clone(),
    })
}

/// Replays `runs` runs; run i builds its optimizer with `make(seed_i)` and draws noise from
/// another seed derived from `base_seed`. `goal` is 𝒞·B.
pub fn replay<O, F, S>(
    make: F,
    surface: &S,
    noise: Noise,
    runs: usize,
    base_seed: u64,
    goal: f64,
) -> Result<ReplayStats, TuneError>
where
    O: Optimizer,
    F: Fn(u64) -> O,
    S: Surface + ?Sized,
{
    let mut name = String::new();
    let (mut sum_y, mut met, mut sum_p, mut max_p) = (0.0, 0usize, 0usize, 0usize);
    for i in 0..runs as u64 {
        let seed = base_seed.wrapping_mul(1_000_003).wrapping_add(i);
        let mut opt = make(seed);
        let r = run_once(&mut opt, surface, noise, seed ^ 0x05EE_D0F0_015E)?;
        name.clone_from(&r.trace.optimizer);
        sum_y += r.throughput;
        met += usize::from(r.throughput >= goal);
        sum_p += r.probes;
        max_p = max_p.max(r.probes);
    }
    let n = runs.max(1) as f64;
    Ok(ReplayStats {
        optimizer: name,
        runs,
        mean_throughput: sum_y / n,
        pct_meeting: 100.0 * met as f64 / n,
        mean_probes: sum_p as f64 / n,
        max_probes: max_p,
    })
}
