//! Property tests: DPMS and CPMS equal brute force on small random instances, RGMS never beats
//! DPMS and respects its cap, and the thesis's generator feeds all of them consistently.

use haul_plan::{
    brute_force, cost_cap, cpms, dpms, generate, rgms, CapRule, Edge, GenParams, Instance, Module,
    Plan, PlanError, Term, Weights, Zone,
};
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::SeedableRng;

/// One module's drawn values: two profit terms in [0, 1] and a cost.
type Drawn = ((f64, f64), u32);

/// Builds an instance from drawn modules and one keep-flag per possible edge of each gap.
fn build(modules: Vec<Vec<Drawn>>, links: Vec<Vec<bool>>) -> Instance {
    let zones: Vec<Zone> = modules
        .iter()
        .enumerate()
        .map(|(j, ms)| {
            let ms = ms
                .iter()
                .enumerate()
                .map(|(i, &((a, b), cost))| {
                    let terms = vec![Term::new(a, "history"), Term::new(b, "profile")];
                    Module::new(format!("m{j}.{i}"), terms, cost)
                })
                .collect();
            Zone::new(format!("z{j}"), ms)
        })
        .collect();
    let mut edges = Vec::new();
    for (j, keep) in links.iter().enumerate() {
        let next = modules[j + 1].len();
        for (e, _) in keep.iter().enumerate().filter(|(_, k)| **k) {
            edges.push(Edge {
                zone: j,
                from: e / next,
                to: e % next,
            });
        }
    }
    Instance::new(zones, &edges).expect("drawn edges are in range")
}

/// Up to 6 zones of 1–4 modules, costs 0–20, each possible edge kept with probability 0.7.
fn instance() -> impl Strategy<Value = Instance> {
    prop::collection::vec(1usize..=4, 1..=6)
        .prop_flat_map(|sizes| {
            let modules: Vec<_> = sizes
                .iter()
                .map(|&n| prop::collection::vec(((0.0..1.0, 0.0..1.0), 0u32..=20), n))
                .collect();
            let links: Vec<_> = sizes
                .windows(2)
                .map(|w| prop::collection::vec(prop::bool::weighted(0.7), w[0] * w[1]))
                .collect();
            (modules, links)
        })
        .prop_map(|(modules, links)| build(modules, links))
}

fn weights() -> impl Strategy<Value = Weights> {
    (0.0..3.0, 0.0..3.0).prop_map(|(a, b)| Weights::new(vec![a, b]).expect("finite, ≥ 0"))
}

/// Checks that a plan is a path of `inst` whose profit and cost are what it claims.
fn valid(inst: &Instance, w: &Weights, plan: &Plan) -> Result<(), TestCaseError> {
    prop_assert!(
        inst.is_path(&plan.modules),
        "{:?} is not a path",
        plan.modules
    );
    let mut profit = 0.0;
    let mut cost = 0;
    for (_, m) in plan.chosen(inst) {
        profit += w.profit(m).expect("same length");
        cost += u64::from(m.cost);
    }
    prop_assert_eq!((profit, cost), (plan.profit, plan.cost));
    Ok(())
}

/// Both exact: the same profit, or the same error.
fn same_optimum(
    inst: &Instance,
    w: &Weights,
    got: Result<Plan, PlanError>,
    want: Result<Plan, PlanError>,
) -> Result<(), TestCaseError> {
    match (got, want) {
        (Ok(got), Ok(want)) => {
            valid(inst, w, &got)?;
            prop_assert_eq!(got.profit, want.profit);
        }
        (got, want) => prop_assert_eq!(got.err(), want.err()),
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn dpms_equals_brute_force_and_respects_the_cap(
        inst in instance(), w in weights(), cap in 0u64..=130,
    ) {
        let got = dpms(&inst, &w, cap);
        if let Ok(plan) = &got {
            prop_assert!(plan.cost <= cap);
        }
        same_optimum(&inst, &w, got, brute_force(&inst, &w, Some(cap)))?;
    }

    #[test]
    fn cpms_equals_brute_force_without_a_cap(inst in instance(), w in weights()) {
        same_optimum(&inst, &w, cpms(&inst, &w), brute_force(&inst, &w, None))?;
        if let Ok(plan) = cpms(&inst, &w) {
            let unbounded = dpms(&inst, &w, u64::MAX).expect("a path exists");
            prop_assert_eq!(unbounded.profit, plan.profit);
        }
    }

    #[test]
    fn rgms_never_beats_dpms_and_respects_the_cap(
        inst in instance(), w in weights(), cap in 0u64..=130, seed in any::<u64>(),
    ) {
        let mut rng = StdRng::seed_from_u64(seed);
        let greedy = rgms(&inst, &w, Some(cap), &mut rng);
        match (greedy, dpms(&inst, &w, cap)) {
            (Ok(g), Ok(best)) => {
                valid(&inst, &w, &g)?;
                prop_assert!(g.cost <= cap);
                prop_assert!(g.profit <= best.profit);
            }
            (g, best) => prop_assert_eq!(g.err(), best.err()),
        }
        if let (Ok(g), Ok(best)) = (rgms(&inst, &w, None, &mut rng), cpms(&inst, &w)) {
            valid(&inst, &w, &g)?;
            prop_assert!(g.profit <= best.profit);
        }
    }

    #[test]
    fn dpms_profit_grows_with_the_cap(
        inst in instance(), w in weights(), cap in 0u64..=100, more in 0u64..=30,
    ) {
        if let Ok(low) = dpms(&inst, &w, cap) {
            let high = dpms(&inst, &w, cap + more).expect("a looser cap stays feasible");
            prop_assert!(high.profit >= low.profit);
        }
    }

    #[test]
    fn generated_instances_under_both_cap_rules(
        k in 1usize..=7, per in 1usize..=3, d in prop::sample::select(vec![0.25, 0.5, 0.75, 1.0]),
        seed in any::<u64>(),
    ) {
        let params = GenParams::new(k * per + k / 2, k, d).expect("valid params");
        let mut rng = StdRng::seed_from_u64(seed);
        let inst = generate(&params, &mut rng);
        let w = Weights::ones(1);
        for rule in [CapRule::Rgms, CapRule::QuarterMax] {
            // RGMS breaks ties at random: the plan whose cost is the cap is the one drawn from
            // the same RNG state.
            let mut same = rng.clone();
            let cap = cost_cap(rule, &inst, &w, &mut rng).expect("cap");
            let best = dpms(&inst, &w, cap).expect("both rules are feasible");
            prop_assert!(best.cost <= cap);
            same_optimum(&inst, &w, Ok(best.clone()), brute_force(&inst, &w, Some(cap)))?;
            if rule == CapRule::Rgms {
                let greedy = rgms(&inst, &w, None, &mut same).expect("generated instances have paths");
                prop_assert_eq!(greedy.cost, cap);
                prop_assert!(best.profit >= greedy.profit, "C_RGMS admits the RGMS plan");
            }
        }
    }
}
