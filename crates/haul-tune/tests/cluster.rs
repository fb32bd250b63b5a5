//! File clusters, the Alg. 2 heuristic, and MC / ProMC channel allocation.

use haul_tune::cluster::{heuristic, partition, Allocation, Cutoffs, FileClass, Policy};

const BDP: f64 = 475e6;
const MIB: f64 = 1_048_576.0;

#[test]
fn alg2_heuristic_rounds_and_clamps() {
    let small = heuristic(1e6, BDP, 16.0 * MIB);
    assert_eq!(small.pipelining, 475);
    assert_eq!(small.parallelism, 1);
    let huge = heuristic(100e9, BDP, 16.0 * MIB);
    assert_eq!(huge.pipelining, 1, "BDP/avg rounds to 0, clamped to 1");
    assert_eq!(huge.parallelism, 29, "ceil(475e6 / 16 MiB)");
}

#[test]
fn partition_by_default_cutoffs() {
    let sizes = [
        1_000_000,
        10_000_000,
        100_000_000,
        1_000_000_000,
        20_000_000_000,
        0,
    ];
    let cl = partition(&sizes, BDP, 16.0 * MIB, &Cutoffs::default()).expect("valid");
    let classes: Vec<FileClass> = cl.iter().map(|c| c.class).collect();
    assert_eq!(
        classes,
        vec![
            FileClass::Small,
            FileClass::Middle,
            FileClass::Large,
            FileClass::Huge
        ]
    );
    assert_eq!(cl[0].files, vec![0, 1, 5]);
    assert_eq!(cl[1].files, vec![2]);
    assert_eq!(cl[3].files, vec![4]);
    let bad = Cutoffs {
        small_below: 2.0,
        middle_below: 1.0,
        large_below: 20.0,
    };
    assert!(partition(&sizes, BDP, MIB, &bad).is_err());
    assert!(partition(&sizes, 0.0, MIB, &Cutoffs::default()).is_err());
}

#[test]
fn multi_cluster_round_robin_and_reallocation() {
    let sizes = [1_000_000, 100_000_000, 1_000_000_000, 20_000_000_000];
    let cl = partition(&sizes, BDP, MIB, &Cutoffs::default()).expect("valid");
    let mut a = Allocation::new(&cl, 6, Policy::MultiCluster);
    // Order Huge, Small, Large, Middle.
    assert_eq!(
        a.shares(),
        vec![
            (FileClass::Huge, 2),
            (FileClass::Small, 2),
            (FileClass::Large, 1),
            (FileClass::Middle, 1)
        ]
    );
    a.finish(FileClass::Huge);
    assert_eq!(
        a.shares(),
        vec![
            (FileClass::Small, 2),
            (FileClass::Large, 2),
            (FileClass::Middle, 2)
        ]
    );
    a.resize(4);
    assert_eq!(
        a.channels(FileClass::Small) + a.channels(FileClass::Large) + a.channels(FileClass::Middle),
        4
    );
    assert_eq!(a.channels(FileClass::Huge), 0);
}

#[test]
fn promc_allocates_by_cluster_size() {
    let mut sizes = vec![1_000_000u64; 1000]; // 1 GB of small files
    sizes.push(20_000_000_000); // 20 GB huge file
    let cl = partition(&sizes, BDP, MIB, &Cutoffs::default()).expect("valid");
    let mut a = Allocation::new(&cl, 12, Policy::ProMc);
    assert_eq!(
        a.channels(FileClass::Huge) + a.channels(FileClass::Small),
        12
    );
    assert!(a.channels(FileClass::Huge) >= 10, "{:?}", a.shares());
    assert!(a.channels(FileClass::Small) >= 1);
    a.set_remaining(FileClass::Huge, 1_000_000);
    a.resize(12);
    assert!(
        a.channels(FileClass::Small) >= 10,
        "re-weighted {:?}",
        a.shares()
    );
    a.finish(FileClass::Small);
    assert_eq!(a.shares(), vec![(FileClass::Huge, 12)]);
}
