//! Exact delivery: every byte arrives, in order, under loss, reordering, duplication, delays
//! from 0 to 400 ms one way, jumbo datagrams and both rate controllers.

use crate::net::{run, Outcome, Scenario};
use haul_plut::control::{AretParams, RateControl};
use haul_plut::wire::JUMBO_MDS;
use haul_plut::SECOND;

/// Runs `s` and asserts it completed with the output identical to the input.
fn exact(name: &str, s: &Scenario) -> Outcome {
    let o = run(s);
    let secs = o.elapsed as f64 / SECOND as f64;
    eprintln!(
        "{name}: {} B in {secs:.2} s sim, goodput {:.1} Mb/s, {} retransmits, {} duplicates at receiver",
        s.size,
        o.goodput(s.size) * 8e-6,
        o.sender.retransmits,
        o.receiver.duplicates
    );
    assert!(o.completed, "{name}: stalled at {secs:.1} s: {o:?}");
    assert!(o.exact, "{name}: output differs from input");
    o
}

#[test]
fn exact_delivery_under_loss() {
    for (seed, loss) in [(1, 0.0), (2, 0.01), (3, 0.05)] {
        let mut s = Scenario::new(seed, 8 << 20);
        s.link.loss = loss;
        let o = exact(&format!("loss {loss}"), &s);
        if loss > 0.0 {
            assert!(
                o.sender.retransmits > 0,
                "loss {loss} needed no retransmission"
            );
        }
    }
}

#[test]
fn exact_delivery_with_reordering_and_duplication() {
    let mut s = Scenario::new(4, 8 << 20);
    // 5 ms of jitter at ~8,700 datagrams/s reorders about 40 datagrams deep.
    s.link.jitter = 5_000_000;
    s.link.dup = 0.03;
    s.link.loss = 0.01;
    s.ack.jitter = 5_000_000;
    let o = exact("reorder+dup", &s);
    assert!(o.receiver.duplicates > 0);
}

#[test]
fn exact_delivery_across_delays() {
    for (seed, one_way_ms) in [(5, 0), (6, 5), (7, 100), (8, 400)] {
        let mut s = Scenario::new(seed, 5 << 20);
        s.link.delay = one_way_ms * 1_000_000;
        s.ack.delay = one_way_ms * 1_000_000;
        s.link.loss = 0.01;
        exact(&format!("one-way {one_way_ms} ms"), &s);
    }
}

#[test]
fn exact_delivery_with_jumbo_datagrams_and_odd_sizes() {
    for (seed, size) in [
        (9, 0),
        (10, 1),
        (11, 8931),
        (12, 8932),
        (13, (5 << 20) + 17),
    ] {
        let mut s = Scenario::new(seed, size);
        s.cfg.mds = JUMBO_MDS;
        s.link.loss = 0.01;
        exact(&format!("jumbo size {size}"), &s);
    }
}

#[test]
fn exact_delivery_with_the_aret_controller() {
    for (seed, loss) in [(14, 0.0), (15, 0.01), (16, 0.05)] {
        let mut s = Scenario::new(seed, 8 << 20);
        s.cfg.rate_control = RateControl::Aret(AretParams::default());
        s.link.loss = loss;
        exact(&format!("aret loss {loss}"), &s);
    }
}
