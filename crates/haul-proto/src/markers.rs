//! Restart markers (a set of byte ranges, `111 Range Marker 0-100,200-300`, also REST's MODE E
//! argument) and performance markers (`112-Perf Marker`), as GFD.020 defines them.

use std::fmt;

use thiserror::Error;

/// A range list could not be parsed.
#[derive(Debug, Error, PartialEq, Eq)]
#[error("bad range list: {0}")]
pub struct RangeError(String);

/// A set of disjoint, sorted, half-open byte ranges `[start, end)`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RangeSet {
    ranges: Vec<(u64, u64)>,
}

impl RangeSet {
    /// The empty set.
    pub fn new() -> Self {
        RangeSet::default()
    }

    /// Parses `a-b,c-d` (GFD.020 writes ranges as start-end with end exclusive).
    pub fn parse(s: &str) -> Result<RangeSet, RangeError> {
        let mut set = RangeSet::new();
        for part in s.trim().split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (a, b) = part
                .split_once('-')
                .ok_or_else(|| RangeError(format!("{part:?} is not start-end")))?;
            let a: u64 = a
                .trim()
                .parse()
                .map_err(|_| RangeError(format!("bad start in {part:?}")))?;
            let b: u64 = b
                .trim()
                .parse()
                .map_err(|_| RangeError(format!("bad end in {part:?}")))?;
            if b < a {
                return Err(RangeError(format!("end before start in {part:?}")));
            }
            set.insert(a, b);
        }
        Ok(set)
    }

    /// Adds `[start, end)`, merging with touching or overlapping ranges.
    pub fn insert(&mut self, start: u64, end: u64) {
        if start >= end {
            return;
        }
        // First range whose end reaches start (could merge).
        let i = self.ranges.partition_point(|&(_, e)| e < start);
        let mut s = start;
        let mut e = end;
        let mut j = i;
        while j < self.ranges.len() && self.ranges[j].0 <= e {
            s = s.min(self.ranges[j].0);
            e = e.max(self.ranges[j].1);
            j += 1;
        }
        self.ranges.splice(i..j, [(s, e)]);
    }

    /// Merges every range of `other` into this set.
    pub fn union(&mut self, other: &RangeSet) {
        for &(a, b) in &other.ranges {
            self.insert(a, b);
        }
    }

    /// The ranges, sorted and disjoint.
    pub fn ranges(&self) -> &[(u64, u64)] {
        &self.ranges
    }

    /// Total bytes covered.
    pub fn covered(&self) -> u64 {
        self.ranges.iter().map(|(a, b)| b - a).sum()
    }

    /// True when `[0, len)` is fully covered.
    pub fn covers(&self, len: u64) -> bool {
        len == 0
            || self
                .ranges
                .first()
                .is_some_and(|&(a, b)| a == 0 && b >= len)
    }

    /// True when no range is held.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// The gaps of `[0, len)` not yet covered, in order.
    pub fn missing(&self, len: u64) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        let mut at = 0;
        for &(a, b) in &self.ranges {
            if a >= len {
                break;
            }
            if a > at {
                out.push((at, a));
            }
            at = at.max(b);
        }
        if at < len {
            out.push((at, len));
        }
        out
    }
}

impl fmt::Display for RangeSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (a, b)) in self.ranges.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{a}-{b}")?;
        }
        Ok(())
    }
}

/// A GFD.020 performance marker: bytes moved so far on one stripe at a time.
#[derive(Debug, Clone, PartialEq)]
pub struct PerfMarker {
    /// Seconds since the Unix epoch, with fraction.
    pub timestamp: f64,
    /// Stripe index (0 for a single host).
    pub stripe_index: u32,
    /// Bytes transferred on this stripe so far.
    pub stripe_bytes: u64,
    /// Number of stripes.
    pub total_stripes: u32,
}

impl PerfMarker {
    /// The reply lines of a `112` performance marker (first and last carry the code).
    pub fn to_lines(&self) -> Vec<String> {
        vec![
            "Perf Marker".to_string(),
            format!(" Timestamp:  {:.1}", self.timestamp),
            format!(" Stripe Index: {}", self.stripe_index),
            format!(" Stripe Bytes Transferred: {}", self.stripe_bytes),
            format!(" Total Stripe Count: {}", self.total_stripes),
            "End.".to_string(),
        ]
    }

    /// Parses the lines of a `112` reply; None when a field is missing.
    pub fn from_lines(lines: &[String]) -> Option<PerfMarker> {
        let field = |name: &str| {
            lines.iter().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                (k.trim().eq_ignore_ascii_case(name)).then(|| v.trim().to_string())
            })
        };
        Some(PerfMarker {
            timestamp: field("Timestamp")?.parse().ok()?,
            stripe_index: field("Stripe Index")?.parse().ok()?,
            stripe_bytes: field("Stripe Bytes Transferred")?.parse().ok()?,
            total_stripes: field("Total Stripe Count")?.parse().ok()?,
        })
    }
}

/// Parses the range list of a `111 Range Marker a-b,c-d` reply text.
pub fn parse_range_marker(text: &str) -> Option<RangeSet> {
    let rest = text.trim().strip_prefix("Range Marker")?;
    RangeSet::parse(rest).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_ranges() {
        let mut r = RangeSet::new();
        r.insert(10, 20);
        r.insert(30, 40);
        r.insert(20, 30);
        assert_eq!(r.ranges(), &[(10, 40)]);
        r.insert(0, 5);
        assert_eq!(r.to_string(), "0-5,10-40");
        assert_eq!(r.missing(50), vec![(5, 10), (40, 50)]);
        assert!(!r.covers(40));
        r.insert(5, 10);
        assert!(r.covers(40));
        assert_eq!(RangeSet::parse(&r.to_string()).unwrap(), r);
    }

    #[test]
    fn perf_marker_round_trip() {
        let m = PerfMarker {
            timestamp: 1700000000.5,
            stripe_index: 0,
            stripe_bytes: 12345,
            total_stripes: 1,
        };
        assert_eq!(PerfMarker::from_lines(&m.to_lines()), Some(m));
        assert_eq!(
            parse_range_marker("Range Marker 0-100").unwrap().covered(),
            100
        );
    }
}
