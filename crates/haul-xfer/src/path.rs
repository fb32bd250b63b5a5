//! The path estimate behind file clustering (issue 6, §2 of 003-digest): the round-trip time
//! measured on the control channel, a bottleneck bandwidth that is either the user's or a live
//! estimate, and the TCP buffer the kernel will allow. Their product is the BDP that the
//! cluster cut-offs and the pipelining/parallelism heuristic are multiples of.

use std::time::{Duration, Instant};

use haul_proto::command::Command;

use crate::control::Control;
use crate::error::XferError;
use crate::tls::ClientTls;
use crate::url::RemoteUrl;

/// The bandwidth assumed until a live estimate replaces it, bits per second (1 Gb/s: the
/// commonest data-transfer-node link in the source documents' testbeds).
pub const PRIOR_BANDWIDTH_BPS: f64 = 1e9;

/// NOOP round trips timed on the control channel; the minimum is kept (queueing only adds).
const RTT_PROBES: usize = 5;

/// What clustering knows of the path.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct PathEstimate {
    /// Round-trip time, seconds.
    pub rtt_s: f64,
    /// Bottleneck bandwidth, bits per second.
    pub bandwidth_bps: f64,
    /// True when the user gave the bandwidth (then it is never re-estimated).
    pub bandwidth_given: bool,
    /// Largest TCP buffer a data socket may have, bytes.
    pub buffer: f64,
}

impl PathEstimate {
    /// Bandwidth-delay product, bytes (never below one 1500-byte packet).
    pub fn bdp(&self) -> f64 {
        (self.bandwidth_bps / 8.0 * self.rtt_s).max(1500.0)
    }

    /// The estimate for `url`: RTT from NOOPs on a fresh control connection, the user's
    /// bandwidth or [`PRIOR_BANDWIDTH_BPS`], and `buffer` or the kernel's limit.
    pub fn measure(
        url: &RemoteUrl,
        tls: Option<&ClientTls>,
        bandwidth_bps: Option<f64>,
        buffer: Option<usize>,
    ) -> Result<PathEstimate, XferError> {
        let rtt = control_rtt(url, tls)?;
        Ok(PathEstimate {
            rtt_s: rtt.as_secs_f64(),
            bandwidth_bps: bandwidth_bps.unwrap_or(PRIOR_BANDWIDTH_BPS),
            bandwidth_given: bandwidth_bps.is_some(),
            buffer: buffer.map_or_else(kernel_buffer_max, |b| b as f64),
        })
    }
}

/// The smallest of `RTT_PROBES` NOOP round trips on a new control connection to `url`.
pub fn control_rtt(url: &RemoteUrl, tls: Option<&ClientTls>) -> Result<Duration, XferError> {
    let mut c = Control::connect(url, tls, Duration::from_secs(30))?;
    let mut best = Duration::MAX;
    for _ in 0..RTT_PROBES {
        let t = Instant::now();
        c.ok(&Command::Noop)?;
        best = best.min(t.elapsed());
    }
    let _ = c.send(&Command::Quit);
    Ok(best)
}

/// The largest buffer autotuning may give a TCP socket here: the smaller of the `tcp_rmem`
/// and `tcp_wmem` maxima (the sender's and receiver's limits bound a stream alike), or the
/// Linux default of 4 MiB when /proc cannot be read.
pub fn kernel_buffer_max() -> f64 {
    let max_of = |p: &str| -> Option<f64> {
        std::fs::read_to_string(p)
            .ok()?
            .split_whitespace()
            .nth(2)?
            .parse()
            .ok()
    };
    match (
        max_of("/proc/sys/net/ipv4/tcp_rmem"),
        max_of("/proc/sys/net/ipv4/tcp_wmem"),
    ) {
        (Some(r), Some(w)) => r.min(w),
        (Some(x), None) | (None, Some(x)) => x,
        (None, None) => 4.0 * 1024.0 * 1024.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bdp_is_rate_times_rtt_in_bytes() {
        let p = PathEstimate {
            rtt_s: 0.040,
            bandwidth_bps: 1e9,
            bandwidth_given: true,
            buffer: 4e6,
        };
        assert!((p.bdp() - 5e6).abs() < 1.0);
        let lo = PathEstimate { rtt_s: 20e-6, ..p };
        assert_eq!(lo.bdp(), 2500.0);
        let tiny = PathEstimate { rtt_s: 1e-7, ..p };
        assert_eq!(tiny.bdp(), 1500.0, "floored at one packet");
    }

    #[test]
    fn kernel_buffer_is_positive() {
        assert!(kernel_buffer_max() >= 4096.0);
    }
}
