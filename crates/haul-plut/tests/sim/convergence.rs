//! Rate convergence: after a warm-up, the Robbins–Monro controller holds the source rate
//! within 5% of the bottleneck and the delivered goodput within 5% of what the path allows
//! (bottleneck × (1 − random loss)). Measured from the end of the warm-up to the file's tail
//! (90% of the data received), after which the sender only retransmits.

use crate::net::{run, Scenario};
use haul_plut::control::{AretParams, RateControl};
use haul_plut::{Nanos, SECOND};

/// Warm-up excluded from the convergence check.
const WARM_UP: Nanos = 2 * SECOND;

#[test]
fn robbins_monro_converges_to_the_bottleneck() {
    let mut failures = Vec::new();
    for (seed, loss, one_way_ms) in [
        (21, 0.0, 20),
        (22, 0.01, 20),
        (23, 0.05, 20),
        (24, 0.01, 50),
    ] {
        let mut s = Scenario::new(seed, 64 << 20);
        s.link.loss = loss;
        s.link.delay = one_way_ms * 1_000_000;
        s.ack.delay = one_way_ms * 1_000_000;
        let o = run(&s);
        assert!(
            o.completed && o.exact,
            "loss {loss}: transfer failed: {o:?}"
        );
        let cap = s.link.rate;
        // Until the file's tail, where the sender runs out of new data.
        let end = o.tail_start(s.size);
        let rates = o.rates_between(WARM_UP, end);
        let mean = rates.iter().sum::<f64>() / rates.len().max(1) as f64;
        let goodput = o.goodput_between(WARM_UP, end);
        let within = rates
            .iter()
            .filter(|r| (*r / cap - 1.0).abs() < 0.05)
            .count() as f64
            / rates.len().max(1) as f64;
        eprintln!(
            "RM loss {loss} one-way {one_way_ms} ms: rate after warm-up {:.1} Mb/s (bottleneck {:.1}), {:.0}% of samples within 5%, goodput {:.1} Mb/s (path allows {:.1}), total {:.2} s, {} retransmits, {} duplicates, {} queue drops",
            mean * 8e-6,
            cap * 8e-6,
            within * 100.0,
            goodput * 8e-6,
            cap * (1.0 - loss) * 8e-6,
            o.elapsed as f64 / SECOND as f64,
            o.sender.retransmits,
            o.receiver.duplicates,
            o.queue_drops
        );
        let allowed = cap * (1.0 - loss);
        failures.extend(
            [
                (rates.len() <= 50)
                    .then(|| format!("loss {loss}: only {} samples after warm-up", rates.len())),
                ((mean / cap - 1.0).abs() >= 0.05)
                    .then(|| format!("loss {loss}: mean rate {mean} vs bottleneck {cap}")),
                (within <= 0.9).then(|| {
                    format!(
                        "loss {loss}: only {:.0}% of rate samples within 5%",
                        within * 100.0
                    )
                }),
                ((goodput / allowed - 1.0).abs() >= 0.05)
                    .then(|| format!("loss {loss}: goodput {goodput} vs {allowed}")),
            ]
            .into_iter()
            .flatten(),
        );
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn aret_comparison_run_reports_its_rate() {
    let mut s = Scenario::new(25, 40 << 20);
    s.link.loss = 0.01;
    s.cfg.rate_control = RateControl::Aret(AretParams::default());
    let o = run(&s);
    assert!(o.completed && o.exact);
    let end = o.tail_start(s.size);
    let goodput = o.goodput_between(WARM_UP, end);
    eprintln!(
        "ARET loss 0.01: goodput after warm-up {:.1} Mb/s of {:.1}, total {:.2} s",
        goodput * 8e-6,
        s.link.rate * 0.99 * 8e-6,
        o.elapsed as f64 / SECOND as f64
    );
    // Tsunami/ARET has no convergence guarantee; it must still use most of the path.
    assert!(goodput > 0.5 * s.link.rate * 0.99, "ARET goodput {goodput}");
}
