//! The receiver's datagram check list and in-order writer (004 §II, Fig. 2). Datagrams are
//! accepted in arrival order; the one the file needs next goes straight from the datagram to
//! the sink, others wait in a slot pool (grown lazily, reused, never above the window) until
//! the hole before them fills. The holes between the next expected and the highest received
//! sequence number are the loss list the ACKs carry.

use crate::Sink;
use std::collections::VecDeque;
use std::io;

/// What the check list did with one datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Insert {
    /// New data: written now or held for reordering.
    New,
    /// Already received.
    Duplicate,
    /// Beyond the reorder window.
    OutOfWindow,
}

/// Check list plus reorder buffer.
#[derive(Debug)]
pub struct CheckList {
    payload: usize,
    window: usize,
    next: u64,
    high: u64,
    /// `held[i]` is the slot holding sequence number `next + i`, if received.
    held: VecDeque<Option<u32>>,
    held_count: usize,
    pool: Vec<(Box<[u8]>, usize)>,
    free: Vec<u32>,
}

impl CheckList {
    /// An empty check list for datagrams of `payload` bytes, holding at most `window`.
    pub fn new(payload: usize, window: usize) -> CheckList {
        let window = window.clamp(1, u32::MAX as usize);
        CheckList {
            payload,
            window,
            next: 0,
            high: 0,
            held: VecDeque::new(),
            held_count: 0,
            pool: Vec::new(),
            free: Vec::new(),
        }
    }

    /// Every datagram below this has been written.
    pub fn next_expected(&self) -> u64 {
        self.next
    }

    /// One past the highest sequence number received.
    pub fn high(&self) -> u64 {
        self.high
    }

    /// Datagrams held for reordering.
    pub fn held(&self) -> usize {
        self.held_count
    }

    /// Reorder-buffer occupancy as a fraction of the window.
    pub fn occupancy(&self) -> f64 {
        self.held_count as f64 / self.window as f64
    }

    /// Takes datagram `seq` (file bytes at `seq × payload`), writing whatever is now in order.
    pub fn insert(
        &mut self,
        seq: u64,
        payload: &[u8],
        sink: &mut (impl Sink + ?Sized),
    ) -> io::Result<Insert> {
        let Some(i) = seq.checked_sub(self.next) else {
            return Ok(Insert::Duplicate);
        };
        let i = match usize::try_from(i) {
            Ok(i) if i < self.window => i,
            _ => return Ok(Insert::OutOfWindow),
        };
        if matches!(self.held.get(i), Some(Some(_))) {
            return Ok(Insert::Duplicate);
        }
        self.high = self.high.max(seq + 1);
        if i == 0 {
            sink.write_at(payload, self.offset(seq))?;
            self.held.pop_front();
            self.next += 1;
            self.drain(sink)?;
            return Ok(Insert::New);
        }
        if self.held.len() <= i {
            self.held.resize(i + 1, None);
        }
        let id = match self.free.pop() {
            Some(id) => id,
            None => {
                // pool.len() < window ≤ u32::MAX: a slot per held datagram at most.
                self.pool
                    .push((vec![0u8; self.payload].into_boxed_slice(), 0));
                (self.pool.len() - 1) as u32
            }
        };
        let (buf, len) = &mut self.pool[id as usize];
        let n = payload.len().min(buf.len());
        buf[..n].copy_from_slice(&payload[..n]);
        *len = n;
        self.held[i] = Some(id);
        self.held_count += 1;
        Ok(Insert::New)
    }

    fn drain(&mut self, sink: &mut (impl Sink + ?Sized)) -> io::Result<()> {
        while let Some(Some(id)) = self.held.front().copied() {
            let (buf, len) = &self.pool[id as usize];
            sink.write_at(&buf[..*len], self.offset(self.next))?;
            self.held.pop_front();
            self.free.push(id);
            self.held_count -= 1;
            self.next += 1;
        }
        Ok(())
    }

    fn offset(&self, seq: u64) -> u64 {
        seq * self.payload as u64
    }

    /// Writes the first `max` holes in [max(from, next expected), high) into `out` as
    /// `[start, end)`; returns true when more holes follow the last one written.
    pub fn holes(&self, from: u64, out: &mut Vec<(u64, u64)>, max: usize) -> bool {
        out.clear();
        let skip = usize::try_from(from.saturating_sub(self.next)).unwrap_or(usize::MAX);
        if max == 0 {
            return self.held.iter().skip(skip).any(Option::is_none);
        }
        let mut start = None;
        for (i, slot) in self.held.iter().enumerate().skip(skip) {
            let seq = self.next + i as u64;
            match (slot, start) {
                (None, None) => start = Some(seq),
                (Some(_), Some(s)) => {
                    out.push((s, seq));
                    start = None;
                    if out.len() == max {
                        return self.held.iter().skip(i + 1).any(Option::is_none);
                    }
                }
                _ => {}
            }
        }
        // The last held entry is always the highest received datagram, so no hole is open here.
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reorders_and_reports_holes() {
        let mut c = CheckList::new(2, 8);
        let mut out = Vec::new();
        assert_eq!(c.insert(2, b"cc", &mut out).unwrap(), Insert::New);
        assert_eq!(c.insert(4, b"e", &mut out).unwrap(), Insert::New);
        let mut holes = Vec::new();
        assert!(!c.holes(0, &mut holes, 10));
        assert_eq!(holes, vec![(0, 2), (3, 4)]);
        assert!(c.holes(0, &mut holes, 1));
        assert_eq!(holes, vec![(0, 2)]);
        assert!(!c.holes(2, &mut holes, 1));
        assert_eq!(holes, vec![(3, 4)]);
        assert_eq!(c.insert(2, b"cc", &mut out).unwrap(), Insert::Duplicate);
        assert_eq!(c.insert(9, b"zz", &mut out).unwrap(), Insert::OutOfWindow);
        for (seq, p) in [(1, b"bb"), (0, b"aa"), (3, b"dd")] {
            assert_eq!(c.insert(seq, p, &mut out).unwrap(), Insert::New);
        }
        assert_eq!(out, b"aabbccdde");
        assert_eq!((c.next_expected(), c.high(), c.held()), (5, 5, 0));
        assert_eq!(c.insert(0, b"aa", &mut out).unwrap(), Insert::Duplicate);
        assert!(!c.holes(0, &mut holes, 10));
        assert!(holes.is_empty());
    }
}
