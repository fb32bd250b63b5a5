//! FastProf (000 §4): SPSA over block size l and buffer size f, driven by real one-time
//! profilings against a `haul profile serve` server. The optimizer is `haul_tune::spsa`; this
//! module only maps iterates to θ, runs the probes and keeps the trace.

use std::time::Duration;

use haul_tune::space::{Axis, Scale, MIB};
use haul_tune::spsa::{Spsa, SpsaConfig, Start};
use haul_tune::{Optimizer, Probe, Space, Stopping, Trace};
use serde::{Deserialize, Serialize};

use crate::driver::ClientOptions;
use crate::params::{ProfileParams, TransportKind};
use crate::report::ProfileReport;
use crate::{ProfileError, Result};

/// FastProf settings.
#[derive(Debug, Clone)]
pub struct TuneConfig {
    /// Block-size range in payloads (m − 16): l_min, l_max (1–25 in 000 §4).
    pub block_payloads: (f64, f64),
    /// Buffer range in bytes (1 MiB – 1 GiB in 000 §4).
    pub buffer: (f64, f64),
    /// Map the buffer axis exponentially (the 2^{f'} form) instead of linearly.
    pub buffer_exponential: bool,
    /// B, the target (reserved) bandwidth in bits per second, for the 𝒞 rule.
    pub target_bps: Option<f64>,
    /// 𝒞.
    pub gain_ratio: f64,
    /// ℛ.
    pub patience: usize,
    /// ℳ.
    pub budget: usize,
    /// Random start seed (FastProf starts at a random point, §4.5.3 of 000).
    pub seed: u64,
    /// Pause between probes (5 s in the author's code).
    pub pause: Duration,
}

impl Default for TuneConfig {
    fn default() -> Self {
        TuneConfig {
            block_payloads: (1.0, 25.0),
            buffer: (MIB, 1024.0 * MIB),
            buffer_exponential: false,
            target_bps: None,
            gain_ratio: 0.90,
            patience: 30,
            budget: 60,
            seed: 1,
            pause: Duration::ZERO,
        }
    }
}

/// The outcome of a FastProf run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TuneResult {
    /// Best probe (iterate, real [l, f], y in b/s).
    pub best: Option<Probe>,
    /// θ of the best probe.
    pub best_params: Option<ProfileParams>,
    /// Every probe in order and why the run stopped.
    pub trace: Trace,
}

/// The search space [l, f] for θ's packet size.
pub fn space(base: &ProfileParams, cfg: &TuneConfig) -> Result<Space> {
    let bad = |e: haul_tune::TuneError| ProfileError::param("tune range", e.to_string());
    let payload = base.udt_payload().max(1) as f64;
    let block = Axis::new(
        "block",
        cfg.block_payloads.0,
        cfg.block_payloads.1,
        payload,
        Scale::Linear,
    )
    .map_err(bad)?;
    let scale = if cfg.buffer_exponential {
        Scale::Exponential
    } else {
        Scale::Linear
    };
    let buffer =
        Axis::new("buffer", cfg.buffer.0 / MIB, cfg.buffer.1 / MIB, MIB, scale).map_err(bad)?;
    Ok(Space::new(vec![block, buffer]))
}

/// θ for real values [l, f]: l moved off exact payload multiples (Eq. 3.3 of 000); UDT buffers
/// f and UDP buffers f/2 as in the author's code; TCP / UDP socket buffer f.
#[allow(clippy::manual_is_multiple_of)] // rust-version 1.80 predates is_multiple_of
pub fn to_params(base: &ProfileParams, real: &[f64]) -> ProfileParams {
    let mut p = base.clone();
    let payload = p.udt_payload().max(1);
    let mut l = real.first().copied().unwrap_or(1.0).max(1.0) as u64;
    if p.transport == TransportKind::Udt && l % payload == 0 {
        l -= 1;
    }
    p.block = Some(l.max(1));
    let f = real.get(1).copied().unwrap_or(MIB).max(1.0) as u64;
    match p.transport {
        TransportKind::Udt => {
            p.udt.sndbuf = Some(f);
            p.udt.rcvbuf = Some(f);
            p.udt.udp_sndbuf = Some(f / 2);
            p.udt.udp_rcvbuf = Some(f / 2);
        }
        _ => p.buffer = Some(f),
    }
    p
}

/// Runs FastProf: ask SPSA for a point, profile it, tell the throughput, until a stopping rule.
pub fn run(
    base: &ProfileParams,
    server: &str,
    cfg: &TuneConfig,
    mut on_probe: impl FnMut(usize, &ProfileParams, &Result<ProfileReport>),
) -> Result<TuneResult> {
    let space = space(base, cfg)?;
    let stopping = Stopping::new(cfg.target_bps)
        .gain_ratio(cfg.gain_ratio)
        .patience(cfg.patience)
        .budget(Some(cfg.budget));
    let mut sc = SpsaConfig::new(stopping);
    sc.start = Start::Random;
    // The thesis' gains assume y in Gb/s on a 10 Gb/s link; without B, 1 Gb/s is one unit.
    sc.gain_unit = Some(cfg.target_bps.map_or(1e9, |b| b / 10.0));
    let mut opt = Spsa::new(space, sc, cfg.seed);
    let mut n = 0;
    while let Some(pt) = opt.ask() {
        let real = opt.space().to_real(&pt);
        let p = to_params(base, &real);
        let r = crate::run_client(p.clone(), ClientOptions::new(server));
        let y = r.as_ref().map_or(0.0, |r| r.aggregate_bps);
        on_probe(n, &p, &r);
        opt.tell(&pt, y)
            .map_err(|e| ProfileError::Protocol(format!("optimizer: {e}")))?;
        n += 1;
        if !cfg.pause.is_zero() {
            std::thread::sleep(cfg.pause);
        }
    }
    let best = opt.best().cloned();
    let best_params = best.as_ref().map(|b| to_params(base, &b.real));
    Ok(TuneResult {
        best,
        best_params,
        trace: opt.trace().clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn udt_params_avoid_exact_multiples_and_halve_udp_buffers() {
        let base = ProfileParams {
            transport: TransportKind::Udt,
            packet: Some(8972),
            ..Default::default()
        };
        let p = to_params(&base, &[89_560.0, 8.0 * MIB]);
        assert_eq!(p.block, Some(89_559));
        assert_eq!(p.udt.sndbuf, Some(8 << 20));
        assert_eq!(p.udt.udp_sndbuf, Some(4 << 20));
        let s = space(&base, &TuneConfig::default()).unwrap();
        assert_eq!(s.to_real(&[1.0, 1.0]), vec![8956.0, MIB]);
    }
}
