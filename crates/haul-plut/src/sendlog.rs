//! The sender's recent history of cumulative bytes sent, so the goodput the receiver reports
//! for a window can be compared with the rate the sender offered over that same window.

use crate::Nanos;
use std::collections::VecDeque;

/// Spacing of history entries: fine enough for goodput windows of a millisecond.
const SPACING: Nanos = 50_000;
/// Entries kept (4 s at the spacing above).
const KEEP: usize = 80_000;

/// (time, cumulative bytes sent) samples, oldest first.
#[derive(Debug, Default)]
pub(crate) struct SendLog {
    entries: VecDeque<(Nanos, u64)>,
    total: u64,
}

impl SendLog {
    /// Records `bytes` sent at `now`.
    pub(crate) fn record(&mut self, now: Nanos, bytes: u64) {
        self.total += bytes;
        match self.entries.back_mut() {
            Some(last) if now < last.0 + SPACING => last.1 = self.total,
            _ => self.entries.push_back((now, self.total)),
        }
        if self.entries.len() > KEEP {
            self.entries.pop_front();
        }
    }

    fn total_at(&self, t: Nanos) -> Option<u64> {
        let i = self.entries.partition_point(|e| e.0 <= t);
        i.checked_sub(1)
            .and_then(|i| self.entries.get(i))
            .map(|e| e.1)
    }

    /// Bytes/s sent in [from, to), if the history reaches back that far.
    pub(crate) fn rate(&self, from: Nanos, to: Nanos) -> Option<f64> {
        if to <= from {
            return None;
        }
        let sent = self.total_at(to)?.checked_sub(self.total_at(from)?)?;
        Some(sent as f64 * crate::SECOND as f64 / (to - from) as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_over_a_past_window() {
        let mut log = SendLog::default();
        for ms in 0..100 {
            log.record(ms * 1_000_000, 1000);
        }
        // 1000 bytes per millisecond = 1 MB/s.
        let r = log.rate(10_000_000, 60_000_000).unwrap();
        assert!((r - 1e6).abs() < 1.0, "{r}");
        assert_eq!(log.rate(60_000_000, 10_000_000), None);
    }
}
