//! The random instance generator (§2.7.1 of 000): sizes, edges, values, determinism, bad params.

use haul_plan::{generate, GenParams, Instance, PlanError, GENERATED};
use rand::rngs::StdRng;
use rand::SeedableRng;

fn make(modules: usize, zones: usize, d: f64, seed: u64) -> Instance {
    let params = GenParams::new(modules, zones, d).expect("valid params");
    generate(&params, &mut StdRng::seed_from_u64(seed))
}

fn sizes(inst: &Instance) -> Vec<usize> {
    inst.zones().iter().map(|z| z.modules.len()).collect()
}

#[test]
fn sizes_sum_to_m_and_stay_in_the_thesis_range() {
    for (m, k) in [(1000, 10), (1000, 100), (10_000, 100), (500, 500), (37, 5)] {
        let params = GenParams::new(m, k, 0.5).expect("valid");
        let hi = params.zone_size_max();
        let inst = generate(&params, &mut StdRng::seed_from_u64(1));
        let s = sizes(&inst);
        assert_eq!((s.len(), s.iter().sum::<usize>()), (k, m));
        assert!(s.iter().all(|&n| (1..=hi).contains(&n)), "{s:?} vs hi {hi}");
        assert_eq!(inst.module_count(), m);
    }
    assert_eq!(
        GenParams::new(10_000, 100, 1.0)
            .expect("valid")
            .zone_size_max(),
        150
    );
}

#[test]
fn literal_sizes_keep_the_draw() {
    let params = GenParams::new(10_000, 100, 0.5)
        .expect("valid")
        .with_literal_sizes();
    let totals: Vec<usize> = (0..8)
        .map(|seed| generate(&params, &mut StdRng::seed_from_u64(seed)).module_count())
        .collect();
    // Uniform on [1, 150]: mean 75.5 per zone, so 7,550 ± 433 in all.
    let mean = totals.iter().sum::<usize>() / totals.len();
    assert!((7_100..8_000).contains(&mean), "{totals:?}");
}

#[test]
fn every_module_has_a_predecessor_and_a_successor() {
    for d in [0.25, 0.5, 0.75, 1.0] {
        let inst = make(600, 12, d, 5);
        let k = inst.zone_count();
        for j in 0..k {
            for i in 0..inst.zones()[j].modules.len() {
                if j > 0 {
                    assert!(
                        !inst.preds(j, i).is_empty(),
                        "d {d}: m{j}.{i} has no predecessor"
                    );
                }
                if j + 1 < k {
                    let next = inst.zones()[j + 1].modules.len();
                    assert!(
                        (0..next).any(|b| inst.has_edge(j, i, b)),
                        "d {d}: m{j}.{i} has no successor"
                    );
                }
            }
        }
    }
}

#[test]
fn density_sets_the_fanout() {
    let full = make(1000, 10, 1.0, 9);
    let s = sizes(&full);
    let all: usize = s.windows(2).map(|w| w[0] * w[1]).sum();
    assert_eq!(
        full.edge_count(),
        all,
        "d = 1 connects adjacent zones fully"
    );
    let half = make(1000, 10, 0.5, 9);
    let s = sizes(&half);
    let drawn: usize = s
        .windows(2)
        .map(|w| w[0] * ((0.5 * w[1] as f64).round() as usize).max(1))
        .sum();
    let fixups: usize = s[1..].iter().sum();
    assert!(
        (drawn..=drawn + fixups).contains(&half.edge_count()),
        "{} edges, {drawn} drawn",
        half.edge_count()
    );
}

#[test]
fn values_are_integers_in_range_with_a_source_label() {
    let inst = make(2000, 20, 0.25, 11);
    for z in inst.zones() {
        for m in &z.modules {
            assert!((1..=100).contains(&m.cost));
            assert_eq!(m.profit.len(), 1);
            let p = m.profit[0].value;
            assert!((1.0..=100.0).contains(&p) && p.fract() == 0.0, "{p}");
            assert_eq!(m.profit[0].source, GENERATED);
        }
    }
    let narrow = GenParams::new(50, 5, 1.0)
        .and_then(|p| p.with_values(7, 7))
        .expect("valid");
    let inst = generate(&narrow, &mut StdRng::seed_from_u64(0));
    assert!(inst.zones()[0].modules.iter().all(|m| m.cost == 7));
}

#[test]
fn the_same_seed_gives_the_same_instance() {
    assert_eq!(make(3000, 30, 0.75, 42), make(3000, 30, 0.75, 42));
    assert_ne!(make(3000, 30, 0.75, 42), make(3000, 30, 0.75, 43));
}

#[test]
fn bad_parameters_are_refused() {
    let bad = |r: Result<GenParams, PlanError>, name: &str| match r {
        Err(PlanError::BadParams { name: n, .. }) => assert_eq!(n, name),
        other => panic!("expected a bad {name}, got {other:?}"),
    };
    bad(GenParams::new(10, 0, 0.5), "K");
    bad(GenParams::new(5, 10, 0.5), "|M|");
    bad(GenParams::new(100, 10, 0.0), "d");
    bad(GenParams::new(100, 10, 1.5), "d");
    bad(GenParams::new(100, 10, f64::NAN), "d");
    bad(
        GenParams::new(100, 10, 0.5).and_then(|p| p.with_xi(0.0)),
        "ξ",
    );
    bad(
        GenParams::new(100, 10, 0.5).and_then(|p| p.with_values(5, 4)),
        "values",
    );
}
