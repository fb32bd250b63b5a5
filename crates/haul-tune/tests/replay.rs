//! The acceptance check: on the synthetic ANL–UChicago-like table, FastProf beats random
//! walk and Tabu search on all four replay metrics (fixed seeds, 1,000 runs each).

use haul_tune::random_walk::{self, RandomWalk};
use haul_tune::replay::replay;
use haul_tune::spsa::{Spsa, SpsaConfig, Start};
use haul_tune::surface::{anl_uchicago_like, Noise, Table, TEN_GBPS};
use haul_tune::tabu::{self, Tabu};
use haul_tune::{Space, Stopping};

#[test]
fn fastprof_beats_random_walk_and_tabu_on_all_four_metrics() {
    let table = anl_uchicago_like(7);
    let sp = Space::block_buffer();
    // The Fig. 4.8 setting: 𝒞 = 0.90, ℛ = 30, ℳ = ∞ (a finite ℳ makes every max probe count ℳ).
    let st = Stopping::new(Some(TEN_GBPS))
        .gain_ratio(0.90)
        .patience(30)
        .budget(None);
    let goal = 0.90 * TEN_GBPS;
    let runs = 1000;
    let noise = Noise::default();
    let fp = replay(
        |s| Spsa::new(sp.clone(), SpsaConfig::new(st.clone()), s),
        &table,
        noise,
        runs,
        42,
        goal,
    )
    .expect("replay");
    let rw = replay(
        |s| {
            RandomWalk::new(
                sp.clone(),
                Start::Random,
                random_walk::DEFAULT_STEP,
                st.clone(),
                s,
            )
        },
        &table,
        noise,
        runs,
        42,
        goal,
    )
    .expect("replay");
    let tb = replay(
        |s| {
            Tabu::new(
                sp.clone(),
                Start::Random,
                tabu::DEFAULT_STEP,
                tabu::DEFAULT_TENURE,
                st.clone(),
                s,
            )
        },
        &table,
        noise,
        runs,
        42,
        goal,
    )
    .expect("replay");
    for other in [&rw, &tb] {
        assert!(
            fp.mean_throughput > other.mean_throughput,
            "{fp:?} vs {other:?}"
        );
        assert!(fp.pct_meeting > other.pct_meeting, "{fp:?} vs {other:?}");
        assert!(fp.mean_probes < other.mean_probes, "{fp:?} vs {other:?}");
        assert!(fp.max_probes < other.max_probes, "{fp:?} vs {other:?}");
    }
}

#[test]
fn synthetic_table_has_the_anl_shape() {
    let t = anl_uchicago_like(7);
    assert_eq!(t.axes[0].len(), 25);
    assert_eq!(t.axes[1].len(), 513);
    let gbps = |v: f64| v * 8.0 / 1e9;
    for (i, &l) in t.axes[0].iter().enumerate() {
        for (j, &f) in t.axes[1].iter().enumerate() {
            let v = gbps(t.values[i * 513 + j]);
            if f < 475e6 {
                assert!(v < 6.0, "buffer below BDP: {v} at {l}, {f}");
            } else if i < 4 {
                assert!(v < 7.0, "block ≤ 4 payloads: {v}");
            }
            assert!(v <= 10.0);
        }
    }
    assert!(gbps(t.max()) > 9.7);
    let good = t.fraction_at_least(0.9 * TEN_GBPS);
    assert!((0.05..0.30).contains(&good), "acceptable area {good}");
}

#[test]
fn tables_round_trip_through_csv() {
    let t = anl_uchicago_like(2);
    let back = Table::from_csv(&t.to_csv()).expect("parses");
    assert_eq!(back.axes, t.axes);
    assert_eq!(back.values.len(), t.values.len());
    assert!(
        Table::from_csv("block,buffer,throughput\n1,1,5\n1,2,6\n2,1,7\n").is_err(),
        "incomplete grid"
    );
    assert!(
        Table::from_csv("block,buffer,throughput\n1,1,5\n1,1,6\n").is_err(),
        "duplicate"
    );
    assert!(
        Table::from_csv("block,throughput\n1,x\n").is_err(),
        "not a number"
    );
    assert!(Table::from_csv("").is_err());
    let small =
        Table::from_csv("# comment\nx,y,throughput\n1,1,1\n1,2,2\n2,1,3\n2,2,4\n").expect("2x2");
    use haul_tune::surface::Surface;
    assert_eq!(small.value(&[2.0, 1.9]), 4.0);
    assert_eq!(small.value(&[0.0, 0.0]), 1.0);
}
