//! A probe's or trial's rate from its throughput samples, without the connections' set-up.

use std::cell::RefCell;
use std::rc::Rc;

use haul_xfer::engine::Sample;

/// A copy's watchdog that feeds every sample to a [`Steady`] and stops the copy when `stop`,
/// given the samples so far and the newest, says why; the `Steady` stays readable after.
pub fn watched(
    mut stop: impl FnMut(&Steady, &Sample) -> Option<String> + 'static,
) -> (Rc<RefCell<Steady>>, crate::cmd::cp::Watchdog) {
    let steady = Rc::new(RefCell::new(Steady::default()));
    let seen = steady.clone();
    let dog = crate::cmd::cp::Watchdog(Box::new(move |s| {
        let mut st = seen.borrow_mut();
        st.add(s);
        stop(&st, s)
    }));
    (steady, dog)
}

/// A probe's rate from its samples after the first byte arrived, so the connections' set-up
/// (a per-file cost, not a rate) does not count.
#[derive(Default)]
pub struct Steady {
    first_s: Option<f64>,
    last_s: f64,
    bytes: u64,
    /// The samples after the first: (end of interval, bytes).
    samples: Vec<(f64, u64)>,
}

impl Steady {
    pub fn add(&mut self, s: &Sample) {
        match self.first_s {
            None if s.bytes > 0 => self.first_s = Some(s.t_s),
            None => {}
            Some(_) => {
                self.bytes += s.bytes;
                self.samples.push((s.t_s, s.bytes));
            }
        }
        self.last_s = s.t_s;
    }

    /// Bits per second over the second half of the time since the first byte, as `iperf3 -O`
    /// omits slow start: a short probe's first half is mostly ramp (TCP's slow start, PLUT's
    /// rate search), which a transfer leaves behind in its first seconds. [`Steady::bps`]
    /// while the probe is too short to halve. Trials, longer, count from the first byte.
    pub fn late_bps(&self) -> Option<f64> {
        let (Some(first), t) = (self.first_s, self.seconds()) else {
            return None;
        };
        if t < 2.0 * MIN_STEADY_S {
            return self.bps();
        }
        // From the last sample boundary at or before half way, so no interval is split.
        let half = first + t / 2.0;
        let mid = self
            .samples
            .iter()
            .map(|x| x.0)
            .rfind(|&t| t <= half)
            .unwrap_or(first);
        let late: u64 = self.samples.iter().filter(|x| x.0 > mid).map(|x| x.1).sum();
        Some(late as f64 * 8.0 / (self.last_s - mid))
    }

    /// Seconds since the first byte.
    pub fn seconds(&self) -> f64 {
        self.first_s.map_or(0.0, |f| self.last_s - f)
    }

    /// Bits per second since the first byte, once that covers [`MIN_STEADY_S`].
    pub fn bps(&self) -> Option<f64> {
        let t = self.seconds();
        (t >= MIN_STEADY_S).then(|| self.bytes as f64 * 8.0 / t)
    }
}

/// The least time after the first byte that a probe's steady rate is read over.
pub const MIN_STEADY_S: f64 = 0.3;

#[cfg(test)]
mod tests {
    use super::*;

    fn fed(samples: &[(f64, u64)]) -> Steady {
        let mut st = Steady::default();
        for &(t_s, bytes) in samples {
            st.add(&Sample {
                t_s,
                bytes,
                bps: 0.0,
            });
        }
        st
    }

    #[test]
    fn set_up_before_the_first_byte_is_not_counted() {
        // 0.5 s of set-up, then 1 MB every 100 ms: 80 Mb/s from the first byte on.
        let mut s: Vec<(f64, u64)> = (1..=5).map(|i| (i as f64 * 0.1, 0)).collect();
        s.extend((6..=25).map(|i| (i as f64 * 0.1, 1_000_000)));
        let st = fed(&s);
        assert!((st.seconds() - 1.9).abs() < 1e-9);
        assert!((st.bps().unwrap() - 80e6).abs() < 1e3, "{:?}", st.bps());
        assert!((st.late_bps().unwrap() - 80e6).abs() < 1e3);
    }

    #[test]
    fn the_late_rate_omits_the_ramp() {
        // 1 s ramping 0.1 -> 1 MB per 100 ms, then 1 s at 1 MB per 100 ms.
        let mut s: Vec<(f64, u64)> = (1..=10).map(|i| (i as f64 * 0.1, i * 100_000)).collect();
        s.extend((11..=20).map(|i| (i as f64 * 0.1, 1_000_000)));
        let st = fed(&s);
        let (all, late) = (st.bps().unwrap(), st.late_bps().unwrap());
        assert!(all < 70e6, "{all}");
        assert!((late - 80e6).abs() < 1e3, "{late}");
    }

    #[test]
    fn too_short_to_read_is_none() {
        assert_eq!(fed(&[(0.1, 0)]).bps(), None);
        assert_eq!(fed(&[(0.1, 5), (0.2, 5)]).late_bps(), None);
    }
}
