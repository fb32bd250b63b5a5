//! Streams: a byte stream whose length the sender fixes only when it ends (the data channels
//! of `haul profile`). The stream travels as a PLUT transfer of a virtual file of `STREAM_SPAN`
//! bytes. `finish` withholds every datagram past the bytes written, waits until the receiver
//! has acknowledged all of them in order, and then announces the length in an END datagram,
//! which the receiver answers with END_ACK once it has delivered that many bytes. END and
//! END_ACK belong to this IO layer, not to PLUT's wire format (whose datagrams start with
//! version 1): `tag 0xE5 | kind u8 (1 END, 2 END_ACK) | 0 u16 | session u64 | length u64`,
//! 20 bytes, big-endian.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use haul_plut::{Config, Nanos, ReceiverStats, SenderStats, Verdict};

use super::batch::{self, Clock, Woke};
use super::gro::RecvBatch;
use super::gso::SendBatch;
use super::{io_err, trace, wake_at, PlutError, Stats, Tuning};

/// Bytes of the virtual file a stream travels in: more than any stream sends.
const STREAM_SPAN: u64 = 1 << 60;
const END_TAG: u8 = 0xE5;
const END: u8 = 1;
const END_ACK: u8 = 2;
const END_LEN: usize = 20;

fn end_datagram(kind: u8, session: u64, len: u64) -> [u8; END_LEN] {
    let mut d = [0u8; END_LEN];
    d[0] = END_TAG;
    d[1] = kind;
    d[4..12].copy_from_slice(&session.to_be_bytes());
    d[12..20].copy_from_slice(&len.to_be_bytes());
    d
}

/// `(kind, length)` of an END / END_ACK datagram of `session`; `None` for anything else.
fn parse_end(d: &[u8], session: u64) -> Option<(u8, u64)> {
    let word = |at: usize| {
        d.get(at..at + 8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_be_bytes)
    };
    if d.len() != END_LEN
        || d[0] != END_TAG
        || !matches!(d[1], END | END_ACK)
        || d[2..4] != [0, 0]
        || word(4) != Some(session)
    {
        return None;
    }
    word(12).map(|len| (d[1], len))
}

/// The sending end of a PLUT stream. [`write`](StreamSender::write) sends the next bytes of
/// `src` (read at stream offsets; it must answer at any offset, as datagrams are loaded ahead of
/// what was written) and [`finish`](StreamSender::finish) ends the stream after them. The IO
/// runs in the calling thread, inside these calls.
pub struct StreamSender<S> {
    sock: UdpSocket,
    peer: SocketAddr,
    src: S,
    sender: haul_plut::Sender,
    cfg: Config,
    tuning: Tuning,
    clock: Clock,
    out: SendBatch,
    acks: RecvBatch,
    /// Bytes handed over by `write`.
    written: u64,
    /// Every datagram below this was acknowledged (from the ACKs the sender accepted).
    peer_next: u64,
    last_heard: Nanos,
    /// Clock and thread CPU time at the first `write` or `finish`.
    started: Option<(Nanos, f64)>,
    send_batches: u64,
    tr: trace::SendTrace,
}

impl<S: haul_plut::Source> StreamSender<S> {
    /// A stream to the receiver at `peer` over `sock` (which this call connects).
    pub fn new(
        sock: UdpSocket,
        peer: SocketAddr,
        src: S,
        cfg: &Config,
        tuning: &Tuning,
    ) -> Result<StreamSender<S>, PlutError> {
        sock.connect(peer)
            .map_err(io_err("connecting the data socket"))?;
        let mut acks = RecvBatch::new(&sock, cfg.mds, 64, false);
        acks.enable_timestamps(&sock);
        Ok(StreamSender {
            sender: haul_plut::Sender::new(cfg.clone(), STREAM_SPAN)?,
            out: SendBatch::new(&sock, cfg.mds, tuning.batch, tuning.offload),
            acks,
            sock,
            peer,
            src,
            cfg: cfg.clone(),
            tuning: tuning.clone(),
            clock: Clock::start(),
            written: 0,
            peer_next: 0,
            last_heard: 0,
            started: None,
            send_batches: 0,
            tr: trace::SendTrace::new(),
        })
    }

    /// The sender's counters.
    pub fn stats(&self) -> SenderStats {
        self.sender.stats()
    }

    /// The sender's smoothed RTT in nanoseconds (floored as [`config`](super::config) sets `min_rtt`).
    pub fn srtt(&self) -> Nanos {
        self.sender.srtt()
    }

    fn start(&mut self) {
        if self.started.is_none() {
            batch::tight_timer_slack();
            let now = self.clock.now();
            self.last_heard = now;
            self.started = Some((now, batch::thread_cpu()));
        }
    }

    /// Sends the next `n` bytes of the stream; returns once each has been sent at least once.
    pub fn write(&mut self, n: u64) -> Result<(), PlutError> {
        self.start();
        self.written += n;
        let need = self.cfg.datagrams(self.written);
        while self.first_sent() < need {
            self.turn(None, need)?;
        }
        Ok(())
    }

    /// Ends the stream after the bytes written: returns once the receiver has delivered every
    /// one of them and confirmed the length.
    pub fn finish(&mut self) -> Result<Stats, PlutError> {
        self.start();
        let last = self.cfg.datagrams(self.written);
        let mut announced: Option<Nanos> = None;
        loop {
            if self.peer_next < last {
                if self.turn(Some(last), u64::MAX)? {
                    break;
                }
                continue;
            }
            let now = self.clock.now();
            let every = self.sender.srtt().clamp(1_000_000, 100_000_000);
            if now >= announced.map_or(0, |t| t.saturating_add(every)) {
                // A lost END is repeated; a full socket buffer is not fatal either.
                let _ = self
                    .sock
                    .send(&end_datagram(END, self.cfg.session, self.written));
                announced = Some(now);
            }
            if self.drain(now)? {
                break;
            }
            self.check_idle(now)?;
            batch::readable(&self.sock, every).map_err(io_err("waiting for END_ACK"))?;
        }
        let (t0, cpu0) = self.started.unwrap_or_default();
        Ok(Stats {
            elapsed_s: self.clock.now().saturating_sub(t0) as f64 / 1e9,
            cpu_s: batch::thread_cpu() - cpu0,
            sender: Some(self.sender.stats()),
            receiver: None,
            send_batches: self.send_batches,
            gso: self.out.gso(),
            gro: false,
        })
    }

    /// Datagrams sent for the first time.
    fn first_sent(&self) -> u64 {
        let s = self.sender.stats();
        s.datagrams_sent - s.retransmits
    }

    /// Handles every ACK waiting; true if an END_ACK for the current length arrived.
    fn drain(&mut self, now: Nanos) -> Result<bool, PlutError> {
        let mut confirmed = false;
        loop {
            let n = self
                .acks
                .recv(&self.sock)
                .map_err(io_err("receiving ACKs"))?;
            let offset = if n > 0 {
                self.clock.realtime_offset()
            } else {
                0
            };
            for i in 0..n {
                let at = batch::arrival(self.acks.stamp(i), offset, now);
                let d = self.acks.get(i);
                if let Some((kind, len)) = parse_end(d, self.cfg.session) {
                    confirmed |= kind == END_ACK && len == self.written;
                    self.last_heard = now;
                } else if self.sender.handle_datagram_received(now, at, d) == Verdict::Accepted {
                    self.last_heard = now;
                    if let Ok(haul_plut::Datagram::Ack(a)) = haul_plut::Datagram::parse(d) {
                        self.peer_next = self.peer_next.max(a.header.next_expected);
                    }
                }
            }
            if !self.acks.full() {
                return Ok(confirmed);
            }
        }
    }

    fn check_idle(&self, now: Nanos) -> Result<(), PlutError> {
        if now.saturating_sub(self.last_heard) <= self.tuning.idle_timeout.as_nanos() as u64 {
            return Ok(());
        }
        let done = (self.peer_next * self.cfg.payload() as u64).min(self.written);
        Err(PlutError::Silent {
            peer: self.peer.to_string(),
            secs: self.tuning.idle_timeout.as_secs(),
            done,
            len: self.written,
        })
    }

    /// One pass of the IO loop of [`send`]: ACKs, the RTO, then a batch of DATA until `need`
    /// datagrams have gone out once (datagrams from `hold` on are withheld), or a paced wait.
    /// True if an END_ACK for the current length arrived.
    fn turn(&mut self, hold: Option<u64>, need: u64) -> Result<bool, PlutError> {
        let now = self.clock.now();
        self.tr
            .tick(now, &self.sender, self.cfg.mds, self.send_batches);
        if self.drain(now)? {
            return Ok(true);
        }
        self.check_idle(now)?;
        if self.sender.poll_timeout().is_some_and(|t| t <= now) {
            self.sender.handle_timeout(now);
        }
        let (mut n, mut first) = (0, self.first_sent());
        while n < self.out.capacity() && first < need {
            let Some(len) = self
                .sender
                .poll_transmit(now, self.out.slot(n), &self.src)
                .map_err(io_err("reading the source"))?
            else {
                break;
            };
            let (seq, retransmit) = match haul_plut::Datagram::parse(&self.out.slot(n)[..len]) {
                Ok(haul_plut::Datagram::Data(h, _)) => (h.seq, h.retransmit),
                _ => continue,
            };
            first += u64::from(!retransmit);
            if hold.is_some_and(|h| seq >= h) {
                continue;
            }
            self.out.set_len(n, len);
            n += 1;
        }
        if n > 0 {
            self.send_batches += self
                .out
                .send(&self.sock, n)
                .map_err(io_err("sending DATA"))?;
            return Ok(false);
        }
        if first >= need {
            return Ok(false);
        }
        // Paced as in `send`: wake when a batch worth `batch_period` is due, at the RTO, or
        // when an ACK arrives.
        let Some(next) = self.sender.poll_timeout() else {
            batch::readable(&self.sock, 10_000_000).map_err(io_err("waiting for ACKs"))?;
            return Ok(false);
        };
        let deadline = wake_at(
            &self.sender,
            &self.cfg,
            &self.tuning,
            self.out.segments(),
            now,
            next,
        );
        if batch::wait(
            &self.sock,
            &self.clock,
            deadline,
            self.tuning.spin.as_nanos() as u64,
        )
        .map_err(io_err("pacing"))?
            == Woke::Deadline
        {
            self.tr.woke(deadline, self.clock.now());
        }
        Ok(false)
    }
}

/// What [`StreamReceiver::poll`] saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamPoll {
    /// Stream bytes delivered in order so far. Until the END the last datagram's bytes may lie
    /// past the stream's end, so up to a payload less one byte is held back; never more than
    /// the announced length. It never decreases.
    pub delivered: u64,
    /// The sender ended the stream and every byte of it was delivered.
    pub ended: bool,
}

/// The receiving end of a PLUT stream: [`poll`](StreamReceiver::poll) writes what arrives to
/// `sink` in order at stream offsets, until the sender's END. It accepts datagrams only from
/// the first address that sends a valid datagram of its session.
pub struct StreamReceiver<K> {
    sock: UdpSocket,
    sink: K,
    recv: haul_plut::Receiver,
    session: u64,
    payload: u64,
    clock: Clock,
    inb: RecvBatch,
    ack: Vec<u8>,
    peer: Option<SocketAddr>,
    foreign_src: u64,
    end: Option<u64>,
    ended: bool,
    /// The wait between batches ([`Tuning::receive_nap`]).
    napper: batch::Napper,
    tr: trace::RecvTrace,
}

impl<K: haul_plut::Sink> StreamReceiver<K> {
    /// A receiver on the bound socket `sock`.
    pub fn new(
        sock: UdpSocket,
        sink: K,
        cfg: &Config,
        tuning: &Tuning,
    ) -> Result<StreamReceiver<K>, PlutError> {
        let mut inb = RecvBatch::new(&sock, cfg.mds, tuning.batch.max(8), tuning.offload);
        inb.enable_timestamps(&sock);
        Ok(StreamReceiver {
            recv: haul_plut::Receiver::new(cfg.clone(), STREAM_SPAN)?,
            inb,
            ack: vec![0u8; cfg.mds],
            session: cfg.session,
            payload: cfg.payload() as u64,
            clock: Clock::start(),
            sock,
            sink,
            peer: None,
            foreign_src: 0,
            end: None,
            ended: false,
            napper: batch::Napper::new(tuning.receive_nap),
            tr: trace::RecvTrace::new(),
        })
    }

    /// The receiver's counters (datagrams from other addresses counted as foreign).
    pub fn stats(&self) -> ReceiverStats {
        let mut s = self.recv.stats();
        s.foreign += self.foreign_src;
        s
    }

    /// The sink.
    pub fn sink(&self) -> &K {
        &self.sink
    }

    fn progress(&self) -> StreamPoll {
        let d = self.recv.stats().delivered;
        let delivered = match self.end {
            Some(len) => d.min(len),
            None => d.saturating_sub(self.payload - 1),
        };
        StreamPoll {
            delivered,
            ended: self.ended,
        }
    }

    fn lock_peer(&mut self, from: Option<SocketAddr>) -> Result<(), PlutError> {
        if let (None, Some(addr)) = (self.peer, from) {
            self.sock
                .connect(addr)
                .map_err(io_err("connecting the data socket"))?;
            self.peer = Some(addr);
        }
        Ok(())
    }

    /// Receives until more bytes are delivered, the stream ends, or `wait` passes.
    pub fn poll(&mut self, wait: Duration) -> Result<StreamPoll, PlutError> {
        let before = self.progress();
        let deadline = self.clock.now().saturating_add(wait.as_nanos() as u64);
        while !self.ended {
            let now = self.clock.now();
            self.tr.tick(now, &self.recv, self.payload as usize);
            let n = self
                .inb
                .recv(&self.sock)
                .map_err(io_err("receiving DATA"))?;
            let offset = if n > 0 {
                self.clock.realtime_offset()
            } else {
                0
            };
            let mut asked = false;
            for i in 0..n {
                let from = self.inb.source(i);
                if self.peer.is_some() && from != self.peer {
                    self.foreign_src += 1;
                    continue;
                }
                if let Some((END, len)) = parse_end(self.inb.get(i), self.session) {
                    self.lock_peer(from)?;
                    self.end = Some(len);
                    asked = true;
                    continue;
                }
                let at = batch::arrival(self.inb.stamp(i), offset, now);
                self.tr.arrived(at, now, self.inb.stamp(i).is_some());
                let v = self
                    .recv
                    .handle_datagram(at, self.inb.get(i), &mut self.sink)
                    .map_err(io_err("writing the sink"))?;
                if matches!(v, Verdict::Accepted | Verdict::Duplicate) {
                    self.lock_peer(from)?;
                }
            }
            if self.recv.poll_timeout().is_some_and(|t| t <= now) {
                self.recv.handle_timeout(now);
            }
            while let Some(m) =
                self.recv
                    .poll_transmit(now, &mut self.ack)
                    .map_err(|e| PlutError::Io {
                        what: "encoding an ACK",
                        source: io::Error::other(e.to_string()),
                    })?
            {
                if self.peer.is_some() {
                    // A lost ACK is recovered by the protocol; a full buffer is not fatal.
                    let _ = self.sock.send(&self.ack[..m]);
                }
            }
            if let Some(len) = self
                .end
                .filter(|&len| asked && self.recv.stats().delivered >= len)
            {
                for _ in 0..3 {
                    let _ = self.sock.send(&end_datagram(END_ACK, self.session, len));
                }
                self.ended = true;
            }
            if self.progress().delivered > before.delivered || now >= deadline {
                break;
            }
            if self.inb.full() {
                continue;
            }
            let wake = self
                .recv
                .poll_timeout()
                .map_or(10_000_000, |t| t.saturating_sub(now).max(1));
            let wake = wake.min(deadline - now).min(10_000_000);
            self.napper
                .wait(&self.sock, now, n, wake)
                .map_err(io_err("waiting for DATA"))?;
        }
        Ok(self.progress())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plut::{bind, config, DEFAULT_MDS};

    /// Byte `o` of the stream is `o % 251`, at any offset.
    struct Pattern;

    impl haul_plut::Source for Pattern {
        fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
            for (i, b) in buf.iter_mut().enumerate() {
                *b = ((offset + i as u64) % 251) as u8;
            }
            Ok(buf.len())
        }
    }

    #[test]
    fn a_stream_ends_exactly_where_the_sender_finished() {
        let tuning = Tuning {
            idle_timeout: Duration::from_secs(5),
            ..Tuning::default()
        };
        let cfg = config(0x5eed, DEFAULT_MDS, 250e6, 16 << 20);
        let rx = bind(SocketAddr::from(([127, 0, 0, 1], 0)), &tuning).expect("bind");
        let addr = rx.local_addr().expect("address");
        let mut receiver = StreamReceiver::new(rx, Vec::new(), &cfg, &tuning).expect("receiver");
        let len = (3 << 20) + 12_345u64;
        let (c, t) = (cfg.clone(), tuning.clone());
        let sender = std::thread::spawn(move || {
            let tx = bind(SocketAddr::from(([127, 0, 0, 1], 0)), &t).expect("bind");
            let mut s = StreamSender::new(tx, addr, Pattern, &c, &t)?;
            let mut left = len;
            while left > 0 {
                let n = left.min(100_000);
                s.write(n)?;
                left -= n;
            }
            s.finish()
        });
        let give_up = std::time::Instant::now() + Duration::from_secs(20);
        let mut seen = StreamPoll {
            delivered: 0,
            ended: false,
        };
        while !seen.ended {
            assert!(
                std::time::Instant::now() < give_up,
                "stream stalled at {} of {len} bytes",
                seen.delivered
            );
            seen = receiver.poll(Duration::from_millis(200)).expect("poll");
        }
        let stats = sender.join().expect("sender thread").expect("send");
        assert_eq!(
            seen.delivered, len,
            "the receiver counts exactly the bytes written"
        );
        let got = receiver.sink();
        assert!(
            got.len() as u64 >= len && (got.len() as u64) < len + cfg.payload() as u64,
            "nothing past the last datagram was sent"
        );
        assert!(
            got.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8),
            "every byte arrived intact, in order"
        );
        assert!(stats
            .sender
            .is_some_and(|s| s.datagrams_sent >= cfg.datagrams(len)));
    }
}
