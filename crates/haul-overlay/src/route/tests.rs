//! Unit tests of the route chooser on hand-made graphs, of the learned discount and of nest_url.

use super::*;
use crate::nested::nested;

/// A leg with a prediction and no other history.
fn leg(from: &str, to: &str, bps: f64) -> Leg {
    Leg {
        from: from.into(),
        to: to.into(),
        bps,
        age_s: 60.0,
        samples: 5,
        err_pct: None,
    }
}

/// A graph of `(from, to, bps)` legs.
fn graph(legs: &[(&str, &str, f64)]) -> Graph {
    Graph::new(legs.iter().map(|&(f, t, b)| leg(f, t, b))).expect("valid graph")
}

/// Relays with no overhead.
fn relays(hosts: &[&str]) -> Vec<Candidate> {
    hosts.iter().map(|&h| cand(h, 1.0)).collect()
}

/// A relay with a discount.
fn cand(host: &str, discount: f64) -> Candidate {
    Candidate {
        host: host.into(),
        discount,
    }
}

/// Params with `max_relays` and `threshold`.
fn params(max_relays: usize, threshold: f64) -> RouteParams {
    RouteParams {
        max_relays,
        threshold,
        risk: 0.0,
    }
}

/// `choose` from "s" to "t" with the default params, checked against brute force.
fn pick(g: &Graph, rs: &[Candidate]) -> Route {
    pick_with(g, rs, &RouteParams::default())
}

/// `choose` from "s" to "t", checked against brute force.
fn pick_with(g: &Graph, rs: &[Candidate], p: &RouteParams) -> Route {
    let route = choose(g, "s", "t", rs, p).expect("valid input");
    assert_eq!(brute_force(g, "s", "t", rs, p), Ok(route.clone()));
    route
}

/// Owned hop ids.
fn hops(h: &[&str]) -> Vec<HostId> {
    h.iter().map(|s| s.to_string()).collect()
}

#[test]
fn thesis_example_splits_at_the_narrower_leg() {
    let g = graph(&[("s", "t", 10.0), ("s", "b", 30.0), ("b", "t", 20.0)]);
    let r = pick(&g, &relays(&["b"]));
    assert_eq!(r.hops, hops(&["s", "b", "t"]));
    assert_eq!(r.relays(), &hops(&["b"])[..]);
    assert_eq!(r.predicted_bps, 20.0);
    assert_eq!(r.direct_bps, Some(10.0));
    assert_eq!(r.gain, Some(1.0));
    assert_eq!(r.reason, Reason::Split { gain: 1.0 });
    assert_eq!(r.legs, vec![leg("s", "b", 30.0), leg("b", "t", 20.0)]);
}

#[test]
fn gain_under_the_threshold_stays_direct() {
    let g = graph(&[("s", "t", 10.0), ("s", "b", 30.0), ("b", "t", 14.0)]);
    let r = pick(&g, &relays(&["b"]));
    assert_eq!(r.hops, hops(&["s", "t"]));
    assert!(r.relays().is_empty());
    assert_eq!(r.predicted_bps, 10.0);
    assert_eq!(r.legs, vec![leg("s", "t", 10.0)]);
    let gain = (14.0 - 10.0) / 10.0;
    assert_eq!(r.gain, Some(gain));
    assert_eq!(
        r.reason,
        Reason::BelowThreshold {
            best_chain: hops(&["s", "b", "t"]),
            chain_bps: 14.0,
            legs_bps: 14.0,
            gain,
        }
    );
    // The thesis's experiments split on any gain (threshold 0).
    let r = pick_with(&g, &relays(&["b"]), &params(2, 0.0));
    assert_eq!(r.hops, hops(&["s", "b", "t"]));
    assert_eq!(r.reason, Reason::Split { gain });
}

#[test]
fn a_gain_of_exactly_the_threshold_stays_direct() {
    let g = graph(&[("s", "t", 10.0), ("s", "b", 30.0), ("b", "t", 15.0)]);
    let r = pick(&g, &relays(&["b"]));
    assert_eq!(r.hops, hops(&["s", "t"]));
    assert!(matches!(r.reason, Reason::BelowThreshold { gain, .. } if gain == 0.5));
}

#[test]
fn no_chain_faster_than_direct_stays_direct() {
    let g = graph(&[("s", "t", 50.0), ("s", "b", 30.0), ("b", "t", 40.0)]);
    let r = pick(&g, &relays(&["b"]));
    assert_eq!(r.hops, hops(&["s", "t"]));
    assert_eq!(r.reason, Reason::DirectOnly);
    assert_eq!(r.gain, Some(-0.4));
    // An equal chain does not beat direct either.
    let g = graph(&[("s", "t", 30.0), ("s", "b", 30.0), ("b", "t", 40.0)]);
    assert_eq!(pick(&g, &relays(&["b"])).reason, Reason::DirectOnly);
    // Nor does anything with no relays allowed, or none offered.
    let g = graph(&[("s", "t", 10.0), ("s", "b", 30.0), ("b", "t", 20.0)]);
    let r = pick_with(&g, &relays(&["b"]), &params(0, 0.5));
    assert_eq!((r.reason, r.gain), (Reason::DirectOnly, None));
    assert_eq!(pick(&g, &[]).reason, Reason::DirectOnly);
}

#[test]
fn outage_legs_are_never_chosen() {
    // b's second leg is down: the only chain left is through c, below the threshold.
    let g = graph(&[
        ("s", "t", 10.0),
        ("s", "b", 100.0),
        ("b", "t", 0.0),
        ("s", "c", 12.0),
        ("c", "t", 12.0),
    ]);
    let r = pick(&g, &relays(&["b", "c"]));
    assert!(
        matches!(r.reason, Reason::BelowThreshold { ref best_chain, .. }
        if *best_chain == hops(&["s", "c", "t"]))
    );
    // Direct down: any chain, by the thesis's rule, even a slow one.
    let g = graph(&[("s", "t", 0.0), ("s", "b", 1.0), ("b", "t", 2.0)]);
    let r = pick(&g, &relays(&["b"]));
    assert_eq!(r.hops, hops(&["s", "b", "t"]));
    assert_eq!((r.predicted_bps, r.direct_bps), (1.0, Some(0.0)));
    assert_eq!((r.reason, r.gain), (Reason::DirectDown, None));
    // Everything down.
    let g = graph(&[("s", "t", 0.0), ("s", "b", 0.0), ("b", "t", 2.0)]);
    let r = pick(&g, &relays(&["b"]));
    assert_eq!(r.hops, hops(&["s", "t"]));
    assert_eq!((r.predicted_bps, r.reason), (0.0, Reason::Unreachable));
    assert_eq!(r.legs, vec![leg("s", "t", 0.0)]);
}

#[test]
fn unknown_legs_are_never_chosen() {
    // Direct unknown: the known chain, however slow.
    let g = graph(&[("s", "b", 3.0), ("b", "t", 5.0), ("s", "c", 100.0)]);
    let r = pick(&g, &relays(&["b", "c"]));
    assert_eq!(r.hops, hops(&["s", "b", "t"]));
    assert_eq!((r.predicted_bps, r.direct_bps), (3.0, None));
    assert_eq!((r.reason, r.gain), (Reason::NoDirectPrediction, None));
    // Nothing known end to end: direct as the last resort, with no legs.
    let g = graph(&[("s", "c", 100.0), ("b", "t", 5.0)]);
    let r = pick(&g, &relays(&["b", "c"]));
    assert_eq!(r.hops, hops(&["s", "t"]));
    assert_eq!(
        (r.direct_bps, r.reason.clone()),
        (None, Reason::Unreachable)
    );
    assert!(r.legs.is_empty());
    // Endpoints no leg names at all.
    let r = choose(&g, "x", "y", &relays(&["b"]), &RouteParams::default());
    assert_eq!(r.map(|r| r.reason), Ok(Reason::Unreachable));
}

#[test]
fn discounts_change_the_choice() {
    let g = graph(&[
        ("s", "t", 10.0),
        ("s", "a", 40.0),
        ("a", "t", 40.0),
        ("s", "b", 30.0),
        ("b", "t", 30.0),
    ]);
    let r = pick(&g, &relays(&["a", "b"]));
    assert_eq!((r.hops, r.predicted_bps), (hops(&["s", "a", "t"]), 40.0));
    // a loses half its throughput to overhead: b wins.
    let r = pick(&g, &[cand("a", 0.5), cand("b", 1.0)]);
    assert_eq!(r.legs_bps(), Some(30.0));
    assert_eq!((r.hops, r.predicted_bps), (hops(&["s", "b", "t"]), 30.0));
    // Both discounted: a chain of 40 · 0.3 = 12 is only 20 % better than direct. What a
    // relay's factor is learned against stays the legs' own prediction, 40.
    let r = pick(&g, &[cand("a", 0.3), cand("b", 0.3)]);
    assert_eq!(r.hops, hops(&["s", "t"]));
    assert!(matches!(r.reason,
        Reason::BelowThreshold { chain_bps, legs_bps, .. } if chain_bps == 12.0 && legs_bps == 40.0));
    let r = pick(&g, &[cand("a", 0.5)]);
    assert_eq!((r.predicted_bps, r.legs_bps()), (20.0, Some(40.0)));
}

#[test]
fn a_discount_applies_whichever_leg_is_the_bottleneck() {
    // First leg the bottleneck (the thesis's ACK-compression case), then the second.
    for (a, b) in [(20.0, 100.0), (100.0, 20.0)] {
        let g = graph(&[("s", "r", a), ("r", "t", b)]);
        assert_eq!(pick(&g, &[cand("r", 0.5)]).predicted_bps, 10.0);
    }
    // Between two relays, a leg carries both factors.
    let g = graph(&[("s", "a", 100.0), ("a", "b", 40.0), ("b", "t", 100.0)]);
    let r = pick(&g, &[cand("a", 0.5), cand("b", 0.5)]);
    assert_eq!(
        (r.hops, r.predicted_bps),
        (hops(&["s", "a", "b", "t"]), 10.0)
    );
}

#[test]
fn two_relay_chains_beat_one_relay_chains() {
    let g = graph(&[
        ("s", "t", 10.0),
        ("s", "a", 100.0),
        ("a", "b", 90.0),
        ("b", "t", 100.0),
        ("a", "t", 5.0),
        ("s", "b", 5.0),
    ]);
    let r = pick(&g, &relays(&["a", "b"]));
    assert_eq!(r.hops, hops(&["s", "a", "b", "t"]));
    assert_eq!(
        (r.predicted_bps, r.reason),
        (90.0, Reason::Split { gain: 8.0 })
    );
    // With one relay allowed, the best chain (5) loses to direct.
    let r = pick_with(&g, &relays(&["a", "b"]), &params(1, 0.5));
    assert_eq!((r.hops, r.reason), (hops(&["s", "t"]), Reason::DirectOnly));
    // Three relays allowed when needed.
    let g = graph(&[
        ("s", "a", 9.0),
        ("a", "b", 9.0),
        ("b", "c", 9.0),
        ("c", "t", 9.0),
    ]);
    let rs = relays(&["a", "b", "c"]);
    assert_eq!(pick(&g, &rs).reason, Reason::Unreachable);
    let r = pick_with(&g, &rs, &params(3, 0.5));
    assert_eq!(r.hops, hops(&["s", "a", "b", "c", "t"]));
}

#[test]
fn ties_prefer_fewer_relays_then_headroom() {
    // A two-relay chain as wide as a one-relay chain loses to it.
    let g = graph(&[
        ("s", "a", 50.0),
        ("a", "b", 80.0),
        ("b", "t", 80.0),
        ("s", "c", 50.0),
        ("c", "t", 50.0),
    ]);
    let r = pick(&g, &relays(&["a", "b", "c"]));
    assert_eq!(r.hops, hops(&["s", "c", "t"]));
    // Equally wide and long: the larger sum of legs wins, whatever the order of the ids.
    let g = graph(&[
        ("s", "a", 20.0),
        ("a", "t", 30.0),
        ("s", "z", 20.0),
        ("z", "t", 100.0),
    ]);
    let r = pick(&g, &relays(&["a", "z"]));
    assert_eq!(r.hops, hops(&["s", "z", "t"]));
}

#[test]
fn the_endpoints_never_relay() {
    // Through t or s as relays, s → t → b → t and s → a → s → t would be 10 wide (as direct);
    // the only real chain is s → c → t at 5. u is fast but not offered.
    let g = graph(&[
        ("s", "t", 10.0),
        ("t", "b", 100.0),
        ("b", "t", 100.0),
        ("s", "a", 100.0),
        ("a", "s", 100.0),
        ("s", "c", 5.0),
        ("c", "t", 5.0),
        ("s", "u", 1000.0),
        ("u", "t", 1000.0),
    ]);
    let rs = relays(&["s", "t", "a", "b", "c", "nowhere"]);
    let r = pick_with(&g, &rs, &params(3, 0.5));
    assert_eq!(r.hops, hops(&["s", "t"]));
    assert_eq!((r.reason, r.gain), (Reason::DirectOnly, Some(-0.5)));
}

#[test]
fn the_choice_does_not_depend_on_the_order_of_the_legs() {
    let legs = [
        ("s", "t", 10.0),
        ("s", "a", 20.0),
        ("a", "t", 30.0),
        ("s", "b", 20.0),
        ("b", "t", 30.0),
        ("a", "b", 50.0),
    ];
    let mut reversed = legs;
    reversed.reverse();
    let rs = relays(&["b", "a"]);
    assert_eq!(pick(&graph(&legs), &rs), pick(&graph(&reversed), &rs));
}

/// A graph of `(from, to, bps, recent error %)` legs.
fn graph_err(legs: &[(&str, &str, f64, Option<f64>)]) -> Graph {
    let legs = legs.iter().map(|&(f, t, b, err_pct)| Leg {
        err_pct,
        ..leg(f, t, b)
    });
    Graph::new(legs).expect("valid graph")
}

/// Params with the default threshold and `risk`.
fn risky(risk: f64) -> RouteParams {
    RouteParams {
        risk,
        ..params(2, 0.5)
    }
}

#[test]
fn a_steady_chain_beats_a_noisy_one_predicted_wider() {
    // Via a: 40 Mbit/s predicted, but its legs have recently erred by 60 % (judged 16).
    // Via b: 30, and its predictions have held (judged 30). Direct: 10, erring by 90 %.
    let g = graph_err(&[
        ("s", "t", 10e6, Some(90.0)),
        ("s", "a", 40e6, Some(60.0)),
        ("a", "t", 40e6, Some(60.0)),
        ("s", "b", 30e6, Some(0.0)),
        ("b", "t", 30e6, None),
    ]);
    let rs = relays(&["a", "b"]);
    let r = pick_with(&g, &rs, &risky(1.0));
    assert_eq!(r.hops, hops(&["s", "b", "t"]));
    assert_eq!(r.predicted_bps, 30e6);
    // Direct is judged at its prediction, whatever its error.
    assert_eq!(r.direct_bps, Some(10e6));
    assert_eq!(r.reason, Reason::Split { gain: 2.0 });
    // Without the margin the thesis's rule takes the wider prediction.
    let r = pick_with(&g, &rs, &risky(0.0));
    assert_eq!(r.hops, hops(&["s", "a", "t"]));
    assert_eq!(r.predicted_bps, 40e6);
    // Half a recent error: a is judged at 28, b at 30.
    assert_eq!(pick_with(&g, &rs, &risky(0.5)).hops, hops(&["s", "b", "t"]));
}

#[test]
fn a_noisy_chain_must_clear_the_threshold_at_its_judged_rate() {
    // 40 predicted against direct 10 (+300 %); with a recent error of 70 % it is judged at 12,
    // +20 %, under the threshold: direct. An error of 250 % is floored, not taken as down.
    let g = graph_err(&[
        ("s", "t", 10e6, None),
        ("s", "a", 40e6, Some(70.0)),
        ("a", "t", 40e6, Some(10.0)),
    ]);
    let r = pick_with(&g, &relays(&["a"]), &risky(1.0));
    assert_eq!(r.hops, hops(&["s", "t"]));
    let Reason::BelowThreshold { chain_bps, .. } = r.reason else {
        panic!("{r:?}");
    };
    assert!((chain_bps - 12e6).abs() < 1.0, "{chain_bps}");
    assert!(matches!(
        pick_with(&g, &relays(&["a"]), &risky(0.0)).reason,
        Reason::Split { .. }
    ));
    let g = graph_err(&[("s", "a", 40e6, Some(250.0)), ("a", "t", 40e6, None)]);
    let r = pick_with(&g, &relays(&["a"]), &risky(1.0));
    assert_eq!(r.hops, hops(&["s", "a", "t"]));
    assert!((r.predicted_bps - 40e6 * MIN_RISK_FACTOR).abs() < 1.0);
    assert_eq!(risk_factor(None, 3.0), 1.0);
    assert_eq!(risk_factor(Some(20.0), 2.0), 0.6);
}

#[test]
fn bad_input_is_refused_with_its_cause() {
    let bad = |l: Leg| Graph::new([leg("s", "t", 1.0), l]).map(|_| ());
    for bps in [-1.0, f64::NAN, f64::INFINITY] {
        assert!(matches!(
            bad(leg("s", "b", bps)),
            Err(RouteError::BadBps { .. })
        ));
    }
    let e = bad(leg("s", "t", 2.0));
    assert!(matches!(e, Err(RouteError::DuplicateLeg { .. })));
    assert!(matches!(
        bad(leg("b", "b", 2.0)),
        Err(RouteError::SelfLeg { .. })
    ));

    let g = graph(&[("s", "t", 1.0)]);
    let run = |rs: &[Candidate], p: RouteParams| choose(&g, "s", "t", rs, &p).map(|_| ());
    for d in [0.0, -0.5, 1.5, f64::NAN] {
        let e = run(&[cand("b", d)], RouteParams::default());
        assert!(matches!(e, Err(RouteError::BadDiscount { .. })), "{d}");
    }
    let e = run(&relays(&["b", "b"]), RouteParams::default());
    assert_eq!(e, Err(RouteError::DuplicateRelay { relay: "b".into() }));
    for t in [-0.1, f64::NAN, f64::INFINITY] {
        let e = run(&[], params(2, t));
        assert!(matches!(e, Err(RouteError::BadThreshold { .. })), "{t}");
        let e = run(&[], risky(t));
        assert!(matches!(e, Err(RouteError::BadRisk { .. })), "{t}");
        let l = Leg {
            err_pct: Some(t),
            ..leg("s", "b", 1.0)
        };
        assert!(matches!(bad(l), Err(RouteError::BadError { .. })), "{t}");
    }
    let e = choose(&g, "s", "s", &[], &RouteParams::default()).map(|_| ());
    assert_eq!(e, Err(RouteError::SameEndpoints { host: "s".into() }));
    assert!(RouteError::DuplicateRelay { relay: "r9".into() }
        .to_string()
        .contains("r9"));
}

#[test]
fn learned_discount_is_the_clamped_median_ratio() {
    assert_eq!(learn_discount(&[]), 1.0);
    let h = [(100.0, 80.0), (100.0, 60.0), (100.0, 90.0)];
    assert_eq!(learn_discount(&h), 0.8);
    assert_eq!(learn_discount(&[(100.0, 50.0), (200.0, 150.0)]), 0.625);
    // One stalled transfer does not sink a relay; a run of them floors it, not zeroes it.
    assert_eq!(
        learn_discount(&[(10.0, 9.0), (10.0, 0.0), (10.0, 8.0)]),
        0.8
    );
    assert_eq!(learn_discount(&[(10.0, 0.0), (10.0, 0.1)]), MIN_DISCOUNT);
    // Faster than predicted is predictor error, not a relay speeding things up.
    assert_eq!(learn_discount(&[(10.0, 30.0)]), 1.0);
    // Unusable pairs are skipped.
    let h = [
        (0.0, 5.0),
        (f64::NAN, 1.0),
        (10.0, -1.0),
        (10.0, f64::NAN),
        (10.0, 5.0),
    ];
    assert_eq!(learn_discount(&h), 0.5);
    assert_eq!(learn_discount(&h[..4]), 1.0);
}

#[test]
fn nest_url_puts_the_relays_first() {
    let u = |h: &[&str]| h.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        nest_url(&u(&["ftp://dst:2811"]), "/data/f"),
        Ok("ftp://dst:2811/data/f".into())
    );
    let url = nest_url(
        &u(&["ftp://r1:2811/", "haul://r2:2812", "ftp://dst:2811"]),
        "data/f",
    );
    assert_eq!(
        url,
        Ok("ftp://r1:2811/haul://r2:2812/ftp://dst:2811/data/f".into())
    );
    assert_eq!(nest_url(&[], "/f"), Err(RouteError::NoHops));
    for bad in [
        "dst:2811",
        "://dst",
        "ftp://",
        "ftp://d/x",
        "ftp://d st",
        "f p://d",
    ] {
        let e = nest_url(&u(&["ftp://r1", bad]), "/f");
        assert_eq!(e, Err(RouteError::BadHopUrl { index: 1 }), "{bad}");
    }
}

#[test]
fn nested_urls_parse_back_hop_by_hop() {
    let hops = ["ftp://r1:2811", "ftp://r2:2812", "ftp://dst:2813"].map(String::from);
    let url = nest_url(&hops, "/data/f").expect("valid hops");
    // The client connects to r1 and sends it the rest; each relay peels one level.
    let mut path = url
        .strip_prefix("ftp://r1:2811")
        .expect("r1 first")
        .to_string();
    for want in ["r2:2812", "dst:2813"] {
        let next = nested(&path).expect("nested").expect("valid");
        assert_eq!(next.hop(), want);
        path = next.url.path;
    }
    assert_eq!(path, "/data/f");
}
