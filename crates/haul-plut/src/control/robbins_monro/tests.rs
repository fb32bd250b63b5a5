//! Tests of the Robbins–Monro controller on deterministic synthetic paths.

use super::*;

/// A deterministic path: bottleneck `cap` bytes/s, rate-independent loss `p`, loss above
/// the bottleneck as a drop-tail queue would give it, retransmissions equal to losses.
fn path(rate: f64, cap: f64, p: f64) -> Measurement {
    let delivered = rate.min(cap) * (1.0 - p);
    let loss = 1.0 - delivered / rate;
    let n = 10_000u64;
    let lost = (loss * n as f64).round() as u64;
    Measurement {
        send_rate: rate,
        offered_rate: rate,
        goodput: delivered,
        retransmit_fraction: loss,
        lost,
        received: n - lost,
        occupancy: 0.0,
        at_current_rate: false,
        queue_delay: 0.0,
    }
}

#[test]
fn eq2_is_geometric_mean_at_half_beta() {
    let g = attainable_goodput(100.0, 0.0, 25.0, 0.5);
    assert!((g - 50.0).abs() < 1e-9);
    assert!((attainable_goodput(100.0, 0.2, 25.0, 1.0) - 80.0).abs() < 1e-9);
    assert!((attainable_goodput(100.0, 0.2, 25.0, 0.0) - 25.0).abs() < 1e-9);
}

#[test]
fn gains_satisfy_robbins_monro_conditions() {
    let p = RmParams::default();
    assert!(p.gamma > 0.5 && p.gamma < 1.0);
    assert!(gain(p.b, p.gamma, 1) > gain(p.b, p.gamma, 2));
    assert!((gain(0.2, 0.6, 32) - 0.2 / 8.0).abs() < 1e-12);
}

#[test]
fn converges_to_the_bottleneck_from_below_and_above() {
    for (start, p) in [(1e6, 0.0), (1e6, 0.05), (120e6, 0.0), (60e6, 0.01)] {
        let cap = 80e6;
        let mut c = RobbinsMonro::new(RmParams::default(), start, 125e6);
        let mut rate = c.rate();
        for _ in 0..300 {
            rate = c.update(&path(rate, cap, p));
        }
        assert_eq!(c.phase(), RmPhase::Stabilize);
        assert!(
            (rate / cap - 1.0).abs() < 0.03,
            "start {start} loss {p}: rate {rate}"
        );
        assert!(
            (c.base_loss() - p).abs() < 1e-3,
            "base loss {}",
            c.base_loss()
        );
    }
}

#[test]
fn probe_doubles_then_drains_to_the_bottleneck() {
    let cap = 100e6;
    let mut c = RobbinsMonro::new(RmParams::default(), 10e6, 1e9);
    let mut rates = vec![c.rate()];
    while c.phase() == RmPhase::Probe && rates.len() < 20 {
        rates.push(c.update(&path(c.rate(), cap, 0.001)));
    }
    // Doubling per step from 10 MB/s: 20, 40, 80, 160 — then the overshoot is seen.
    assert_eq!(&rates[..5], &[10e6, 20e6, 40e6, 80e6, 160e6]);
    assert_eq!(c.phase(), RmPhase::Drain);
    let drained = c.rate();
    assert!(
        (drained / (cap * 0.75) - 1.0).abs() < 0.01,
        "drain rate {drained}"
    );
    let next = c.update(&path(drained, cap, 0.001));
    assert!((next / cap - 1.0).abs() < 0.01, "after drain {next}");
    assert_eq!(c.phase(), RmPhase::Stabilize);
}

#[test]
fn a_lagging_measurement_does_not_move_the_rate() {
    let mut c = RobbinsMonro::new(RmParams::default(), 80e6, 125e6);
    for _ in 0..50 {
        let r = c.rate();
        c.update(&path(r, 80e6, 0.0));
    }
    let r = c.rate();
    // A window offered at half the current rate is stale: ignored.
    let mut stale = path(r / 2.0, 80e6, 0.0);
    stale.offered_rate = r / 2.0;
    assert_eq!(c.update(&stale), r);
}

/// The path as a sender sees it whose pacer delivers only `achieved` of the commanded
/// rate (a busy host): every window offered `achieved × rate` and answers the current rate.
fn undershooting(rate: f64, achieved: f64, cap: f64, p: f64) -> Measurement {
    let mut m = path(rate * achieved, cap, p);
    m.at_current_rate = true;
    m
}

/// Runs `steps` steps on the deterministic path and returns the controller.
fn settled(start: f64, cap: f64, p: f64, steps: usize) -> RobbinsMonro {
    let mut c = RobbinsMonro::new(RmParams::default(), start, 1e9);
    for _ in 0..steps {
        let r = c.rate();
        c.update(&path(r, cap, p));
    }
    c
}

/// Steps on the deterministic path until the rate reaches `target` (at most `limit` steps);
/// returns how many it took.
fn steps_to_reach(c: &mut RobbinsMonro, target: f64, cap: f64, p: f64, limit: usize) -> usize {
    let mut steps = 0;
    while c.rate() < target && steps < limit {
        let r = c.rate();
        c.update(&path(r, cap, p));
        steps += 1;
    }
    steps
}

#[test]
fn a_pacer_undershoot_does_not_walk_the_rate_down() {
    // Before: Eq. 3 stepped from the measured rate, so a 3% undershoot took 3% off at
    // every step and the rate settled where ρ_k balanced it, far below the bottleneck
    // (42% of it for 3%).
    let cap = 100e6;
    for achieved in [0.97, 0.9, 0.85] {
        let mut c = RobbinsMonro::new(RmParams::default(), 10e6, 1e9);
        for _ in 0..400 {
            let r = c.rate();
            c.update(&undershooting(r, achieved, cap, 0.001));
        }
        let offered = c.rate() * achieved;
        assert_eq!(c.phase(), RmPhase::Stabilize);
        assert!(
            (offered / cap - 1.0).abs() < 0.02,
            "achieved {achieved}: offered {offered}, commanded {}",
            c.rate()
        );
    }
}

#[test]
fn a_sender_that_cannot_reach_its_rate_does_not_wind_up() {
    let mut c = settled(80e6, 80e6, 0.0, 50);
    let held = c.rate();
    // From now on the host delivers at most 40 MB/s, whatever is commanded: the rate
    // neither winds up (the path shows no loss, the error keeps asking for more) nor
    // falls (the sender's shortfall is not the path's).
    for _ in 0..200 {
        let r = c.rate();
        let mut m = path(r.min(40e6), 80e6, 0.0);
        m.at_current_rate = true;
        c.update(&m);
    }
    assert!(
        (c.rate() / held - 1.0).abs() < 1e-9,
        "rate moved from {held} to {}",
        c.rate()
    );
    // A sender starting slow on a fast path climbs no further than the headroom above
    // what it achieves.
    let mut c = RobbinsMonro::new(RmParams::default(), 10e6, 1e9);
    for _ in 0..300 {
        let r = c.rate();
        let mut m = path(r.min(40e6), 80e6, 0.0);
        m.at_current_rate = true;
        c.update(&m);
    }
    let headroom = RmParams::default().headroom;
    assert!(
        c.rate() <= 80e6 * (1.0 + headroom) + 1.0,
        "wound up to {}",
        c.rate()
    );
}

#[test]
fn a_sender_with_nothing_to_send_keeps_its_rate() {
    let cap = 100e6;
    let mut c = settled(50e6, cap, 0.001, 300);
    let before = c.rate();
    // Flow control held the sender back: it offered a tenth of its rate while the queue
    // drained, so goodput exceeded the offer.
    let mut m = path(before / 10.0, cap, 0.001);
    m.goodput = 0.9 * cap;
    m.at_current_rate = true;
    assert!(
        c.update(&m) >= before,
        "rate cut from {before} to {}",
        c.rate()
    );
}

#[test]
fn a_clear_overrun_is_cut_at_once() {
    let cap = 100e6;
    let mut c = settled(50e6, cap, 0.001, 300);
    // The host suddenly paces 30% faster than the bottleneck (it stopped stalling).
    let mut rate = 1.3 * cap;
    c.rate = rate;
    let mut steps = 0;
    while rate > 1.03 * cap && steps < 20 {
        let mut m = path(rate, cap, 0.001);
        m.at_current_rate = true;
        rate = c.update(&m);
        steps += 1;
    }
    assert!(
        steps <= 4,
        "{steps} steps to come back from a 30% overrun (rate {rate})"
    );
    assert!(rate > 0.9 * cap, "cut too deep: {rate}");
}

#[test]
fn a_rate_far_below_the_bottleneck_climbs_back_quickly() {
    let cap = 100e6;
    let mut c = settled(50e6, cap, 0.001, 300);
    c.rate = 0.6 * cap;
    let steps = steps_to_reach(&mut c, 0.95 * cap, cap, 0.001, 100);
    assert!(
        steps <= 12,
        "{steps} steps from 60% back to 95% of the bottleneck"
    );
}

#[test]
fn a_rate_cut_to_the_floor_doubles_back() {
    let cap = 100e6;
    let mut c = settled(50e6, cap, 0.001, 300);
    c.rate = c.min_rate;
    let steps = steps_to_reach(&mut c, 0.5 * cap, cap, 0.001, 200);
    // From B/10^4 of a 1 GB/s NIC to half of a 100 MB/s bottleneck: 10 doublings.
    assert!(
        steps <= 12,
        "{steps} steps from the floor back to half the bottleneck"
    );
}

#[test]
fn a_standing_queue_pushes_the_rate_down() {
    let cap = 100e6;
    let mut c = settled(50e6, cap, 0.001, 300);
    let before = c.rate();
    // The loss signal says "at the setpoint", but the RTT is 60% above the path's.
    let mut m = path(before, cap, 0.001);
    m.goodput = before * (1.0 - 0.001 - c.excess_target());
    m.queue_delay = 0.6;
    m.at_current_rate = true;
    assert!(
        c.update(&m) < before,
        "rate {} not below {before}",
        c.rate()
    );
}

#[test]
fn kesten_keeps_the_step_large_while_the_error_keeps_its_sign() {
    let mut c = RobbinsMonro::new(RmParams::default(), 10e6, 1e9);
    // Probe to a 100 MB/s bottleneck, then a path that is ten times faster: the errors
    // all ask for more, k stays small, and the rate gets near the NIC rate quickly.
    while c.phase() != RmPhase::Stabilize {
        let r = c.rate();
        c.update(&path(r, 100e6, 0.0));
    }
    let steps = steps_to_reach(&mut c, 0.9 * 1e9, 1e10, 0.0, 200);
    assert!(c.steps() <= 2, "k grew to {}", c.steps());
    assert!(steps < 40, "{steps} steps from 100 MB/s to 900 MB/s");
}

#[test]
fn probing_from_a_host_that_cannot_reach_the_probe_rate_still_sees_the_bottleneck() {
    // The sender achieves half its commanded rate: no window comes within 10% of it, so
    // ℓ₀ is not learnt, and a noisy window that offered no more than was delivered
    // before does not end probing either.
    let cap = 100e6;
    let mut c = RobbinsMonro::new(RmParams::default(), 150e6, 1e9);
    for _ in 0..5 {
        let r = c.rate();
        c.update(&undershooting(r, 0.5, cap, 0.001));
    }
    let mut noisy = undershooting(c.rate(), 0.5, cap, 0.001);
    noisy.goodput *= 0.9;
    c.update(&noisy);
    assert_eq!(c.phase(), RmPhase::Probe);
    // The host frees up: the commanded rate overruns the bottleneck and probing ends,
    // with the bottleneck seen.
    let r = c.rate();
    c.update(&undershooting(r, 1.0, cap, 0.001));
    assert_ne!(c.phase(), RmPhase::Probe);
    assert!(
        (c.bottleneck() / cap - 1.0).abs() < 0.01,
        "bottleneck {}",
        c.bottleneck()
    );
}

#[test]
fn the_first_probe_window_cannot_end_probing() {
    // A first window whose goodput fell short (the receiver's window began late) is
    // noise: nothing was offered beyond what the path had delivered.
    let mut c = RobbinsMonro::new(RmParams::default(), 10e6, 1e9);
    let mut m = path(10e6, 100e6, 0.0);
    m.goodput *= 0.85;
    c.update(&m);
    assert_eq!(c.phase(), RmPhase::Probe);
}

#[test]
fn the_target_covers_the_error_of_a_base_loss_from_few_datagrams() {
    // One probe sample of 265 datagrams showing a third of a 1% path loss: the target
    // must reach past the true ℓ₀, or the setpoint sits below the bottleneck.
    let mut c = RobbinsMonro::new(RmParams::default(), 10e6, 1e9);
    c.add_base(0.0034, 265);
    assert!(
        c.base_loss() + c.excess_target() > 0.01,
        "ℓ₀ {} + target {}",
        c.base_loss(),
        c.excess_target()
    );
    // Thousands of datagrams later the target is back at `loss_target`.
    for _ in 0..64 {
        c.add_base(0.01, 8000);
    }
    assert_eq!(c.excess_target(), RmParams::default().loss_target);
    // Outliers (host stalls) neither carry ℓ₀ off nor widen the target to their size.
    for _ in 0..5 {
        c.add_base(-0.1, 8000);
    }
    assert!(c.base_loss() > 0.005, "ℓ₀ {}", c.base_loss());
    assert!(c.excess_target() <= RmParams::default().max_loss_target);
}

#[test]
fn stays_at_the_nic_rate_when_the_path_is_faster() {
    let mut c = RobbinsMonro::new(RmParams::default(), 1e6, 125e6);
    let mut rate = c.rate();
    for _ in 0..100 {
        rate = c.update(&path(rate, 1e9, 0.0));
    }
    assert_eq!(rate, 125e6);
}
