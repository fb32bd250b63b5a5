//! Round-trip-time estimation from ACK timestamp echoes (RFC 6298 smoothing), and the path's
//! RTT without queueing as a windowed minimum.

use crate::Nanos;

/// The minimum RTT is the smallest sample of the last one to two windows of this length:
/// long enough that a queue which the rate control keeps partly filled does not become the
/// baseline (BBR keeps min_rtt 10 s but drains its queue for it in PROBE_RTT; PLUT has no
/// such phase, so it waits three times as long for a moment of empty queue), short enough that
/// a route that got longer is learnt within a minute.
pub(crate) const MIN_RTT_WINDOW: Nanos = 30_000_000_000;

/// Smoothed RTT and its variation.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rtt {
    srtt: Nanos,
    var: Nanos,
    sampled: bool,
    /// Smallest sample of the current window (0 before the first sample in it).
    cur_min: Nanos,
    /// Start of the current window.
    cur_start: Nanos,
    /// Smallest sample of the window before (0 if none).
    prev_min: Nanos,
}

impl Rtt {
    /// Starts from the configured guess.
    pub(crate) fn new(initial: Nanos) -> Rtt {
        Rtt {
            srtt: initial.max(1),
            var: initial / 2,
            sampled: false,
            cur_min: 0,
            cur_start: 0,
            prev_min: 0,
        }
    }

    /// Folds in one sample taken at `now`.
    pub(crate) fn sample(&mut self, now: Nanos, rtt: Nanos) {
        let rtt = rtt.max(1);
        if now.saturating_sub(self.cur_start) >= MIN_RTT_WINDOW {
            // A window with no sample leaves nothing to carry over.
            self.prev_min = if now.saturating_sub(self.cur_start) >= 2 * MIN_RTT_WINDOW {
                0
            } else {
                self.cur_min
            };
            self.cur_min = 0;
            self.cur_start = now;
        }
        self.cur_min = if self.cur_min == 0 {
            rtt
        } else {
            self.cur_min.min(rtt)
        };
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

    /// Smallest sample of the last one to two [`MIN_RTT_WINDOW`]s (0 before the first).
    pub(crate) fn min(&self) -> Nanos {
        match (self.prev_min, self.cur_min) {
            (0, m) | (m, 0) => m,
            (a, b) => a.min(b),
        }
    }

    /// RTT variation.
    pub(crate) fn var(&self) -> Nanos {
        self.var
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Nanos = 1_000_000;

    #[test]
    fn the_minimum_follows_a_route_that_got_longer() {
        let mut r = Rtt::new(100 * MS);
        assert_eq!(r.min(), 0);
        let mut now = 0;
        // 60 ms path for 5 s, samples every 10 ms.
        while now < 5_000 * MS {
            r.sample(now, 60 * MS + (now / MS % 7) * MS);
            now += 10 * MS;
        }
        assert_eq!(r.min(), 60 * MS);
        // The route changes to 100 ms: the 60 ms minimum holds for at most two windows.
        while now < 5_000 * MS + 2 * MIN_RTT_WINDOW {
            r.sample(now, 100 * MS);
            now += 10 * MS;
        }
        assert_eq!(r.min(), 100 * MS, "the old route's RTT expired");
    }

    #[test]
    fn the_minimum_holds_for_at_least_one_window() {
        let mut r = Rtt::new(100 * MS);
        r.sample(0, 40 * MS);
        // Queueing delay builds up; the base RTT stays known for the whole window.
        let mut now = 0;
        while now + 10 * MS < MIN_RTT_WINDOW {
            now += 10 * MS;
            r.sample(now, 70 * MS);
            assert_eq!(r.min(), 40 * MS);
        }
        // A gap longer than two windows with no samples forgets everything before it.
        r.sample(now + 3 * MIN_RTT_WINDOW, 90 * MS);
        assert_eq!(r.min(), 90 * MS);
    }
}
