//! The sender's Three-Tier Dynamic Queuing Buffer (3TDQB, 004 §V-A.1). A slab of datagram
//! slots is allocated once; slots move DQ (loaded, waiting to be sent) → OP (sent, waiting for
//! acknowledgement) → RP (acknowledged, waiting to be reloaded with new file data) → DQ.
//! Only slot indices move between tiers, never payload bytes. When every slot is outstanding
//! (DQ and RP empty), the slab grows from the heap instead of stalling the sender, up to a cap.

use crate::{Nanos, Source};
use std::collections::VecDeque;
use std::io;

/// One datagram's payload and transmission history.
#[derive(Debug)]
pub struct Slot {
    /// Sequence number loaded into the slot.
    pub seq: u64,
    /// Payload length.
    pub len: usize,
    /// When it was last sent.
    pub last_sent: Nanos,
    /// Times it was sent.
    pub sends: u32,
    /// Queued for retransmission and not yet resent.
    pub queued: bool,
    data: Box<[u8]>,
}

impl Slot {
    /// The loaded payload.
    pub fn payload(&self) -> &[u8] {
        &self.data[..self.len]
    }
}

/// The three-tier buffer.
#[derive(Debug)]
pub struct SendBuffer {
    payload: usize,
    slots: Vec<Slot>,
    dq: VecDeque<u32>,
    op: VecDeque<Option<u32>>,
    op_base: u64,
    rp: Vec<u32>,
    live: usize,
    max_slots: usize,
    grows: u64,
}

impl SendBuffer {
    /// Preallocates `initial` slots of `payload` bytes; the slab never exceeds `max` slots.
    pub fn new(payload: usize, initial: usize, max: usize) -> SendBuffer {
        let max_slots = max.max(1).min(u32::MAX as usize);
        let mut b = SendBuffer {
            payload,
            slots: Vec::new(),
            dq: VecDeque::new(),
            op: VecDeque::new(),
            op_base: 0,
            rp: Vec::new(),
            live: 0,
            max_slots,
            grows: 0,
        };
        b.add_slots(initial.clamp(1, max_slots));
        b
    }

    fn add_slots(&mut self, n: usize) {
        for _ in 0..n {
            // slots.len() < max_slots ≤ u32::MAX.
            self.rp.push(self.slots.len() as u32);
            let data = vec![0u8; self.payload].into_boxed_slice();
            self.slots.push(Slot {
                seq: 0,
                len: 0,
                last_sent: 0,
                sends: 0,
                queued: false,
                data,
            });
        }
    }

    /// Slots allocated.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Times the slab grew because every slot was outstanding.
    pub fn grows(&self) -> u64 {
        self.grows
    }

    /// Sent, unacknowledged datagrams.
    pub fn outstanding(&self) -> usize {
        self.live
    }

    /// Lowest sequence number still outstanding, if any.
    pub fn lowest_outstanding(&self) -> Option<u64> {
        self.op
            .iter()
            .position(Option::is_some)
            .map(|i| self.op_base + i as u64)
    }

    /// True when a reload could load something: a slot is free in RP or the slab may grow.
    pub fn can_load(&self) -> bool {
        !self.rp.is_empty() || self.slots.len() < self.max_slots
    }

    /// True when a loaded datagram is waiting in DQ.
    pub fn has_queued(&self) -> bool {
        !self.dq.is_empty()
    }

    /// Refills DQ when it is empty: reloads every RP slot with the next sequence numbers
    /// (`next` onwards, below `end`, at most `limit` of them), growing the slab from the heap
    /// when DQ, RP are both empty. Returns the datagrams loaded.
    pub fn reload(
        &mut self,
        src: &(impl Source + ?Sized),
        next: u64,
        end: u64,
        total: u64,
        limit: u64,
    ) -> io::Result<u64> {
        if !self.dq.is_empty() || next >= end || limit == 0 {
            return Ok(0);
        }
        if self.rp.is_empty() && self.slots.len() < self.max_slots {
            // Every slot is outstanding: the 3TDQB failsafe allocates from the heap.
            let more = (self.slots.len() / 4).clamp(64, self.max_slots - self.slots.len());
            self.add_slots(more);
            self.grows += 1;
        }
        let mut seq = next;
        while seq < end && seq - next < limit {
            let Some(id) = self.rp.pop() else { break };
            let offset = seq * self.payload as u64;
            let len = (total - offset).min(self.payload as u64) as usize;
            let slot = &mut self.slots[id as usize];
            read_exact_at(src, &mut slot.data[..len], offset)?;
            (slot.seq, slot.len, slot.last_sent, slot.sends, slot.queued) = (seq, len, 0, 0, false);
            self.dq.push_back(id);
            seq += 1;
        }
        Ok(seq - next)
    }

    /// Takes the next loaded datagram from DQ and moves it to OP as sent at `now`.
    pub fn send_next(&mut self, now: Nanos) -> Option<&Slot> {
        let id = self.dq.pop_front()?;
        let slot = &mut self.slots[id as usize];
        if self.op.is_empty() {
            self.op_base = slot.seq;
        }
        slot.last_sent = now;
        slot.sends = 1;
        self.op.push_back(Some(id));
        self.live += 1;
        Some(&self.slots[id as usize])
    }

    /// The outstanding slot holding `seq`, if it is still unacknowledged.
    pub fn get_mut(&mut self, seq: u64) -> Option<&mut Slot> {
        let i = usize::try_from(seq.checked_sub(self.op_base)?).ok()?;
        let id = (*self.op.get(i)?)?;
        Some(&mut self.slots[id as usize])
    }

    /// Acknowledges `seq`: its slot leaves OP for RP. Returns false if it was not outstanding.
    pub fn ack(&mut self, seq: u64) -> bool {
        let Some(i) = seq
            .checked_sub(self.op_base)
            .and_then(|d| usize::try_from(d).ok())
        else {
            return false;
        };
        let Some(id) = self.op.get_mut(i).and_then(Option::take) else {
            return false;
        };
        self.rp.push(id);
        self.live -= 1;
        while let Some(None) = self.op.front() {
            self.op.pop_front();
            self.op_base += 1;
        }
        true
    }

    /// Acknowledges every outstanding datagram below `seq`.
    pub fn ack_below(&mut self, seq: u64) {
        while self.op_base < seq {
            match self.op.pop_front() {
                Some(Some(id)) => {
                    self.rp.push(id);
                    self.live -= 1;
                }
                Some(None) => {}
                None => break,
            }
            self.op_base += 1;
        }
    }
}

/// Reads exactly `buf.len()` bytes at `offset`, failing if the source ends first.
pub fn read_exact_at(
    src: &(impl Source + ?Sized),
    mut buf: &mut [u8],
    mut offset: u64,
) -> io::Result<()> {
    while !buf.is_empty() {
        let n = src.read_at(buf, offset)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("PLUT source ended at offset {offset}"),
            ));
        }
        buf = &mut buf[n..];
        offset += n as u64;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_cycle_through_the_three_tiers() {
        let data: Vec<u8> = (0..=255).collect();
        let mut b = SendBuffer::new(10, 4, 100);
        assert_eq!(b.reload(&data[..], 0, 26, 256, u64::MAX).unwrap(), 4);
        for seq in 0..4 {
            assert_eq!(b.send_next(seq).map(|s| s.seq), Some(seq));
        }
        assert_eq!(b.outstanding(), 4);
        assert!(b.ack(2) && !b.ack(2));
        b.ack_below(2);
        assert_eq!(b.lowest_outstanding(), Some(3));
        // Three slots came back through RP: reloading reuses them without growing.
        assert_eq!(b.reload(&data[..], 4, 26, 256, u64::MAX).unwrap(), 3);
        assert_eq!((b.capacity(), b.grows()), (4, 0));
        assert_eq!(
            b.send_next(9).map(|s| s.payload().to_vec()),
            Some((40..50).collect())
        );
    }

    #[test]
    fn grows_from_the_heap_when_everything_is_outstanding() {
        let data = vec![7u8; 1000];
        let mut b = SendBuffer::new(10, 2, 100);
        b.reload(&data[..], 0, 100, 1000, u64::MAX).unwrap();
        while b.send_next(0).is_some() {}
        assert_eq!(b.reload(&data[..], 2, 100, 1000, u64::MAX).unwrap(), 64);
        assert_eq!((b.capacity(), b.grows()), (66, 1));
        // The last datagram of a file is short.
        let mut c = SendBuffer::new(10, 2, 2);
        c.reload(&data[..], 99, 100, 995, u64::MAX).unwrap();
        assert_eq!(c.send_next(0).map(|s| s.len), Some(5));
    }
}
