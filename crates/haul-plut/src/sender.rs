//! The PLUT sender state machine (004 §II and §V-A). File data is loaded into the 3TDQB and
//! paced out one datagram at a time at the controller's rate (Eq. 1 of 004 with a window of
//! one datagram). Each ACK acknowledges datagrams, queues the holes of its loss list for
//! retransmission (a hole is resent only when its last copy had time to arrive, so a hole the
//! next ACK still lists because the copy is in flight is not resent twice), samples the RTT,
//! and contributes to a control step; every step (≥ 1 RTT and ≥ `min_step_datagrams`) feeds
//! the rate controller. If no ACK arrives for an RTO the lowest outstanding datagram is resent
//! as a probe, which makes a receiver that already finished repeat its final ACK.

use crate::buffer::SendBuffer;
use crate::config::{Config, ConfigError};
use crate::control::{idle_for_rate, Measurement, RateController};
use crate::rtt::Rtt;
use crate::sendlog::SendLog;
use crate::stats::{DropReason, SenderStats, Verdict};
use crate::wire::{Ack, DataHeader, Datagram, DATA_HEADER_LEN};
use crate::{Nanos, Source, SECOND};
use std::collections::VecDeque;
use std::io;

/// Largest RTO backoff exponent.
const MAX_BACKOFF: u32 = 6;
/// Floor of the sender's RTO.
const MIN_RTO: Nanos = 10_000_000;

/// Accumulators of the current control step.
#[derive(Debug, Clone, Copy, Default)]
struct Step {
    start: Nanos,
    bytes: u64,
    retransmitted: u64,
    lost: u64,
    received: u64,
    goodput: f64,
    offered: f64,
    occupancy: f64,
    /// Start (sender clock) of the goodput window of the latest ACK.
    window_start: Nanos,
}

/// A control step with fewer than `min_step_datagrams` samples ends after this many RTTs...
const LONG_STEP_RTTS: Nanos = 8;
/// ... and at least this long ...
const LONG_STEP: Nanos = 250_000_000;
/// ... once it has this many samples.
const LONG_STEP_SAMPLES: u64 = 16;

/// The sending end of one PLUT session.
#[derive(Debug)]
pub struct Sender {
    cfg: Config,
    total: u64,
    count: u64,
    buf: SendBuffer,
    next_load: u64,
    sent_high: u64,
    rtx: VecDeque<u64>,
    probe: Option<u64>,
    rtt: Rtt,
    rate: RateController,
    next_send: f64,
    peer_next: u64,
    peer_high: u64,
    last_ack_seq: Option<u32>,
    peer_interval: Nanos,
    rto_deadline: Option<Nanos>,
    backoff: u32,
    step: Step,
    /// When the controller last changed the rate.
    rate_set: Nanos,
    /// The last poll that pacing allowed found nothing to send.
    starved: bool,
    last: Measurement,
    log: SendLog,
    stats: SenderStats,
}

impl Sender {
    /// A sender for a file of `total` bytes.
    pub fn new(cfg: Config, total: u64) -> Result<Sender, ConfigError> {
        cfg.validate()?;
        let initial = cfg.initial_rate.min(cfg.nic_rate);
        Ok(Sender {
            buf: SendBuffer::new(
                cfg.payload(),
                cfg.send_buffer,
                cfg.window.max(cfg.send_buffer),
            ),
            count: cfg.datagrams(total),
            rtt: Rtt::new(cfg.initial_rtt),
            rate: RateController::new(cfg.rate_control, initial, cfg.nic_rate),
            peer_interval: cfg.initial_rtt,
            total,
            cfg,
            next_load: 0,
            sent_high: 0,
            rtx: VecDeque::new(),
            probe: None,
            next_send: 0.0,
            peer_next: 0,
            peer_high: 0,
            last_ack_seq: None,
            rto_deadline: None,
            backoff: 0,
            step: Step::default(),
            rate_set: 0,
            starved: false,
            last: Measurement::default(),
            log: SendLog::default(),
            stats: SenderStats::default(),
        })
    }

    /// True once the receiver acknowledged every datagram.
    pub fn is_done(&self) -> bool {
        self.peer_next >= self.count
    }

    /// Counters.
    pub fn stats(&self) -> SenderStats {
        let mut s = self.stats;
        s.heap_grows = self.buf.grows();
        s
    }

    /// The controller's current target rate, bytes/s.
    pub fn rate(&self) -> f64 {
        self.rate.rate()
    }

    /// The running rate controller (for inspection).
    pub fn controller(&self) -> &RateController {
        &self.rate
    }

    /// The measurement the last control step fed the rate controller.
    pub fn last_measurement(&self) -> Measurement {
        self.last
    }

    /// Smoothed RTT.
    pub fn srtt(&self) -> Nanos {
        self.rtt.srtt()
    }

    /// Datagrams the 3TDQB holds (preallocated plus heap growth).
    pub fn buffer_capacity(&self) -> usize {
        self.buf.capacity()
    }

    /// Time between datagram starts at the current rate: MDS/B plus Eq. 1's idle time.
    fn gap(&self) -> f64 {
        let (mds, nic) = (self.cfg.mds as f64, self.cfg.nic_rate);
        (mds / nic + idle_for_rate(self.rate.rate(), nic, mds)) * SECOND as f64
    }

    fn rto(&self) -> Nanos {
        let base = self.rtt.srtt() + 4 * self.rtt.var() + 2 * self.peer_interval;
        base.max(MIN_RTO) << self.backoff
    }

    /// A hole is resent only if its last copy was sent at least this long ago.
    fn resend_guard(&self) -> Nanos {
        self.rtt.srtt() + (4 * self.rtt.var()).max(self.rtt.srtt() / 8)
    }

    fn window_end(&self) -> u64 {
        self.peer_next
            .saturating_add(self.cfg.window as u64)
            .min(self.count)
    }

    /// True when [`Sender::poll_transmit`] has something to send once pacing allows.
    fn has_work(&self) -> bool {
        self.probe.is_some()
            || !self.rtx.is_empty()
            || self.buf.has_queued()
            || (self.next_load < self.window_end() && self.buf.can_load())
    }

    /// When the sender next needs polling: the pacer's next slot if it has work, or the RTO.
    pub fn poll_timeout(&self) -> Option<Nanos> {
        if self.is_done() {
            return None;
        }
        let send = self.has_work().then(|| self.next_send.ceil() as Nanos);
        match (send, self.rto_deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Fires the RTO: queues the lowest outstanding datagram as a probe and backs off.
    pub fn handle_timeout(&mut self, now: Nanos) {
        if self.is_done() || !matches!(self.rto_deadline, Some(t) if t <= now) {
            return;
        }
        self.probe = self.buf.lowest_outstanding();
        if self.probe.is_some() {
            self.stats.timeouts += 1;
            self.backoff = (self.backoff + 1).min(MAX_BACKOFF);
            self.rto_deadline = Some(now + self.rto());
        } else {
            self.rto_deadline = None;
        }
    }

    /// Writes the next datagram into `buf` (at least MDS bytes) if pacing allows one now,
    /// loading file data from `src` into free buffer slots as needed.
    pub fn poll_transmit(
        &mut self,
        now: Nanos,
        buf: &mut [u8],
        src: &(impl Source + ?Sized),
    ) -> io::Result<Option<usize>> {
        if self.is_done() || (now as f64) < self.next_send {
            return Ok(None);
        }
        if buf.len() < self.cfg.mds {
            let msg = format!(
                "PLUT transmit buffer of {} bytes is below the MDS {}",
                buf.len(),
                self.cfg.mds
            );
            return Err(io::Error::new(io::ErrorKind::InvalidInput, msg));
        }
        let n = match self.pick_retransmission(now) {
            Some(seq) => self.emit_retransmission(now, seq, buf),
            None => self.emit_new(now, buf, src)?,
        };
        let Some(n) = n else {
            self.starved = true;
            return Ok(None);
        };
        let gap = self.gap();
        // A late poll may catch up the sending time it missed, within the credit; time in
        // which there was nothing to send (flow control, a slow source) is not missed time, so
        // the first datagram after it restarts the pacing clock instead of bursting.
        let base = if std::mem::take(&mut self.starved) {
            now as f64
        } else {
            let credit = (f64::from(self.cfg.max_burst) * gap)
                .max(self.cfg.max_burst_time as f64)
                .max(self.cfg.max_burst_rtt * self.rtt.srtt() as f64);
            self.next_send.max(now as f64 - credit)
        };
        self.next_send = base + gap;
        if self.rto_deadline.is_none() {
            self.rto_deadline = Some(now + self.rto());
        }
        Ok(Some(n))
    }

    fn pick_retransmission(&mut self, now: Nanos) -> Option<u64> {
        if let Some(seq) = self.probe.take() {
            if self.buf.get_mut(seq).is_some() {
                return Some(seq);
            }
        }
        let guard = self.resend_guard();
        while let Some(seq) = self.rtx.pop_front() {
            if let Some(slot) = self.buf.get_mut(seq) {
                slot.queued = false;
                if now.saturating_sub(slot.last_sent) >= guard {
                    return Some(seq);
                }
            }
        }
        None
    }

    fn header(&self, now: Nanos, seq: u64, len: usize, retransmit: bool) -> DataHeader {
        DataHeader {
            session: self.cfg.session,
            seq,
            offset: seq * self.cfg.payload() as u64,
            timestamp: (now / 1000) as u32,
            rtt_us: u32::try_from(self.rtt.srtt() / 1000).unwrap_or(u32::MAX),
            // len ≤ payload < MAX_MDS < 65536.
            len: len as u16,
            retransmit,
        }
    }

    fn emit_retransmission(&mut self, now: Nanos, seq: u64, out: &mut [u8]) -> Option<usize> {
        let slot = self.buf.get_mut(seq)?;
        slot.last_sent = now;
        slot.sends += 1;
        let len = slot.len;
        let h = self.header(now, seq, len, true);
        let slot = self.buf.get_mut(seq)?;
        let n = write_datagram(&h, slot.payload(), out)?;
        self.count_sent(now, len, true);
        Some(n)
    }

    fn emit_new(
        &mut self,
        now: Nanos,
        out: &mut [u8],
        src: &(impl Source + ?Sized),
    ) -> io::Result<Option<usize>> {
        if !self.buf.has_queued() {
            let limit = self.window_end().saturating_sub(self.next_load);
            self.next_load +=
                self.buf
                    .reload(src, self.next_load, self.count, self.total, limit)?;
        }
        let Some((seq, len)) = self.buf.send_next(now).map(|slot| (slot.seq, slot.len)) else {
            return Ok(None);
        };
        let h = self.header(now, seq, len, false);
        let n = self
            .buf
            .get_mut(h.seq)
            .and_then(|slot| write_datagram(&h, slot.payload(), out));
        self.sent_high = self.sent_high.max(h.seq + 1);
        self.count_sent(now, usize::from(h.len), false);
        Ok(n)
    }

    fn count_sent(&mut self, now: Nanos, len: usize, retransmit: bool) {
        self.log.record(now, len as u64);
        self.stats.datagrams_sent += 1;
        self.stats.bytes_sent += len as u64;
        self.step.bytes += len as u64;
        if retransmit {
            self.stats.retransmits += 1;
            self.step.retransmitted += len as u64;
        }
    }

    /// Handles one datagram from the network (an ACK, or something to drop and count).
    pub fn handle_datagram(&mut self, now: Nanos, datagram: &[u8]) -> Verdict {
        self.handle_datagram_received(now, now, datagram)
    }

    /// [`handle_datagram`](Sender::handle_datagram) for a datagram that arrived at `arrived`
    /// (≤ `now`, e.g. the kernel's receive time): the RTT sample ends there, so how late the
    /// sending thread got round to the ACK does not count as path delay (queueing delay
    /// steers the rate, see `RmParams::max_queue`). Everything else happens at `now`.
    pub fn handle_datagram_received(
        &mut self,
        now: Nanos,
        arrived: Nanos,
        datagram: &[u8],
    ) -> Verdict {
        let parsed = match Datagram::parse(datagram) {
            Ok(d) => d,
            Err(e) => {
                self.stats.malformed += 1;
                return Verdict::Dropped(DropReason::Malformed(e));
            }
        };
        if parsed.session() != self.cfg.session {
            self.stats.foreign += 1;
            return Verdict::Dropped(DropReason::ForeignSession);
        }
        let Datagram::Ack(ack) = parsed else {
            self.stats.unexpected += 1;
            return Verdict::Dropped(DropReason::Unexpected);
        };
        let h = ack.header;
        // Serial-number comparison, so the 32-bit ACK counter may wrap.
        if self
            .last_ack_seq
            .is_some_and(|last| h.ack_seq.wrapping_sub(last) as i32 <= 0)
        {
            self.stats.stale += 1;
            return Verdict::Dropped(DropReason::Stale);
        }
        if h.high > self.sent_high || h.next_expected > self.count {
            self.stats.forged += 1;
            return Verdict::Dropped(DropReason::Forged);
        }
        self.last_ack_seq = Some(h.ack_seq);
        self.stats.acks += 1;
        let sample_us = ((arrived.min(now) / 1000) as u32)
            .wrapping_sub(h.echo_ts)
            .wrapping_sub(h.echo_delay_us);
        if sample_us < 60_000_000 {
            self.rtt
                .sample(now, (Nanos::from(sample_us) * 1000).max(self.cfg.min_rtt));
        }
        let before = (self.buf.outstanding(), self.peer_high);
        self.apply_ack(&ack);
        self.infer_tail_losses(now, &h);
        self.peer_interval = Nanos::from(h.interval_us) * 1000;
        self.step.goodput = h.goodput as f64;
        // The receiver's goodput window ended at the arrival of the echoed datagram, so the
        // window's datagrams were sent in the span of the same length before the echoed one.
        let echoed_send =
            now.saturating_sub(Nanos::from(((now / 1000) as u32).wrapping_sub(h.echo_ts)) * 1000);
        let span = Nanos::from(h.interval_us) * 1000;
        self.step.window_start = echoed_send.saturating_sub(span);
        self.step.offered = self
            .log
            .rate(self.step.window_start, echoed_send)
            .unwrap_or(0.0);
        self.step.occupancy = f64::from(h.occupancy_ppm) / 1e6;
        // Only an ACK that reports progress re-arms the RTO: repeated timeout ACKs from a
        // receiver that hears nothing must not keep a stalled sender from probing.
        if (self.buf.outstanding(), self.peer_high) != before || self.is_done() {
            self.backoff = 0;
            self.rto_deadline =
                (!self.is_done() && self.buf.outstanding() > 0).then(|| now + self.rto());
        }
        self.maybe_step(now);
        Verdict::Accepted
    }

    /// Acknowledges what the ACK reports received, queues its holes, and counts first
    /// transmissions newly reported lost or received for the controller.
    fn apply_ack(&mut self, ack: &Ack<'_>) {
        let h = ack.header;
        self.buf.ack_below(h.next_expected);
        let mut cursor = h.list_start;
        // A continuation ACK (list_start past next_expected) says nothing below list_start.
        let covered_from = if h.list_start > h.next_expected {
            self.peer_high.max(h.list_start)
        } else {
            self.peer_high
        };
        let mut lost = 0;
        for (start, end) in ack.losses() {
            for seq in cursor..start {
                self.buf.ack(seq);
            }
            for seq in start..end {
                self.queue_retransmission(seq);
            }
            lost += end.saturating_sub(start.max(covered_from));
            cursor = end;
        }
        // A truncated loss list says nothing past its last range.
        let known = if h.truncated { cursor } else { h.high };
        for seq in cursor..known {
            self.buf.ack(seq);
        }
        if known > covered_from {
            self.step.received += (known - covered_from).saturating_sub(lost);
            self.step.lost += lost;
        }
        self.peer_high = self.peer_high.max(known);
        self.peer_next = self.peer_next.max(h.next_expected);
    }

    /// Tail losses: datagrams above the receiver's highest that were sent well before the
    /// datagram whose timestamp the ACK echoes cannot still be in flight, so they are lost.
    /// (Holes below the highest are in the loss list; these are not.)
    fn infer_tail_losses(&mut self, now: Nanos, h: &crate::wire::AckHeader) {
        let ago = Nanos::from(((now / 1000) as u32).wrapping_sub(h.echo_ts)) * 1000;
        if h.truncated || ago > 60 * SECOND {
            return;
        }
        let echoed_send = now.saturating_sub(ago);
        let reorder = self.rtt.srtt() / 4;
        for seq in h.high..self.sent_high {
            let Some(slot) = self.buf.get_mut(seq) else {
                continue;
            };
            if slot.last_sent + reorder < echoed_send {
                self.queue_retransmission(seq);
            } else if slot.sends == 1 {
                // First transmissions go out in order: every later one is more recent.
                break;
            }
        }
    }

    fn queue_retransmission(&mut self, seq: u64) {
        if let Some(slot) = self.buf.get_mut(seq) {
            if !slot.queued {
                slot.queued = true;
                self.rtx.push_back(seq);
            }
        }
    }

    fn maybe_step(&mut self, now: Nanos) {
        let elapsed = now.saturating_sub(self.step.start);
        let samples = self.step.lost + self.step.received;
        // While probing, every ACK is a step: the probe's doubling is gated on the goodput
        // window having seen the current rate, and the bottleneck shows one ACK sooner.
        let min_elapsed = if self.rate.probing() {
            1
        } else {
            self.rtt.srtt()
        };
        // At a low rate (large datagrams, or a rate cut far down) `min_step_datagrams` would
        // take seconds per step and the controller could not climb back; a step also ends
        // after `LONG_STEP_RTTS` round trips (at least `LONG_STEP`) with `LONG_STEP_SAMPLES`.
        let long = elapsed >= (LONG_STEP_RTTS * self.rtt.srtt()).max(LONG_STEP)
            && samples >= LONG_STEP_SAMPLES;
        if elapsed < min_elapsed || (samples < self.cfg.min_step_datagrams && !long) {
            return;
        }
        let s = self.step;
        // Rates are measured in payload bytes; the controller's rate paces whole datagrams
        // (Eq. 1 with MDS), so they are scaled to datagram bytes to be comparable with it.
        let wire = self.cfg.mds as f64 / self.cfg.payload().max(1) as f64;
        let m = Measurement {
            send_rate: wire * s.bytes as f64 * SECOND as f64 / elapsed as f64,
            goodput: wire * s.goodput,
            offered_rate: wire * s.offered,
            retransmit_fraction: if s.bytes == 0 {
                0.0
            } else {
                s.retransmitted as f64 / s.bytes as f64
            },
            lost: s.lost,
            received: s.received,
            occupancy: s.occupancy,
            at_current_rate: s.offered > 0.0 && s.window_start >= self.rate_set,
            queue_delay: match self.rtt.min() {
                0 => 0.0,
                min => (self.rtt.srtt() as f64 / min as f64 - 1.0).max(0.0),
            },
        };
        let before = self.rate.rate();
        if self.rate.update(&m) != before {
            self.rate_set = now;
        }
        self.last = m;
        self.stats.control_steps += 1;
        self.step = Step {
            start: now,
            ..Step::default()
        };
    }
}

/// Writes header and payload into `out`, returning the datagram length.
fn write_datagram(h: &DataHeader, payload: &[u8], out: &mut [u8]) -> Option<usize> {
    let n = DATA_HEADER_LEN + payload.len();
    h.encode(out).ok()?;
    out.get_mut(DATA_HEADER_LEN..n)?.copy_from_slice(payload);
    Some(n)
}

#[cfg(test)]
mod tests;
