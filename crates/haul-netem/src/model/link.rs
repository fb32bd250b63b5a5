//! One direction of a link: drop-tail queue in front of a rate limiter (serialization delay),
//! wire loss, propagation delay with jitter, reordering, duplication and cross traffic.
//!
//! The rate limiter is a token bucket one packet deep: a packet departs when the previous one
//! has finished serializing, after `len / rate` seconds. The queue is virtual: it holds the
//! departure times of packets still being serialized, so its occupancy is exact.

use std::collections::VecDeque;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use super::cross::CrossGen;
use super::loss::LossState;
use super::{ns, NS};
use crate::params::{DirParams, QueueLimit};

/// Why a packet was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropCause {
    /// The drop-tail queue was full.
    Queue,
    /// The loss model lost it on the wire.
    Loss,
}

/// What happens to a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Dropped.
    Drop(DropCause),
    /// Delivered at the first time; the second is the duplicate's delivery time, if any.
    Deliver(u64, Option<u64>),
}

/// Counters of one direction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DirStats {
    /// Packets that arrived at the link.
    pub rx_packets: u64,
    /// Bytes that arrived at the link.
    pub rx_bytes: u64,
    /// Packets scheduled for delivery (duplicates included).
    pub tx_packets: u64,
    /// Bytes scheduled for delivery.
    pub tx_bytes: u64,
    /// Packets dropped because the queue was full.
    pub drop_queue: u64,
    /// Packets dropped by the loss model.
    pub drop_loss: u64,
    /// Extra copies delivered.
    pub duplicated: u64,
    /// Packets held back to be overtaken.
    pub reordered: u64,
    /// Highest queue occupancy seen, bytes.
    pub max_queue_bytes: u64,
    /// Highest queue occupancy seen, packets.
    pub max_queue_packets: u64,
    /// Synthetic cross-traffic packets that entered the queue.
    pub cross_packets: u64,
    /// Synthetic cross-traffic bytes that entered the queue.
    pub cross_bytes: u64,
    /// Synthetic cross-traffic packets dropped by the full queue.
    pub cross_drops: u64,
}

/// The state machine of one direction of a link.
#[derive(Debug)]
pub struct DirModel {
    params: DirParams,
    queue_limit: QueueBound,
    rng: StdRng,
    /// Departure times and sizes of packets still in the queue (being serialized or waiting).
    queue: VecDeque<(u64, u32)>,
    queue_bytes: u64,
    busy_until: u64,
    last_release: u64,
    loss: LossState,
    cross: Option<CrossGen>,
    stats: DirStats,
}

#[derive(Clone, Copy, Debug)]
enum QueueBound {
    Bytes(u64),
    Packets(u64),
}

/// Resolves the queue bound: `Bdp` is rate × `rtt`, at least 16 packets of `mtu`.
fn bound(p: &DirParams, rtt: f64, mtu: u32) -> QueueBound {
    match p.queue {
        QueueLimit::Bytes(b) => QueueBound::Bytes(b),
        QueueLimit::Packets(n) => QueueBound::Packets(n),
        QueueLimit::Bdp => {
            let bdp = p.rate.map_or(u64::MAX, |r| (r * rtt) as u64);
            QueueBound::Bytes(bdp.max(16 * mtu as u64))
        }
    }
}

impl DirModel {
    /// A model for `params`; `rtt` and `mtu` size the default (one BDP) queue.
    pub fn new(params: DirParams, rtt: f64, mtu: u32, seed: u64) -> Self {
        DirModel {
            queue_limit: bound(&params, rtt, mtu),
            loss: LossState::new(params.loss),
            params,
            rng: StdRng::seed_from_u64(seed),
            queue: VecDeque::new(),
            queue_bytes: 0,
            busy_until: 0,
            last_release: 0,
            cross: None,
            stats: DirStats::default(),
        }
    }

    /// The current parameters.
    pub fn params(&self) -> &DirParams {
        &self.params
    }

    /// The counters so far.
    pub fn stats(&self) -> DirStats {
        self.stats
    }

    /// The queue bound in bytes (`None` when bounded in packets).
    pub fn queue_limit_bytes(&self) -> Option<u64> {
        match self.queue_limit {
            QueueBound::Bytes(b) => Some(b),
            QueueBound::Packets(_) => None,
        }
    }

    /// Changes the parameters on a running link; queue contents and counters are kept.
    pub fn set_params(&mut self, params: DirParams, rtt: f64, mtu: u32) {
        self.queue_limit = bound(&params, rtt, mtu);
        if params.loss != self.loss.model() {
            self.loss = LossState::new(params.loss);
        }
        if params.cross != self.params.cross {
            self.cross = None;
        }
        self.params = params;
    }

    fn drain(&mut self, now: u64) {
        while let Some(&(dep, len)) = self.queue.front() {
            if dep > now {
                break;
            }
            self.queue.pop_front();
            self.queue_bytes -= len as u64;
        }
    }

    /// Admits a packet of `len` bytes arriving at `now` to the queue; returns its departure time.
    fn enqueue(&mut self, len: u32, now: u64) -> Option<u64> {
        self.drain(now);
        let fits = match self.queue_limit {
            QueueBound::Bytes(b) => self.queue_bytes + len as u64 <= b,
            QueueBound::Packets(n) => (self.queue.len() as u64) < n,
        };
        if !fits {
            return None;
        }
        let rate = self.params.rate?;
        let start = self.busy_until.max(now);
        let dep = start + ((len as f64 / rate) * NS).round() as u64;
        self.busy_until = dep;
        self.queue.push_back((dep, len));
        self.queue_bytes += len as u64;
        self.stats.max_queue_bytes = self.stats.max_queue_bytes.max(self.queue_bytes);
        self.stats.max_queue_packets = self.stats.max_queue_packets.max(self.queue.len() as u64);
        Some(dep)
    }

    /// Feeds the cross-traffic packets that arrived up to `now` into the queue.
    fn run_cross(&mut self, now: u64) {
        let cfg = self.params.cross;
        if cfg.sources == 0 || self.params.rate.is_none() {
            return;
        }
        let mut gen = match self.cross.take() {
            Some(g) => g,
            None => CrossGen::new(cfg, now, &mut self.rng),
        };
        while let Some((t, len)) = gen.next_before(now, &mut self.rng) {
            if self.enqueue(len, t).is_some() {
                self.stats.cross_packets += 1;
                self.stats.cross_bytes += len as u64;
            } else {
                self.stats.cross_drops += 1;
            }
        }
        self.cross = Some(gen);
    }

    /// Decides the fate of a packet of `len` bytes arriving at `now`.
    pub fn on_packet(&mut self, len: usize, now: u64) -> Verdict {
        let len32 = len as u32;
        self.stats.rx_packets += 1;
        self.stats.rx_bytes += len as u64;
        self.run_cross(now);
        let departure = if self.params.rate.is_some() {
            match self.enqueue(len32, now) {
                Some(d) => d,
                None => {
                    self.stats.drop_queue += 1;
                    return Verdict::Drop(DropCause::Queue);
                }
            }
        } else {
            now
        };
        if self.loss.lose(&mut self.rng) {
            self.stats.drop_loss += 1;
            return Verdict::Drop(DropCause::Loss);
        }
        let p = &self.params;
        let mut delay = p.delay;
        if p.jitter > 0.0 {
            delay = (delay + self.rng.gen_range(-p.jitter..=p.jitter)).max(0.0);
        }
        let mut release = (departure + ns(delay)).max(self.last_release);
        if p.reorder > 0.0 && self.rng.gen::<f64>() < p.reorder {
            self.stats.reordered += 1;
            release += ns(p.reorder_gap);
        } else {
            self.last_release = release;
        }
        self.stats.tx_packets += 1;
        self.stats.tx_bytes += len as u64;
        let dup = if p.duplicate > 0.0 && self.rng.gen::<f64>() < p.duplicate {
            self.stats.duplicated += 1;
            self.stats.tx_packets += 1;
            self.stats.tx_bytes += len as u64;
            Some(release)
        } else {
            None
        };
        Verdict::Deliver(release, dup)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::{CrossTraffic, LossModel};

    const MS: u64 = 1_000_000;

    fn model(p: DirParams) -> DirModel {
        DirModel::new(p, 0.1, 1500, 42)
    }

    #[test]
    fn delay_only_is_exact() {
        let mut m = model(DirParams {
            delay: 0.05,
            ..Default::default()
        });
        assert_eq!(m.on_packet(1000, 7), Verdict::Deliver(7 + 50 * MS, None));
    }

    #[test]
    fn serialization_spaces_packets_at_the_rate() {
        // 1500 bytes at 1.5 MB/s = 1 ms each.
        let mut m = model(DirParams {
            rate: Some(1.5e6),
            delay: 0.01,
            ..Default::default()
        });
        let t: Vec<u64> = (0..3)
            .map(|_| match m.on_packet(1500, 0) {
                Verdict::Deliver(t, _) => t,
                v => panic!("{v:?}"),
            })
            .collect();
        assert_eq!(t, vec![11 * MS, 12 * MS, 13 * MS]);
        assert_eq!(m.stats().max_queue_packets, 3);
    }

    #[test]
    fn drop_tail_queue_limits_bytes_and_packets() {
        let mut m = model(DirParams {
            rate: Some(1.5e6),
            queue: QueueLimit::Bytes(3000),
            ..Default::default()
        });
        let v: Vec<Verdict> = (0..3).map(|_| m.on_packet(1500, 0)).collect();
        assert_eq!(v[2], Verdict::Drop(DropCause::Queue));
        // After one serialization time the first has left and one more fits.
        assert!(matches!(m.on_packet(1500, MS), Verdict::Deliver(..)));
        let mut m = model(DirParams {
            rate: Some(1.5e6),
            queue: QueueLimit::Packets(1),
            ..Default::default()
        });
        assert!(matches!(m.on_packet(100, 0), Verdict::Deliver(..)));
        assert_eq!(m.on_packet(100, 0), Verdict::Drop(DropCause::Queue));
        assert_eq!(m.stats().drop_queue, 1);
    }

    #[test]
    fn default_queue_is_one_bdp() {
        let m = DirModel::new(
            DirParams {
                rate: Some(125e6),
                ..Default::default()
            },
            0.1,
            1500,
            1,
        );
        assert_eq!(m.queue_limit_bytes(), Some(12_500_000));
        let m = DirModel::new(
            DirParams {
                rate: Some(125e6),
                ..Default::default()
            },
            0.0,
            9000,
            1,
        );
        assert_eq!(m.queue_limit_bytes(), Some(144_000));
    }

    #[test]
    fn overload_delivers_at_the_rate() {
        // Offer 110% of 1 MB/s for 10 s; delivered bytes over the period match the rate.
        let mut m = model(DirParams {
            rate: Some(1e6),
            queue: QueueLimit::Bytes(50_000),
            ..Default::default()
        });
        let gap = (1000.0 / 1.1e6 * NS) as u64;
        let mut last = 0;
        let mut bytes = 0u64;
        for i in 0..11_000u64 {
            if let Verdict::Deliver(t, _) = m.on_packet(1000, i * gap) {
                last = t;
                bytes += 1000;
            }
        }
        let rate = bytes as f64 / (last as f64 / NS);
        assert!((rate / 1e6 - 1.0).abs() < 0.01, "{rate}");
        assert!(m.stats().drop_queue > 900);
    }

    #[test]
    fn jitter_never_reorders_but_reorder_does() {
        let mut m = model(DirParams {
            delay: 0.01,
            jitter: 0.005,
            ..Default::default()
        });
        let mut last = 0;
        for i in 0..1000 {
            let Verdict::Deliver(t, _) = m.on_packet(100, i * 1000) else {
                panic!()
            };
            assert!(t >= last);
            assert!(t <= i * 1000 + 15 * MS);
            last = t;
        }
        let mut m = model(DirParams {
            delay: 0.01,
            reorder: 0.1,
            reorder_gap: 0.001,
            ..Default::default()
        });
        let times: Vec<u64> = (0..1000)
            .map(|i| match m.on_packet(100, i * 10_000) {
                Verdict::Deliver(t, _) => t,
                v => panic!("{v:?}"),
            })
            .collect();
        let inversions = times.windows(2).filter(|w| w[1] < w[0]).count();
        assert!(inversions > 50, "{inversions}");
        assert!(
            (60..=140).contains(&m.stats().reordered),
            "{}",
            m.stats().reordered
        );
    }

    #[test]
    fn duplicate_and_loss_are_counted() {
        let mut m = model(DirParams {
            duplicate: 1.0,
            ..Default::default()
        });
        assert_eq!(m.on_packet(10, 0), Verdict::Deliver(0, Some(0)));
        let mut m = model(DirParams {
            loss: LossModel::Periodic { n: 2 },
            ..Default::default()
        });
        assert!(matches!(m.on_packet(10, 0), Verdict::Deliver(..)));
        assert_eq!(m.on_packet(10, 0), Verdict::Drop(DropCause::Loss));
        assert_eq!(m.stats().drop_loss, 1);
    }

    #[test]
    fn cross_traffic_takes_capacity() {
        // 10 Mb/s link, 4 sources of 5 Mb/s on half the time: ~10 Mb/s offered alone.
        let p = DirParams {
            rate: Some(10e6 / 8.0),
            cross: CrossTraffic {
                sources: 4,
                ..Default::default()
            },
            ..Default::default()
        };
        let mut m = model(p);
        for i in 0..6000 {
            m.on_packet(100, i * 10 * MS);
        }
        let s = m.stats();
        let util = s.cross_bytes as f64 / 60.0 / (10e6 / 8.0);
        assert!((0.3..0.8).contains(&util), "utilisation {util}");
        assert!(s.tx_packets > 5000);
    }

    #[test]
    fn set_params_changes_a_running_model() {
        let mut m = model(DirParams {
            delay: 0.01,
            ..Default::default()
        });
        m.on_packet(100, 0);
        m.set_params(
            DirParams {
                delay: 0.02,
                ..Default::default()
            },
            0.04,
            1500,
        );
        assert_eq!(m.on_packet(100, MS), Verdict::Deliver(21 * MS, None));
        assert_eq!(m.stats().rx_packets, 2);
    }
}
