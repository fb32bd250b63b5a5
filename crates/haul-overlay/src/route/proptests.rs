//! Properties on random graphs (up to 8 hosts, legs missing, down, tied or arbitrary): the
//! widest-path search agrees with brute-force enumeration, and its routes are valid chains.

use std::collections::{HashMap, HashSet};
use std::mem::discriminant;

use proptest::prelude::*;

use super::*;

/// A random instance: hosts `h0..hN` (source h0, destination h1), a prediction per ordered pair,
/// a discount per host that is offered as a relay (the endpoints may be offered too), settings.
#[derive(Debug, Clone)]
struct Case {
    legs: Vec<Leg>,
    relays: Vec<Candidate>,
    params: RouteParams,
}

/// Missing, down, a small integer (to force ties) or any throughput.
fn bps() -> impl Strategy<Value = Option<f64>> {
    prop_oneof![
        2 => Just(None),
        1 => Just(Some(0.0)),
        3 => (1u32..=6).prop_map(|v| Some(f64::from(v))),
        2 => (0.001f64..1e9).prop_map(Some),
    ]
}

/// No overhead, round factors, or any factor.
fn discount() -> impl Strategy<Value = f64> {
    prop_oneof![Just(1.0), Just(0.5), Just(0.25), MIN_DISCOUNT..=1.0]
}

/// No error known, none, round errors, or any (past 100 %: the factor's floor).
fn err() -> impl Strategy<Value = Option<f64>> {
    prop_oneof![
        Just(None),
        Just(Some(0.0)),
        Just(Some(50.0)),
        (0.0..150.0).prop_map(Some)
    ]
}

/// A random [`Case`].
fn case() -> impl Strategy<Value = Case> {
    (2usize..=8).prop_flat_map(|n| {
        (
            prop::collection::vec(bps(), n * (n - 1)),
            prop::collection::vec(prop::option::of(discount()), n),
            0usize..=3,
            prop_oneof![Just(0.0), Just(0.5), Just(1.0)],
            any::<bool>(),
            prop::collection::vec(err(), n * (n - 1)),
            prop_oneof![Just(0.0), Just(1.0), 0.0..3.0],
        )
            .prop_map(
                move |(preds, offered, max_relays, threshold, rev, errs, risk)| {
                    let pairs =
                        (0..n).flat_map(|u| (0..n).filter(move |&v| v != u).map(move |v| (u, v)));
                    let legs = pairs
                        .zip(preds.into_iter().zip(errs))
                        .filter_map(|((u, v), (b, err_pct))| {
                            Some(Leg {
                                from: format!("h{u}"),
                                to: format!("h{v}"),
                                bps: b?,
                                age_s: 1.0,
                                samples: 1,
                                err_pct,
                            })
                        })
                        .collect();
                    let mut relays: Vec<Candidate> = offered
                        .into_iter()
                        .enumerate()
                        .filter_map(|(i, d)| {
                            Some(Candidate {
                                host: format!("h{i}"),
                                discount: d?,
                            })
                        })
                        .collect();
                    if rev {
                        relays.reverse();
                    }
                    let params = RouteParams {
                        max_relays,
                        threshold,
                        risk,
                    };
                    Case {
                        legs,
                        relays,
                        params,
                    }
                },
            )
    })
}

/// The scaled legs of `hops` (the model of the module comment), in order: a chain's legs less
/// `risk` recent errors, direct at its prediction.
fn scaled(g: &Graph, hops: &[HostId], relays: &[Candidate], risk: f64) -> Vec<f64> {
    let risk = if hops.len() > 2 { risk } else { 0.0 };
    let factor: HashMap<&str, f64> = relays
        .iter()
        .filter(|c| c.host != "h0" && c.host != "h1")
        .map(|c| (c.host.as_str(), c.discount))
        .collect();
    let f = |h: &str| factor.get(h).copied().unwrap_or(1.0);
    hops.windows(2)
        .map(|p| {
            g.leg(&p[0], &p[1]).map_or(0.0, |l| {
                let judged = match l.err_pct {
                    Some(e) => (1.0 - risk * e / 100.0).max(MIN_RISK_FACTOR),
                    None => 1.0,
                };
                l.bps * f(&p[0]) * f(&p[1]) * judged
            })
        })
        .collect()
}

/// What the tie-break rules fix about a route: everything but the last-resort order.
fn key(g: &Graph, r: &Route, c: &Case) -> (f64, Option<f64>, Option<f64>, usize, f64) {
    let (chain, bps) = match &r.reason {
        Reason::BelowThreshold {
            best_chain,
            chain_bps,
            ..
        } => (best_chain.as_slice(), *chain_bps),
        _ => (r.hops.as_slice(), r.predicted_bps),
    };
    let sum = scaled(g, chain, &c.relays, c.params.risk).iter().sum();
    (bps, r.direct_bps, r.gain, chain.len(), sum)
}

/// Checks that `r` is a valid route for `c` on `g`.
fn check_valid(g: &Graph, c: &Case, r: &Route) -> Result<(), TestCaseError> {
    let n = r.hops.len();
    prop_assert!(n >= 2 && n <= c.params.max_relays + 2, "{:?}", r.hops);
    prop_assert_eq!((r.hops[0].as_str(), r.hops[n - 1].as_str()), ("h0", "h1"));
    let offered: HashSet<&str> = c.relays.iter().map(|c| c.host.as_str()).collect();
    let mut seen = HashSet::new();
    for h in r.relays() {
        prop_assert!(
            h != "h0" && h != "h1" && offered.contains(h.as_str()),
            "{h}"
        );
        prop_assert!(seen.insert(h), "{h} twice");
    }
    prop_assert_eq!(r.direct_bps, g.leg("h0", "h1").map(|l| l.bps));
    if r.reason == Reason::Unreachable {
        prop_assert_eq!(r.predicted_bps, 0.0);
        return Ok(());
    }
    let legs: Vec<Leg> = r
        .hops
        .windows(2)
        .filter_map(|p| g.leg(&p[0], &p[1]).cloned())
        .collect();
    prop_assert_eq!(&r.legs, &legs);
    prop_assert_eq!(legs.len(), n - 1);
    let w = scaled(g, &r.hops, &c.relays, c.params.risk);
    prop_assert!(w.iter().all(|&w| w > 0.0), "{:?}", w);
    prop_assert_eq!(
        r.predicted_bps,
        w.iter().copied().fold(f64::INFINITY, f64::min)
    );
    if let Reason::Split { gain } = r.reason {
        prop_assert!(gain > c.params.threshold);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn widest_path_matches_brute_force(c in case()) {
        let g = Graph::new(c.legs.clone()).expect("valid graph");
        let fast = choose(&g, "h0", "h1", &c.relays, &c.params).expect("valid input");
        let slow = brute_force(&g, "h0", "h1", &c.relays, &c.params).expect("valid input");
        check_valid(&g, &c, &fast)?;
        check_valid(&g, &c, &slow)?;
        prop_assert_eq!(discriminant(&fast.reason), discriminant(&slow.reason));
        prop_assert_eq!(fast.predicted_bps, slow.predicted_bps);
        prop_assert_eq!(key(&g, &fast, &c), key(&g, &slow, &c));
    }

    #[test]
    fn learned_discount_is_in_range_and_order_free(
        mut h in prop::collection::vec((0.0f64..1e9, 0.0f64..2e9), 0..20),
    ) {
        let d = learn_discount(&h);
        prop_assert!((MIN_DISCOUNT..=1.0).contains(&d), "{d}");
        h.reverse();
        prop_assert_eq!(learn_discount(&h), d);
    }
}
