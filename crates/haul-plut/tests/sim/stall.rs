//! No stall: transfers finish within a bound when 30% of ACKs are lost, when ACKs are delayed
//! by a second and reordered, and when the send buffer is far smaller than the path's
//! bandwidth-delay product (the 3TDQB grows from the heap instead of waiting).

use crate::net::{run, Outcome, Scenario};
use haul_plut::{Nanos, SECOND};

/// Runs `s`, asserting exact delivery within `bound` of simulated time.
fn within(name: &str, s: &Scenario, bound: Nanos) -> Outcome {
    let o = run(s);
    let secs = o.elapsed as f64 / SECOND as f64;
    eprintln!(
        "{name}: {:.2} s sim (bound {:.0} s), {} sender timeouts, {} timeout ACKs, {} stale ACKs",
        secs,
        bound as f64 / SECOND as f64,
        o.sender.timeouts,
        o.receiver.timeout_acks,
        o.sender.stale
    );
    assert!(
        o.completed && o.exact,
        "{name}: incomplete or inexact after {secs:.1} s"
    );
    assert!(o.elapsed < bound, "{name}: took {secs:.1} s");
    o
}

#[test]
fn no_stall_when_30_percent_of_acks_are_lost() {
    let mut s = Scenario::new(31, 8 << 20);
    s.link.loss = 0.01;
    s.ack.loss = 0.3;
    // Clean, this takes about 1.2 s.
    within("30% ACK loss", &s, 4 * SECOND);
}

#[test]
fn no_stall_when_acks_are_long_delayed_and_reordered() {
    let mut s = Scenario::new(32, 8 << 20);
    s.link.loss = 0.01;
    s.ack.delay = SECOND;
    s.ack.jitter = SECOND / 2;
    let o = within("1-1.5 s ACK delay", &s, 20 * SECOND);
    assert!(o.sender.stale > 0, "reordered ACKs were not seen as stale");
}

#[test]
fn no_stall_when_every_ack_in_a_burst_is_lost() {
    let mut s = Scenario::new(33, 4 << 20);
    s.link.loss = 0.02;
    s.ack.loss = 0.8;
    within("80% ACK loss", &s, 20 * SECOND);
}

#[test]
fn send_buffer_grows_from_the_heap_instead_of_stalling() {
    let mut s = Scenario::new(34, 8 << 20);
    // 64 datagrams (92 KB) against a 2.5 MB bandwidth-delay product.
    s.cfg.send_buffer = 64;
    s.link.delay = 100_000_000;
    s.ack.delay = 100_000_000;
    s.link.loss = 0.01;
    let o = within("64-datagram send buffer", &s, 6 * SECOND);
    assert!(
        o.sender.heap_grows > 0 && o.buffer_capacity > 64,
        "buffer never grew: {}",
        o.buffer_capacity
    );
}
