//! Long fat paths with random (non-congestion) loss: the Robbins–Monro controller must find
//! the bottleneck quickly — also when the sender's NIC ceiling B is ten times the bottleneck —
//! and hold goodput at ≥ 95% of what the path allows without overrunning the bottleneck queue.
//! Issue 5's path: 1 Gb/s, 100 ms RTT, 0.1% random loss.

use crate::net::{run, HostStalls, Scenario};
use haul_plut::{Nanos, SECOND};

/// One long-fat-path case.
struct Case {
    name: &'static str,
    seed: u64,
    /// Bottleneck, bytes/s.
    rate: f64,
    /// One-way delay each way.
    one_way: Nanos,
    /// Random loss after the bottleneck queue.
    loss: f64,
    /// Sender NIC ceiling B, bytes/s.
    nic: f64,
    /// Drop-tail bottleneck queue, bytes.
    queue: usize,
    size: usize,
    warm_up: Nanos,
    /// Goodput after warm-up must reach this fraction of rate × (1 − loss).
    min_fraction: f64,
    /// Scheduling stalls of the sending host.
    host: HostStalls,
}

struct Measured {
    fraction: f64,
    extra: f64,
}

fn measure(c: &Case) -> Measured {
    let seed = std::env::var("PLUT_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(c.seed);
    let mut s = Scenario::new(seed, c.size);
    s.link.rate = c.rate;
    s.link.delay = c.one_way;
    s.ack.delay = c.one_way;
    s.link.loss = c.loss;
    s.link.queue = c.queue;
    s.cfg.nic_rate = c.nic;
    // As the IO layer sets it (`haul_transport::plut::config`).
    s.cfg.initial_rate = c.nic / 16.0;
    s.cfg.initial_rtt = 100_000_000;
    s.cfg.min_rtt = 2_000_000;
    s.cfg.max_burst = 32;
    s.cfg.max_burst_time = 2_000_000;
    s.cfg.max_burst_rtt = 0.1;
    s.limit = 60 * SECOND;
    s.host = c.host;
    let o = run(&s);
    assert!(
        o.completed && o.exact,
        "{}: transfer failed at {} ns",
        c.name,
        o.elapsed
    );
    let allowed = c.rate * (1.0 - c.loss);
    if std::env::var_os("PLUT_TRACE").is_some() {
        let step = (o.trace.len() / 60).max(1);
        for w in o.trace.chunks(step) {
            let (t, r, b) = w[0];
            let g = o.goodput_between(t, w[w.len() - 1].0.max(t + 1));
            eprintln!(
                "{} t {:.2} rate {:.0} Mb/s goodput {:.0} Mb/s bytes {}",
                c.name,
                t as f64 / 1e9,
                r * 8e-6,
                g * 8e-6,
                b
            );
        }
    }
    let end = o.tail_start(c.size);
    let fraction = o.goodput_between(c.warm_up, end) / allowed;
    let whole = o.goodput(c.size) / allowed;
    let extra = o.queue_drops as f64 / o.sender.datagrams_sent.max(1) as f64;
    eprintln!(
        "| {} | {:.0} Mb/s | {:.0} ms | {}% | {:.0} Mb/s | {:.1}% after {:.2} s | {:.1}% whole ({:.2} s) | {} drops ({:.3}%) | {} rtx | host stalled {:.1}% |",
        c.name,
        c.rate * 8e-6,
        2.0 * c.one_way as f64 / 1e6,
        c.loss * 100.0,
        c.nic * 8e-6,
        fraction * 100.0,
        c.warm_up as f64 / SECOND as f64,
        whole * 100.0,
        o.elapsed as f64 / SECOND as f64,
        o.queue_drops,
        extra * 100.0,
        o.sender.retransmits,
        o.stalled as f64 * 100.0 / o.elapsed.max(1) as f64,
    );
    Measured { fraction, extra }
}

fn check(c: &Case, max_extra: f64) -> Measured {
    let r = measure(c);
    assert!(
        r.fraction >= c.min_fraction,
        "{}: goodput {:.1}% of the path after warm-up",
        c.name,
        r.fraction * 100.0
    );
    assert!(
        r.extra < max_extra,
        "{}: {:.3}% of datagrams dropped at the bottleneck queue",
        c.name,
        r.extra * 100.0
    );
    r
}

const GBIT: f64 = 125e6;

fn issue5(name: &'static str, seed: u64, nic: f64) -> Case {
    Case {
        name,
        seed,
        rate: GBIT,
        one_way: 50_000_000,
        loss: 0.001,
        nic,
        // A third of the bandwidth-delay product (34 ms at 1 Gb/s).
        queue: 4 << 20,
        size: 512 << 20,
        warm_up: SECOND,
        min_fraction: 0.95,
        host: HostStalls::default(),
    }
}

#[test]
fn one_gigabit_100ms_random_loss_with_nic_at_the_bottleneck() {
    let c = issue5("1G B=1G", 51, GBIT);
    check(&c, 0.01);
}

#[test]
fn one_gigabit_100ms_random_loss_with_a_ten_gigabit_nic() {
    let c = issue5("1G B=10G", 52, 10.0 * GBIT);
    check(&c, 0.01);
}

#[test]
fn ten_gigabit_1ms_no_loss() {
    let c = Case {
        name: "10G 1ms",
        seed: 53,
        rate: 10.0 * GBIT,
        one_way: 500_000,
        loss: 0.0,
        nic: 10.0 * GBIT,
        queue: 1 << 20,
        size: 512 << 20,
        // The first ACK comes one initial RTT guess (100 ms) after the first datagram.
        warm_up: 150_000_000,
        min_fraction: 0.90,
        host: HostStalls::default(),
    };
    check(&c, 0.01);
}

/// Issue 5's path from a busy sending host (the real 2-core machine runs the emulator beside
/// both ends): the sender's thread stalls 200 times a second for 1 ms on average (17% of the
/// time), often longer than the pacer's catch-up allowance, so the rate it achieves is below
/// the rate it commands. The controller must not mistake the pacer's shortfall for the path's
/// and walk the rate down: when Eq. 3 stepped from the measured rate, this run settled at
/// 62% with no queue drops (the emulator symptom: 720–760 Mb/s, link idle).
#[test]
fn one_gigabit_100ms_random_loss_from_a_busy_host() {
    let mut c = issue5("1G busy host", 54, 10.0 * GBIT);
    c.host = HostStalls {
        per_second: 200.0,
        mean: 1_000_000,
    };
    // The probe and the climb after it run on noisy samples; once there the rate holds.
    c.min_fraction = 0.9;
    check(&c, 0.01);
}

/// Issue 5's path with the emulator's default queue, one bandwidth-delay product (12.5 MB):
/// the setpoint just above the bottleneck must not fill it until it overflows (the queue bound
/// keeps the standing queue near a quarter of the RTT), so after the probe's overshoot the
/// bottleneck queue drops (almost) nothing.
#[test]
fn one_gigabit_100ms_random_loss_with_a_bdp_queue() {
    let mut c = issue5("1G BDP queue", 55, 10.0 * GBIT);
    c.queue = 12_500_000;
    c.size = 1 << 30;
    check(&c, 0.002);
}
