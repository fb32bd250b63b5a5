//! Round-trip-time estimation from ACK timestamp echoes (RFC 6298 smoothing).

use crate::Nanos;

/// Smoothed RTT and its variation.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rtt {
    srtt: Nanos,
    var: Nanos,
    sampled: bool,
    /// Smallest sample: the path's RTT without queueing (0 before the first).
    min: Nanos,
}

impl Rtt {
    /// Starts from the configured guess.
    pub(crate) fn new(initial: Nanos) -> Rtt {
        Rtt { srtt: initial.max(1), var: initial / 2, sampled: false, min: 0 }
    }

    /// Folds in one sample.
    pub(crate) fn sample(&mut self, rtt: Nanos) {
        let rtt = rtt.max(1);
        self.min = if self.min == 0 { rtt } else { self.min.min(rtt) };
        if !self.sampled {
            self.srtt = rtt;
            self.var = rtt / 2;
            self.sampled = true;
            return;
        }
        let err = self.srtt.abs_diff(rtt);
        self.var = (3 * self.var + err) / 4;
        self.srtt = (7 * self.srtt + rtt) / 8;
    }

    /// Smoothed RTT.
    pub(crate) fn srtt(&self) -> Nanos {
        self.srtt
    }

    /// Smallest sample so far (0 before the first).
    pub(crate) fn min(&self) -> Nanos {
        self.min
    }

    /// RTT variation.
    pub(crate) fn var(&self) -> Nanos {
        self.var
    }
}
