//! A deterministic discrete-event network for PLUT transfers: a forward link with a drop-tail
//! bottleneck queue (rate, serialisation), one-way delay, uniform jitter (which reorders),
//! Bernoulli loss after the queue and duplication; a reverse (ACK) path with its own delay,
//! jitter and loss; and an optional adversary that injects bad datagrams both ways. All
//! randomness comes from one seeded `StdRng`; simulated time never sleeps.

use crate::attack::{Adversary, Injected};
use haul_plut::{Config, Nanos, Receiver, Sender, SECOND};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Forward (data) link.
#[derive(Debug, Clone, Copy)]
pub struct Link {
    /// Bottleneck rate, bytes/s.
    pub rate: f64,
    /// One-way propagation delay.
    pub delay: Nanos,
    /// Extra delay, uniform in [0, jitter).
    pub jitter: Nanos,
    /// Bernoulli loss after the queue.
    pub loss: f64,
    /// Probability a datagram is delivered twice.
    pub dup: f64,
    /// Drop-tail queue capacity, bytes.
    pub queue: usize,
}

/// Reverse (ACK) path: no rate limit.
#[derive(Debug, Clone, Copy)]
pub struct AckPath {
    /// One-way delay.
    pub delay: Nanos,
    /// Extra delay, uniform in [0, jitter).
    pub jitter: Nanos,
    /// Bernoulli loss.
    pub loss: f64,
}

/// A busy sending host: the sender's thread is descheduled at random (a Poisson process of
/// stalls with exponentially distributed lengths). While it sleeps it neither sends nor reads
/// ACKs (they wait, as in a socket buffer); when it wakes its pacer catches up as far as it is
/// allowed to. This is the host effect of 004 §III ("the idle time itself may not be precisely
/// enforced") that a real 2-core machine running the emulator beside both ends shows.
#[derive(Debug, Clone, Copy, Default)]
pub struct HostStalls {
    /// Stalls per second of run time (0: none).
    pub per_second: f64,
    /// Mean stall length.
    pub mean: Nanos,
}

/// One simulated transfer.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// RNG seed (network and file contents).
    pub seed: u64,
    /// File size, bytes.
    pub size: usize,
    /// PLUT configuration shared by both ends.
    pub cfg: Config,
    /// Data link.
    pub link: Link,
    /// ACK path.
    pub ack: AckPath,
    /// Probability per real datagram that the adversary injects a bad one alongside.
    pub attack: f64,
    /// Give up (stall) after this much simulated time.
    pub limit: Nanos,
    /// Scheduling stalls of the sending host.
    pub host: HostStalls,
}

impl Scenario {
    /// 1 Gb/s NIC into a 100 Mb/s bottleneck, 20 ms one-way, 1 MB queue, clean paths.
    pub fn new(seed: u64, size: usize) -> Scenario {
        Scenario {
            seed,
            size,
            cfg: Config {
                session: 0x5eed_0000 ^ seed,
                initial_rtt: 50_000_000,
                ..Config::default()
            },
            link: Link {
                rate: 12.5e6,
                delay: 20_000_000,
                jitter: 0,
                loss: 0.0,
                dup: 0.0,
                queue: 1 << 20,
            },
            ack: AckPath {
                delay: 20_000_000,
                jitter: 0,
                loss: 0.0,
            },
            attack: 0.0,
            limit: 120 * SECOND,
            host: HostStalls::default(),
        }
    }
}

/// What a run produced.
#[derive(Debug)]
pub struct Outcome {
    /// Both ends finished before the limit.
    pub completed: bool,
    /// The receiver's output equals the input exactly.
    pub exact: bool,
    /// Simulated time when the sender finished (or the limit).
    pub elapsed: Nanos,
    /// Sender counters.
    pub sender: haul_plut::SenderStats,
    /// Receiver counters.
    pub receiver: haul_plut::ReceiverStats,
    /// What the adversary injected.
    pub injected: Injected,
    /// (time, controller target rate, distinct payload bytes received so far), every 10 ms.
    pub trace: Vec<(Nanos, f64, u64)>,
    /// Datagrams the bottleneck queue dropped.
    pub queue_drops: u64,
    /// Largest send-buffer slab the sender used.
    pub buffer_capacity: usize,
    /// Total time the sending host was stalled.
    pub stalled: Nanos,
}

impl Outcome {
    /// Goodput over the whole transfer, bytes/s.
    pub fn goodput(&self, size: usize) -> f64 {
        size as f64 * SECOND as f64 / self.elapsed.max(1) as f64
    }

    /// Goodput (distinct payload bytes received, 004's definition) between two trace times.
    pub fn goodput_between(&self, from: Nanos, to: Nanos) -> f64 {
        let at = |t: Nanos| {
            self.trace
                .iter()
                .take_while(|s| s.0 <= t)
                .last()
                .map_or(0, |s| s.2)
        };
        (at(to) - at(from)) as f64 * SECOND as f64 / (to - from) as f64
    }

    /// When 90% of the file's bytes had been received: the tail, where new data runs out.
    pub fn tail_start(&self, size: usize) -> Nanos {
        let mark = size as u64 / 10 * 9;
        self.trace
            .iter()
            .find(|s| s.2 >= mark)
            .map_or(self.elapsed, |s| s.0)
    }

    /// Controller rates sampled in [from, to).
    pub fn rates_between(&self, from: Nanos, to: Nanos) -> Vec<f64> {
        self.trace
            .iter()
            .filter(|s| s.0 >= from && s.0 < to)
            .map(|s| s.1)
            .collect()
    }
}

/// A datagram in flight.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Event {
    at: Nanos,
    order: u64,
    to_receiver: bool,
    data: Vec<u8>,
}

struct Net {
    rng: StdRng,
    events: BinaryHeap<Reverse<Event>>,
    order: u64,
    busy_until: f64,
    queue_drops: u64,
}

impl Net {
    fn schedule(&mut self, at: Nanos, to_receiver: bool, data: Vec<u8>) {
        self.order += 1;
        self.events.push(Reverse(Event {
            at,
            order: self.order,
            to_receiver,
            data,
        }));
    }

    fn jitter(&mut self, j: Nanos) -> Nanos {
        if j == 0 {
            0
        } else {
            self.rng.gen_range(0..j)
        }
    }

    fn forward(&mut self, now: Nanos, l: &Link, data: &[u8]) {
        let t = now as f64;
        let backlog = (self.busy_until - t).max(0.0) * l.rate / SECOND as f64;
        if backlog + data.len() as f64 > l.queue as f64 {
            self.queue_drops += 1;
            return;
        }
        self.busy_until = self.busy_until.max(t) + data.len() as f64 * SECOND as f64 / l.rate;
        if self.rng.gen_bool(l.loss) {
            return;
        }
        let at = self.busy_until as Nanos + l.delay + self.jitter(l.jitter);
        self.schedule(at, true, data.to_vec());
        if self.rng.gen_bool(l.dup) {
            let again = at + self.jitter(l.jitter.max(1_000_000));
            self.schedule(again, true, data.to_vec());
        }
    }

    fn reverse(&mut self, now: Nanos, a: &AckPath, data: &[u8]) {
        if self.rng.gen_bool(a.loss) {
            return;
        }
        let at = now + a.delay + self.jitter(a.jitter);
        self.schedule(at, false, data.to_vec());
    }
}

/// Runs one transfer to completion (or the limit) and reports what happened.
pub fn run(s: &Scenario) -> Outcome {
    let mut rng = StdRng::seed_from_u64(s.seed);
    let input: Vec<u8> = (0..s.size).map(|_| rng.gen()).collect();
    let mut net = Net {
        rng,
        events: BinaryHeap::new(),
        order: 0,
        busy_until: 0.0,
        queue_drops: 0,
    };
    let mut adversary = Adversary::new(s.seed ^ 0xbad, s.size as u64, s.cfg.payload());
    let mut sender = Sender::new(s.cfg.clone(), s.size as u64).expect("valid config");
    let mut receiver = Receiver::new(s.cfg.clone(), s.size as u64).expect("valid config");
    let mut output = Vec::with_capacity(s.size);
    let mut buf = vec![0u8; s.cfg.mds];
    let (mut now, mut next_trace, mut spins) = (0, 0, 0u32);
    let mut trace = Vec::new();
    let mut buffer_capacity = 0;
    // The sending host's stalls: their own RNG, so a scenario without them draws the same
    // network randomness as before they existed.
    let mut host_rng = StdRng::seed_from_u64(s.seed ^ 0x5747_a115);
    let exp =
        |rng: &mut StdRng, mean: f64| -> Nanos { (-mean * (1.0 - rng.gen::<f64>()).ln()) as Nanos };
    let stalls = s.host.per_second > 0.0 && s.host.mean > 0;
    let mut next_stall = if stalls {
        exp(&mut host_rng, SECOND as f64 / s.host.per_second)
    } else {
        Nanos::MAX
    };
    let (mut asleep_until, mut stalled) = (0, 0);
    let mut deferred: Vec<Vec<u8>> = Vec::new();
    // PLUT_TRACE_STEPS=1: the controller's state every 10 ms of simulated time.
    let steps_trace = std::env::var_os("PLUT_TRACE_STEPS").is_some();
    while !(sender.is_done() && receiver.is_complete()) && now < s.limit {
        while net.events.peek().is_some_and(|e| e.0.at <= now) {
            let Some(Reverse(ev)) = net.events.pop() else {
                break;
            };
            if ev.to_receiver {
                receiver
                    .handle_datagram(now, &ev.data, &mut output)
                    .expect("in-order sink");
            } else if now < asleep_until {
                deferred.push(ev.data);
            } else {
                sender.handle_datagram(now, &ev.data);
            }
        }
        let awake = now >= asleep_until;
        if awake {
            for d in deferred.drain(..) {
                sender.handle_datagram(now, &d);
            }
        }
        if awake && sender.poll_timeout().is_some_and(|t| t <= now) {
            sender.handle_timeout(now);
        }
        if receiver.poll_timeout().is_some_and(|t| t <= now) {
            receiver.handle_timeout(now);
        }
        while let Some(n) = if awake {
            sender
                .poll_transmit(now, &mut buf, &input[..])
                .expect("source")
        } else {
            None
        } {
            net.forward(now, &s.link, &buf[..n]);
            if let Some(bad) = adversary.against_receiver(s.attack, &buf[..n]) {
                net.schedule(now + s.link.delay, true, bad);
            }
        }
        if awake && now >= next_stall {
            let len = exp(&mut host_rng, s.host.mean as f64).max(1);
            asleep_until = now + len;
            stalled += len;
            next_stall = asleep_until + exp(&mut host_rng, SECOND as f64 / s.host.per_second);
        }
        while let Some(n) = receiver.poll_transmit(now, &mut buf).expect("ack encodes") {
            net.reverse(now, &s.ack, &buf[..n]);
            // ACKs are few, so each one draws eight chances of a bad ACK beside it.
            for _ in 0..8 {
                if let Some(bad) = adversary.against_sender(s.attack, &buf[..n]) {
                    net.schedule(now + s.ack.delay, false, bad);
                }
            }
        }
        buffer_capacity = buffer_capacity.max(sender.buffer_capacity());
        if next_trace <= now && steps_trace {
            let m = sender.last_measurement();
            if let haul_plut::RateController::RobbinsMonro(c) = sender.controller() {
                eprintln!(
                    "t {:.2} cmd {:.0} m.offered {:.0} m.goodput {:.0} sf {:.4} lavg {:.4} base {:.4} tgt {:.4} sd {:.4} C {:.0} k {} {:?} cur {} q {:.2}",
                    now as f64 / 1e9,
                    sender.rate() * 8e-6,
                    m.offered_rate * 8e-6,
                    m.goodput * 8e-6,
                    1.0 - m.goodput / m.offered_rate.max(1.0),
                    c.loss_avg().unwrap_or(f64::NAN),
                    c.base_loss(),
                    c.excess_target(),
                    c.sample_sd(),
                    c.bottleneck() * 8e-6,
                    c.steps(),
                    c.phase(),
                    m.at_current_rate,
                    m.queue_delay,
                );
            }
        }
        while next_trace <= now {
            trace.push((
                next_trace,
                sender.rate(),
                receiver.stats().accepted * s.cfg.payload() as u64,
            ));
            next_trace += 10_000_000;
        }
        let wake = |t: Nanos| t.max(asleep_until);
        let sender_next = if now < asleep_until {
            Some(asleep_until)
        } else {
            sender.poll_timeout().map(wake)
        };
        let next = [
            net.events.peek().map(|e| e.0.at),
            sender_next,
            receiver.poll_timeout(),
            Some(next_trace),
            stalls.then_some(next_stall.max(now + 1)),
        ]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(s.limit);
        if next <= now {
            spins += 1;
            assert!(spins < 1_000_000, "simulation livelock at {now} ns");
            now += 1;
        } else {
            spins = 0;
            now = next;
        }
    }
    Outcome {
        completed: sender.is_done() && receiver.is_complete(),
        exact: output == input,
        elapsed: now,
        sender: sender.stats(),
        receiver: receiver.stats(),
        injected: adversary.injected(),
        trace,
        queue_drops: net.queue_drops,
        buffer_capacity,
        stalled,
    }
}
