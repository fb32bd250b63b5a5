//! The PLUT receiver state machine (004 §V-A.2, Fig. 12). It validates DATA datagrams against
//! the session and the file, hands them to the check list's in-order writer, measures goodput
//! per ACK interval, and acknowledges: every I·RTT an NXT (no holes) or RXM (with the loss
//! list) if anything arrived, and after an idle timeout a TNT or TMO. I adapts by SPSA
//! (Eqs. 4–5 of 004). Once the file is complete it answers every further datagram with a final
//! NXT, so a sender whose last ACKs were lost still finishes.

use crate::checklist::{CheckList, Insert};
use crate::config::{Config, ConfigError};
use crate::control::AckSpsa;
use crate::stats::{DropReason, ReceiverStats, Verdict};
use crate::wire::{encode_ack, max_ranges, AckHeader, AckKind, DataHeader, Datagram, WireError};
use crate::{Nanos, Sink, SECOND};
use std::io;

/// The receiving end of one PLUT session.
#[derive(Debug)]
pub struct Receiver {
    cfg: Config,
    total: u64,
    count: u64,
    list: CheckList,
    spsa: AckSpsa,
    rtt: Nanos,
    /// Next periodic ACK, once the first datagram arrived.
    next_ack: Option<Nanos>,
    /// Deadline of the idle timeout (TNT/TMO).
    idle_deadline: Option<Nanos>,
    /// Datagrams accepted since the last periodic ACK.
    fresh: bool,
    interval_start: Nanos,
    interval_bytes: u64,
    /// Start of the current goodput window: the arrival of the datagram the last ACK echoed.
    window_start: Nanos,
    /// A datagram arrived since the last ACK.
    arrived: bool,
    /// Timestamp and arrival time of the newest DATA datagram.
    echo: (u32, Nanos),
    ack_seq: u32,
    pending: Option<AckKind>,
    /// The rest of a loss list split over several ACKs: (timeout kind, list start, datagrams left).
    continuation: Option<(bool, u64, usize)>,
    /// Goodput measured at the last ACK, bytes/s, and the window it was measured over.
    goodput: u64,
    goodput_window: Nanos,
    losses: Vec<(u64, u64)>,
    /// The file's last datagram has arrived: what is missing is all the sender has left.
    tail: bool,
    stats: ReceiverStats,
}

impl Receiver {
    /// A receiver for a file of `total` bytes.
    pub fn new(cfg: Config, total: u64) -> Result<Receiver, ConfigError> {
        cfg.validate()?;
        let list = CheckList::new(cfg.payload(), cfg.window);
        let count = cfg.datagrams(total);
        Ok(Receiver {
            spsa: AckSpsa::new(cfg.ack_interval),
            rtt: cfg.initial_rtt,
            list,
            count,
            total,
            cfg,
            next_ack: None,
            idle_deadline: None,
            fresh: false,
            interval_start: 0,
            interval_bytes: 0,
            window_start: 0,
            arrived: false,
            echo: (0, 0),
            ack_seq: 0,
            pending: None,
            continuation: None,
            goodput: 0,
            goodput_window: 0,
            losses: Vec::new(),
            tail: false,
            stats: ReceiverStats::default(),
        })
    }

    /// True once every byte has been written to the sink.
    pub fn is_complete(&self) -> bool {
        self.list.next_expected() >= self.count
    }

    /// Counters.
    pub fn stats(&self) -> ReceiverStats {
        self.stats
    }

    /// The current ACK interval, RTTs.
    pub fn ack_interval(&self) -> f64 {
        self.spsa.interval()
    }

    fn interval_ns(&self) -> Nanos {
        (self.spsa.interval() * self.rtt as f64).max(1.0) as Nanos
    }

    fn ack_timeout(&self) -> Nanos {
        ((self.cfg.ack_timeout_rtts * self.rtt as f64) as Nanos).max(self.cfg.min_ack_timeout)
    }

    /// Handles one datagram from the network, writing any data now in order to `sink`.
    /// Only a sink error is an error; bad datagrams are dropped, counted and reported.
    pub fn handle_datagram(
        &mut self,
        now: Nanos,
        datagram: &[u8],
        sink: &mut (impl Sink + ?Sized),
    ) -> io::Result<Verdict> {
        let parsed = match Datagram::parse(datagram) {
            Ok(d) => d,
            Err(e) => return Ok(self.drop(DropReason::Malformed(e))),
        };
        if parsed.session() != self.cfg.session {
            return Ok(self.drop(DropReason::ForeignSession));
        }
        let Datagram::Data(h, payload) = parsed else {
            return Ok(self.drop(DropReason::Unexpected));
        };
        if !self.plausible(&h, payload.len()) {
            return Ok(self.drop(DropReason::Forged));
        }
        if self.is_complete() {
            self.stats.duplicates += 1;
            self.pending = Some(AckKind::Nxt);
            return Ok(Verdict::Duplicate);
        }
        let verdict = match self.list.insert(h.seq, payload, sink)? {
            Insert::Duplicate => {
                self.stats.duplicates += 1;
                Verdict::Duplicate
            }
            Insert::OutOfWindow => return Ok(self.drop(DropReason::OutOfWindow)),
            Insert::New => {
                self.stats.accepted += 1;
                self.interval_bytes += payload.len() as u64;
                Verdict::Accepted
            }
        };
        self.stats.delivered =
            (self.list.next_expected() * self.cfg.payload() as u64).min(self.total);
        if h.rtt_us > 0 {
            let rtt = Nanos::from(h.rtt_us) * 1000;
            let shrank = rtt < self.rtt;
            self.rtt = rtt;
            // The first interval was timed with the sender's initial RTT guess; once the
            // sender has measured a shorter one, the pending ACK comes no later than it says.
            if shrank {
                let due = self.interval_start + self.interval_ns();
                self.next_ack = self.next_ack.map(|t| t.min(due.max(now)));
            }
        }
        self.echo = (h.timestamp, now);
        self.fresh = true;
        self.arrived = true;
        self.idle_deadline = Some(now + self.ack_timeout());
        if self.next_ack.is_none() {
            self.interval_start = now;
            self.window_start = now;
            self.next_ack = Some(now + self.interval_ns());
        }
        // In the tail (the last datagram arrived) the sender has nothing new to send: it waits
        // for the loss report, so that comes within a quarter RTT of each arrival rather than
        // a whole ACK interval (up to 1.5 RTT) later, at every round of retransmission.
        self.tail |= h.seq + 1 == self.count;
        if self.tail {
            let soon = now + self.rtt / 4;
            self.next_ack = Some(self.next_ack.map_or(soon, |t| t.min(soon)));
        }
        if self.is_complete() {
            self.pending = Some(AckKind::Nxt);
            self.next_ack = None;
            self.idle_deadline = None;
        }
        Ok(verdict)
    }

    /// A DATA header is plausible when its sequence number exists in this file and its offset
    /// and length are exactly the ones that sequence number has.
    fn plausible(&self, h: &DataHeader, len: usize) -> bool {
        let payload = self.cfg.payload() as u64;
        if h.seq >= self.count {
            return false;
        }
        let offset = h.seq * payload;
        let expect = (self.total - offset).min(payload);
        h.offset == offset && len as u64 == expect
    }

    fn drop(&mut self, reason: DropReason) -> Verdict {
        let s = &mut self.stats;
        match reason {
            DropReason::Malformed(_) => s.malformed += 1,
            DropReason::ForeignSession => s.foreign += 1,
            DropReason::Forged => s.forged += 1,
            DropReason::OutOfWindow => s.out_of_window += 1,
            DropReason::Unexpected | DropReason::Stale => s.unexpected += 1,
        }
        Verdict::Dropped(reason)
    }

    /// When the receiver next needs [`Receiver::handle_timeout`].
    pub fn poll_timeout(&self) -> Option<Nanos> {
        match (self.next_ack, self.idle_deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Fires due timers: the periodic ACK and the idle timeout.
    pub fn handle_timeout(&mut self, now: Nanos) {
        if self.next_ack.is_some_and(|t| t <= now) {
            if self.fresh {
                self.pending = Some(self.periodic_kind());
                self.fresh = false;
            }
            self.next_ack = Some(now + self.interval_ns());
        }
        if self.idle_deadline.is_some_and(|t| t <= now) {
            let holes = self.list.high() > self.list.next_expected();
            self.pending = Some(AckKind::select(true, holes));
            self.idle_deadline = Some(now + self.ack_timeout());
        }
    }

    fn periodic_kind(&self) -> AckKind {
        AckKind::select(false, self.list.high() > self.list.next_expected())
    }

    /// Writes the next ACK datagram, if one is due, into `buf` and returns its length. A loss
    /// list too long for one datagram continues in up to `max_ack_datagrams` datagrams; call
    /// this until it returns `None`.
    pub fn poll_transmit(
        &mut self,
        now: Nanos,
        buf: &mut [u8],
    ) -> Result<Option<usize>, WireError> {
        let (timeout, from, left) = match (self.continuation.take(), self.pending.take()) {
            (Some(c), _) => c,
            (None, Some(kind)) => {
                self.measure_goodput(now, kind);
                let timeout = matches!(kind, AckKind::Tnt | AckKind::Tmo);
                (
                    timeout,
                    self.list.next_expected(),
                    self.cfg.max_ack_datagrams.max(1),
                )
            }
            (None, None) => return Ok(None),
        };
        let (next, high) = (
            self.list.next_expected(),
            self.list.high().max(self.list.next_expected()),
        );
        let list_start = from.clamp(next, high);
        let max = max_ranges(buf.len().min(self.cfg.mds));
        let truncated = self.list.holes(list_start, &mut self.losses, max);
        let kind = AckKind::select(timeout, !self.losses.is_empty());
        self.ack_seq = self.ack_seq.wrapping_add(1);
        let header = AckHeader {
            session: self.cfg.session,
            kind,
            ack_seq: self.ack_seq,
            next_expected: next,
            high,
            goodput: self.goodput,
            echo_ts: self.echo.0,
            echo_delay_us: u32::try_from(now.saturating_sub(self.echo.1) / 1000)
                .unwrap_or(u32::MAX),
            interval_us: u32::try_from(self.goodput_window / 1000).unwrap_or(u32::MAX),
            occupancy_ppm: (self.list.occupancy() * 1e6) as u32,
            truncated,
            list_start,
        };
        let n = encode_ack(&header, &self.losses, buf)?;
        if let (true, Some(&(_, end))) = (truncated && left > 1, self.losses.last()) {
            self.continuation = Some((timeout, end, left - 1));
        }
        self.stats.acks += 1;
        if timeout {
            self.stats.timeout_acks += 1;
        }
        Ok(Some(n))
    }

    /// Closes the goodput measurement interval at an ACK; periodic ACKs also step the SPSA.
    /// The window ends at the arrival of the newest datagram (the one the ACK echoes), not at
    /// the ACK: with arrival times from the kernel, how late the receiving thread got round
    /// to the datagrams and to the ACK does not move the window, and the sender lines up
    /// exactly the span it sent them in.
    fn measure_goodput(&mut self, now: Nanos, kind: AckKind) {
        let end = if self.arrived {
            self.echo.1.max(self.window_start)
        } else {
            now
        };
        let elapsed = end.saturating_sub(self.window_start);
        self.goodput_window = elapsed;
        self.goodput = if elapsed > 0 {
            (u128::from(self.interval_bytes) * u128::from(SECOND) / u128::from(elapsed)) as u64
        } else {
            0
        };
        if matches!(kind, AckKind::Nxt | AckKind::Rxm) && elapsed > 0 && !self.is_complete() {
            // Eqs. 4–5 of 004: one goodput measurement per ACK interval drives I.
            self.spsa.update(self.goodput as f64);
        }
        self.interval_start = now;
        self.window_start = end;
        self.interval_bytes = 0;
        self.arrived = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{DataHeader, Datagram, DATA_HEADER_LEN};

    #[test]
    fn the_goodput_window_ends_at_the_newest_arrival_not_at_the_ack() {
        let cfg = Config::default();
        let payload = cfg.payload();
        let total = 1000 * payload as u64;
        let mut r = Receiver::new(cfg.clone(), total).expect("config");
        let mut sink = Vec::new();
        let mut buf = vec![0u8; cfg.mds];
        let ms = 1_000_000;
        // 51 datagrams 1 ms apart (0..=50 ms), the first ACK interval being 110 ms (1.1 RTT).
        for seq in 0..=50u64 {
            let h = DataHeader {
                session: 0,
                seq,
                offset: seq * payload as u64,
                timestamp: (seq * 1000) as u32,
                rtt_us: 100_000,
                len: payload as u16,
                retransmit: false,
            };
            h.encode(&mut buf).expect("encode");
            let n = DATA_HEADER_LEN + payload;
            assert_eq!(
                r.handle_datagram(seq * ms, &buf[..n], &mut sink)
                    .expect("sink"),
                Verdict::Accepted
            );
        }
        // The receiving thread gets to the ACK late, at 200 ms.
        r.handle_timeout(200 * ms);
        let n = r
            .poll_transmit(200 * ms, &mut buf)
            .expect("ack")
            .expect("an ACK is due");
        let Ok(Datagram::Ack(ack)) = Datagram::parse(&buf[..n]) else {
            panic!("not an ACK")
        };
        // The window is the 50 ms from the first to the newest arrival, whatever the ACK's time.
        assert_eq!(ack.header.interval_us, 50_000);
        let expect = 51 * payload as u64 * 1000 / 50;
        assert_eq!(ack.header.goodput, expect);
        assert_eq!(ack.header.echo_ts, 50_000);
        assert_eq!(ack.header.echo_delay_us, 150_000);
    }

    /// Once the file's last datagram has arrived with holes before it, the loss report is due
    /// within a quarter RTT, not at the end of the ACK interval.
    #[test]
    fn the_tail_is_reported_within_a_quarter_rtt() {
        let cfg = Config::default();
        let payload = cfg.payload();
        let total = 100 * payload as u64;
        let mut r = Receiver::new(cfg.clone(), total).expect("config");
        let mut sink = Vec::new();
        let mut buf = vec![0u8; cfg.mds];
        let ms = 1_000_000;
        let mut send = |r: &mut Receiver, seq: u64, at: u64| {
            let h = DataHeader {
                session: 0,
                seq,
                offset: seq * payload as u64,
                timestamp: 0,
                rtt_us: 100_000,
                len: payload as u16,
                retransmit: false,
            };
            h.encode(&mut buf).expect("encode");
            r.handle_datagram(at, &buf[..DATA_HEADER_LEN + payload], &mut sink)
                .expect("sink");
        };
        // Datagram 50 is lost; 0..=98 arrive 0.1 ms apart.
        for seq in (0..99u64).filter(|&s| s != 50) {
            send(&mut r, seq, seq * ms / 10);
        }
        let before_tail = r.poll_timeout().expect("an ACK is scheduled");
        assert!(before_tail >= 100 * ms, "a whole interval before the tail");
        send(&mut r, 99, 10 * ms);
        let due = r.poll_timeout().expect("an ACK is scheduled");
        assert!(due <= 10 * ms + 25 * ms, "due at {due} ns");
        r.handle_timeout(due);
        let n = r.poll_transmit(due, &mut buf).expect("ack").expect("due");
        assert!(matches!(Datagram::parse(&buf[..n]), Ok(Datagram::Ack(_))));
        assert!(!r.is_complete());
    }
}
