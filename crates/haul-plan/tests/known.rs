//! CPMS, DPMS, RGMS, the cap rules and the errors on small hand-built instances with known answers.

use haul_plan::{
    brute_force, cost_cap, cost_range, cpms, dpms, rgms, CapRule, Edge, Instance, Module,
    PlanError, Term, Weights, Zone,
};
use rand::rngs::StdRng;
use rand::SeedableRng;

/// A module with one profit term.
fn m(id: &str, profit: f64, cost: u32) -> Module {
    Module::new(id, vec![Term::new(profit, "operator")], cost)
}

/// Three fully connected zones. Paths (profit, cost): ace 12/4, acf 15/7, ade 16/7, adf 19/10,
/// bce 16/9, bcf 19/12, bde 20/12, bdf 23/15.
fn three_zones() -> Instance {
    Instance::fully_connected(vec![
        Zone::new("host", vec![m("a", 5.0, 1), m("b", 9.0, 6)]),
        Zone::new("network", vec![m("c", 4.0, 2), m("d", 8.0, 5)]),
        Zone::new("transport", vec![m("e", 3.0, 1), m("f", 6.0, 4)]),
    ])
    .expect("valid instance")
}

fn one() -> Weights {
    Weights::ones(1)
}

fn rng() -> StdRng {
    StdRng::seed_from_u64(7)
}

#[test]
fn cpms_takes_the_most_profitable_path() {
    let inst = three_zones();
    assert!(
        inst.preds(0, 1).is_empty(),
        "zone 0 follows only the virtual start"
    );
    assert_eq!(inst.preds(2, 1), [0, 1]);
    assert_eq!((inst.module_count(), inst.edge_count()), (6, 8));
    let plan = cpms(&inst, &one()).expect("plan");
    assert_eq!(plan.modules, vec![1, 1, 1]);
    assert_eq!((plan.profit, plan.cost), (23.0, 15));
}

#[test]
fn dpms_answers_for_every_cap() {
    let inst = three_zones();
    let cases: [(u64, [usize; 3], f64, u64); 7] = [
        (1000, [1, 1, 1], 23.0, 15),
        (15, [1, 1, 1], 23.0, 15),
        (14, [1, 1, 0], 20.0, 12),
        (10, [0, 1, 1], 19.0, 10),
        (8, [0, 1, 0], 16.0, 7),
        (6, [0, 0, 0], 12.0, 4),
        (4, [0, 0, 0], 12.0, 4),
    ];
    for (cap, modules, profit, cost) in cases {
        let plan = dpms(&inst, &one(), cap).expect("feasible");
        assert_eq!(plan.modules, modules, "cap {cap}");
        assert_eq!((plan.profit, plan.cost), (profit, cost), "cap {cap}");
        let brute = brute_force(&inst, &one(), Some(cap)).expect("feasible");
        assert_eq!(brute.profit, plan.profit, "cap {cap}");
    }
}

#[test]
fn dpms_under_the_cheapest_path_says_what_the_cheapest_costs() {
    let err = dpms(&three_zones(), &one(), 3).expect_err("infeasible");
    assert_eq!(
        err,
        PlanError::OverCap {
            cap: 3,
            cheapest: 4
        }
    );
    assert!(err
        .to_string()
        .contains("cheapest complete workflow costs 4"));
    assert_eq!(rgms(&three_zones(), &one(), Some(3), &mut rng()), Err(err));
}

#[test]
fn rgms_takes_the_best_ratio_in_each_zone() {
    let plan = rgms(&three_zones(), &one(), None, &mut rng()).expect("plan");
    assert_eq!(plan.modules, vec![0, 0, 0], "ratios a 5, c 2, e 3");
    assert_eq!((plan.profit, plan.cost), (12.0, 4));
}

#[test]
fn cost_range_and_both_cap_rules() {
    let inst = three_zones();
    assert_eq!(cost_range(&inst), Ok((4, 15)));
    let quarter = cost_cap(CapRule::QuarterMax, &inst, &one(), &mut rng());
    assert_eq!(quarter, Ok(4), "max{{4, ⌊15/4⌋}}");
    assert_eq!(cost_cap(CapRule::Rgms, &inst, &one(), &mut rng()), Ok(4));
}

/// Two zones where a (profit 10) leads only to c (1) and b (2) only to d (10).
fn crossed() -> Instance {
    let edges = [
        Edge {
            zone: 0,
            from: 0,
            to: 0,
        },
        Edge {
            zone: 0,
            from: 1,
            to: 1,
        },
    ];
    Instance::new(
        vec![
            Zone::new("z0", vec![m("a", 10.0, 1), m("b", 2.0, 1)]),
            Zone::new("z1", vec![m("c", 1.0, 1), m("d", 10.0, 1)]),
        ],
        &edges,
    )
    .expect("valid instance")
}

#[test]
fn the_planners_follow_edges() {
    let inst = crossed();
    assert_eq!(inst.edge_count(), 2);
    assert!(inst.has_edge(0, 1, 1) && !inst.has_edge(0, 0, 1));
    assert_eq!(cpms(&inst, &one()).expect("plan").modules, vec![1, 1]);
    assert_eq!(dpms(&inst, &one(), 2).expect("plan").modules, vec![1, 1]);
    let greedy = rgms(&inst, &one(), None, &mut rng()).expect("plan");
    assert_eq!((greedy.modules, greedy.profit), (vec![0, 0], 11.0));
}

#[test]
fn capped_rgms_skips_a_module_whose_completion_is_over_the_cap() {
    let edges = [(0, 0), (1, 1)].map(|(from, to)| Edge { zone: 0, from, to });
    let inst = Instance::new(
        vec![
            Zone::new("z0", vec![m("x", 50.0, 1), m("y", 10.0, 1)]),
            Zone::new("z1", vec![m("u", 100.0, 10), m("v", 1.0, 1)]),
        ],
        &edges,
    )
    .expect("valid instance");
    let free = rgms(&inst, &one(), None, &mut rng()).expect("plan");
    assert_eq!((free.modules, free.cost), (vec![0, 0], 11));
    let capped = rgms(&inst, &one(), Some(5), &mut rng()).expect("plan");
    assert_eq!((capped.modules, capped.cost), (vec![1, 1], 2));
    assert_eq!(dpms(&inst, &one(), 5).expect("plan").modules, vec![1, 1]);
}

#[test]
fn profit_is_the_weighted_sum_and_keeps_its_sources() {
    let terms = vec![Term::new(0.5, "history"), Term::new(1.0, "profile")];
    let inst = Instance::fully_connected(vec![Zone::new(
        "transport",
        vec![Module::new("udt", terms, 3)],
    )])
    .expect("valid instance");
    let w = Weights::new(vec![2.0, 1.0]).expect("weights");
    let plan = cpms(&inst, &w).expect("plan");
    assert_eq!((plan.profit, plan.cost), (2.0, 3), "Eq. 2.3: 2·0.5 + 1·1.0");
    let (zone, module) = plan.chosen(&inst).next().expect("one zone");
    assert_eq!(
        (zone.name.as_str(), module.id.as_str()),
        ("transport", "udt")
    );
    let sources: Vec<&str> = module.profit.iter().map(|t| t.source.as_ref()).collect();
    assert_eq!(sources, ["history", "profile"]);
}

#[test]
fn a_single_zone_is_a_choice_of_one_module() {
    let inst = Instance::fully_connected(vec![Zone::new(
        "only",
        vec![m("a", 3.0, 5), m("b", 7.0, 9), m("c", 5.0, 2)],
    )])
    .expect("valid instance");
    assert_eq!(dpms(&inst, &one(), 8).expect("plan").modules, vec![2]);
    assert_eq!(dpms(&inst, &one(), 9).expect("plan").modules, vec![1]);
    assert_eq!(cpms(&inst, &one()).expect("plan").modules, vec![1]);
}

#[test]
fn bad_instances_are_refused_with_the_reason() {
    assert_eq!(Instance::new(vec![], &[]), Err(PlanError::NoZones));
    let zones = || {
        vec![
            Zone::new("z0", vec![m("a", 1.0, 1)]),
            Zone::new("z1", vec![]),
        ]
    };
    assert!(matches!(
        Instance::fully_connected(zones()),
        Err(PlanError::EmptyZone { zone: 1, .. })
    ));
    let two = || {
        vec![
            Zone::new("z0", vec![m("a", 1.0, 1)]),
            Zone::new("z1", vec![m("b", 1.0, 1)]),
        ]
    };
    for (zone, from, to) in [(1, 0, 0), (0, 1, 0), (0, 0, 1)] {
        let err = Instance::new(two(), &[Edge { zone, from, to }]).expect_err("bad edge");
        assert!(matches!(err, PlanError::BadEdge { .. }), "{err}");
    }
    let unlinked = Instance::new(two(), &[]).expect("valid, but with no path");
    let no_path = Err(PlanError::NoPath {
        zone: 1,
        name: "z1".into(),
    });
    assert_eq!(cpms(&unlinked, &one()), no_path);
    assert_eq!(dpms(&unlinked, &one(), 10), no_path);
    assert_eq!(rgms(&unlinked, &one(), None, &mut rng()), no_path);
    assert_eq!(brute_force(&unlinked, &one(), None), no_path);
}

#[test]
fn bad_weights_are_refused() {
    assert!(matches!(
        Weights::new(vec![1.0, -0.5]),
        Err(PlanError::NotFinite { .. })
    ));
    assert!(Weights::new(vec![f64::NAN]).is_err());
    let err = cpms(&three_zones(), &Weights::ones(2)).expect_err("mismatch");
    assert!(
        matches!(
            err,
            PlanError::WeightMismatch {
                terms: 1,
                weights: 2,
                ..
            }
        ),
        "{err}"
    );
    let nan = Instance::fully_connected(vec![Zone::new("z", vec![m("a", f64::NAN, 1)])])
        .expect("valid shape");
    assert!(matches!(
        dpms(&nan, &one(), 5),
        Err(PlanError::NotFinite { .. })
    ));
}

#[test]
fn exact_searches_refuse_oversized_work() {
    let dear = Instance::fully_connected(vec![
        Zone::new("z0", vec![m("a", 1.0, u32::MAX)]),
        Zone::new("z1", vec![m("b", 1.0, u32::MAX)]),
    ])
    .expect("valid instance");
    let err = dpms(&dear, &one(), u64::MAX).expect_err("table too large");
    assert!(matches!(err, PlanError::TooLarge { .. }), "{err}");
    let wide: Vec<Zone> = (0..23)
        .map(|j| Zone::new(format!("z{j}"), vec![m("a", 1.0, 1), m("b", 2.0, 1)]))
        .collect();
    let wide = Instance::fully_connected(wide).expect("valid instance");
    assert!(matches!(
        brute_force(&wide, &one(), None),
        Err(PlanError::TooLarge { .. })
    ));
    assert_eq!(dpms(&wide, &one(), 23).expect("plan").profit, 46.0);
}
