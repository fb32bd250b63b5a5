use super::*;

fn job(i: usize, size: u64) -> Job {
    Job::new(format!("s{i}"), format!("d{i}"), size)
}

/// 1 Gb/s, 40 ms: BDP 5 MB; default cut-offs 0.5 MB / 5 MB / 100 MB.
fn clustering(policy: Policy) -> Clustering {
    let path = PathEstimate {
        rtt_s: 0.040,
        bandwidth_bps: 1e9,
        bandwidth_given: false,
        buffer: 4e6,
    };
    Clustering {
        path,
        cutoffs: Cutoffs::default(),
        policy,
    }
}

fn mixed() -> Vec<Job> {
    let mut v: Vec<Job> = (0..100)
        .map(|i| job(i, 100_000 + 9_000 * i as u64))
        .collect();
    v.extend((0..4).map(|i| job(1000 + i, 200_000_000)));
    v
}

#[test]
fn clusters_get_the_thesis_heuristic() {
    let q = Queues::clustered(mixed(), clustering(Policy::MultiCluster), 4, 8, None);
    let classes: Vec<FileClass> = q.clusters().iter().map(|c| c.class).collect();
    assert_eq!(
        classes,
        vec![FileClass::Huge, FileClass::Small, FileClass::Middle]
    );
    let small = &q.clusters()[1];
    // pp = BDP / avg small size, rounded.
    let avg = small.bytes as f64 / small.files as f64;
    assert_eq!(small.pipelining, (5e6 / avg).round() as u32);
    assert_eq!(small.parallelism, 1);
    let huge = &q.clusters()[0];
    assert_eq!(
        (huge.pipelining, huge.parallelism),
        (1, 2),
        "⌈5 MB / 4 MB⌉ = 2 streams; big files one at a time"
    );
    assert_eq!(q.len(), 104);
}

#[test]
fn slots_follow_the_round_robin_shares_then_steal() {
    let mut q = Queues::clustered(mixed(), clustering(Policy::MultiCluster), 3, 8, None);
    // MC order Huge, Small, Large, Middle over the present clusters: one channel each.
    assert_eq!(
        q.shares(),
        vec![
            (FileClass::Huge, 1),
            (FileClass::Small, 1),
            (FileClass::Middle, 1)
        ]
    );
    let b = q.take(0, 3).unwrap();
    assert!(b.jobs.iter().all(|(j, _)| j.size == 200_000_000));
    assert_eq!(b.jobs.len(), 1);
    let b = q.take(1, 3).unwrap();
    assert!(b.jobs.iter().all(|(j, _)| j.size < 500_000));
    // Drain the Huge lane: slot 0 must then get other work, and its channel moves.
    while q
        .take(0, 3)
        .is_some_and(|b| b.jobs[0].0.size == 200_000_000)
    {}
    assert!(
        q.shares().iter().all(|s| s.0 != FileClass::Huge),
        "{:?}",
        q.shares()
    );
    let mut n = 0;
    while q.take(2, 3).is_some() {
        n += 1;
    }
    assert!(n > 0);
    assert!(q.is_empty());
    assert!(q.take(0, 3).is_none());
}

#[test]
fn each_lane_hands_out_its_largest_files_first() {
    // Huge files listed smallest first, as names can order them.
    let mut jobs: Vec<Job> = (0..3).map(|i| job(i, 100_000 + i as u64)).collect();
    jobs.extend((0..4).map(|i| job(1000 + i, 200_000_000 + 1_000_000 * i as u64)));
    let mut q = Queues::clustered(jobs, clustering(Policy::MultiCluster), 1, 8, None);
    let mut sizes = Vec::new();
    while let Some(b) = q.take(0, 1) {
        sizes.extend(b.jobs.iter().map(|(j, _)| j.size));
    }
    let huge: Vec<u64> = sizes
        .iter()
        .copied()
        .filter(|&s| s >= 200_000_000)
        .collect();
    assert_eq!(huge, [203_000_000, 202_000_000, 201_000_000, 200_000_000]);
    let small: Vec<u64> = sizes.iter().copied().filter(|&s| s < 200_000_000).collect();
    assert_eq!(small, [100_002, 100_001, 100_000]);
}

#[test]
fn big_files_are_clustered_whole_then_handed_out_a_piece_at_a_time() {
    let mut q = Queues::clustered(
        mixed(),
        clustering(Policy::MultiCluster),
        3,
        8,
        Some(60_000_000),
    );
    // Clusters count files, not pieces: four 200 MB files are still four Huge files.
    let huge = q
        .clusters()
        .iter()
        .find(|c| c.class == FileClass::Huge)
        .unwrap();
    assert_eq!((huge.files, huge.bytes), (4, 800_000_000));
    // 200 MB = 3 pieces of 60 MB (the last takes the rest): 12 pieces + 100 small files.
    assert_eq!(q.len(), 100 + 12);
    let mut landed: std::collections::HashMap<String, u64> = Default::default();
    let mut seen_pieces = 0;
    let mut cut = 0;
    while let Some(b) = q.take(seen_pieces % 3, 3) {
        let pieces = b.jobs.iter().filter(|(j, _)| j.piece.is_some()).count();
        assert!(
            pieces == 0 || b.jobs.len() == 1,
            "a piece travels alone: {:?}",
            b.jobs
        );
        seen_pieces += pieces;
        cut += b.split.map_or(0, |s| s.1);
        for (j, _) in b.jobs {
            *landed.entry(j.dst).or_default() += j.size;
        }
    }
    // The last 360 MB are cut into shares for the three channels.
    assert!(cut > 0);
    assert_eq!(seen_pieces, 12 + cut);
    let sizes: std::collections::HashMap<String, u64> =
        mixed().into_iter().map(|j| (j.dst, j.size)).collect();
    assert_eq!(
        landed, sizes,
        "every byte of every file is handed out exactly once"
    );
}

/// Takes everything with `channels` channels; returns each file's ranges in the order
/// handed out and, per file, the pieces the cuts added.
type Drained = (
    Vec<(String, u64, u64)>,
    std::collections::HashMap<String, usize>,
);

fn drain(q: &mut Queues, channels: u32) -> Drained {
    let mut got = Vec::new();
    let mut added: std::collections::HashMap<String, usize> = Default::default();
    let mut slot = 0;
    while let Some(b) = q.take(slot % channels as usize, channels) {
        slot += 1;
        if let Some((dst, n)) = b.split {
            *added.entry(dst).or_default() += n;
        }
        for (j, _) in b.jobs {
            let off = j.piece.map_or(0, |p| p.offset);
            got.push((j.dst, off, j.size));
        }
    }
    (got, added)
}

#[test]
fn the_last_bytes_are_cut_into_shares_for_every_channel() {
    const MIB: u64 = 1 << 20;
    // One 1 GiB file in 64 MiB pieces, four channels.
    let mut q = Queues::single(vec![job(0, 1024 * MIB)], 8, Some(64 * MIB));
    let (got, added) = drain(&mut q, 4);
    let sizes: Vec<u64> = got.iter().map(|g| g.2 / MIB).collect();
    // Whole pieces while 8 pieces' worth or more waits (half an even share is a piece or
    // more), then shares of the rest, down to the 8 MiB floor for the last round: here
    // 64 x 11, 40, 24, 32, 32, 24, 21, 19, 16, 14, 13, 11, 10, then 8 x 8.
    assert_eq!(sizes[..9], [64; 9], "{sizes:?}");
    assert!(
        sizes.len() > 15,
        "the last planned pieces are cut: {sizes:?}"
    );
    assert!(sizes.iter().all(|&s| (8..=64).contains(&s)), "{sizes:?}");
    assert_eq!(sizes[sizes.len() - 8..], [8; 8], "{sizes:?}");
    // The ranges tile the file, and the engine's count of pieces stays right: 16 planned,
    // plus one per cut.
    let mut at = 0;
    for (_, off, len) in &got {
        assert_eq!(*off, at);
        at += len;
    }
    assert_eq!(at, 1024 * MIB);
    assert_eq!(got.len(), 16 + added["d0"]);
}

#[test]
fn a_last_piece_longer_than_a_piece_goes_out_in_halves() {
    const MIB: u64 = 1 << 20;
    // 160 MiB in 64 MiB pieces: 64 + 96 as planned. With a gigabyte of other files
    // waiting, nothing else is cut, but the 96 MiB remainder goes out as 48 + 48.
    let mut jobs = vec![job(0, 160 * MIB)];
    jobs.extend((1..=100).map(|i| job(i, 10 * MIB)));
    let mut q = Queues::single(jobs, 8, Some(64 * MIB));
    let b = q.take(0, 4).unwrap();
    assert_eq!((b.jobs[0].0.size, b.split.is_none()), (64 * MIB, true));
    let b = q.take(0, 4).unwrap();
    assert_eq!(b.jobs.len(), 1);
    assert_eq!(
        (b.jobs[0].0.size, b.jobs[0].0.piece.map(|p| p.offset)),
        (48 * MIB, Some(64 * MIB))
    );
    assert_eq!(b.split, Some(("d0".to_string(), 1)));
    let b = q.take(0, 4).unwrap();
    assert_eq!(
        (b.jobs[0].0.size, b.jobs[0].0.piece.map(|p| p.offset)),
        (48 * MIB, Some(112 * MIB))
    );
    // The whole 10 MiB files that follow are not cut while a gigabyte waits.
    let b = q.take(0, 4).unwrap();
    assert!(
        b.split.is_none()
            && b.jobs
                .iter()
                .all(|(j, _)| j.piece.is_none() && j.size == 10 * MIB)
    );
}

#[test]
fn a_whole_file_left_at_the_end_becomes_pieces() {
    const MIB: u64 = 1 << 20;
    // 40 MiB is under two 64 MiB pieces, so it was planned whole; alone at the end it is cut
    // into 8 MiB shares, the first cut counting two pieces (the file had none).
    let mut q = Queues::single(vec![job(0, 40 * MIB), job(1, MIB)], 8, Some(64 * MIB));
    let (got, added) = drain(&mut q, 4);
    let f0: Vec<(u64, u64)> = got
        .iter()
        .filter(|g| g.0 == "d0")
        .map(|g| (g.1 / MIB, g.2 / MIB))
        .collect();
    assert_eq!(f0, [(0, 8), (8, 8), (16, 8), (24, 8), (32, 8)]);
    assert_eq!(added["d0"], 5);
    assert!(
        !added.contains_key("d1"),
        "a file under two shares moves whole"
    );
    // Without pieces nothing is cut.
    let mut q = Queues::single(vec![job(0, 40 * MIB)], 8, None);
    let (got, added) = drain(&mut q, 4);
    assert_eq!(got, [("d0".to_string(), 0, 40 * MIB)]);
    assert!(added.is_empty());
}

proptest::proptest! {
    #[test]
    fn cuts_tile_every_file_and_count_its_pieces(
        sizes in proptest::collection::vec(0u64..300 << 20, 1..12),
        piece_mib in 1u64..80,
        channels in 1u32..12,
    ) {
        let piece = piece_mib << 20;
        let jobs: Vec<Job> = sizes.iter().enumerate().map(|(i, &n)| job(i, n)).collect();
        let mut q = Queues::clustered(jobs, clustering(Policy::MultiCluster), channels, 8, Some(piece));
        let (got, added) = drain(&mut q, channels);
        for (i, &n) in sizes.iter().enumerate() {
            let dst = format!("d{i}");
            let mut mine: Vec<(u64, u64)> = got.iter().filter(|g| g.0 == dst).map(|g| (g.1, g.2)).collect();
            mine.sort();
            let mut at = 0;
            for (off, len) in &mine {
                proptest::prop_assert_eq!(*off, at, "{} ranges {:?}", dst, mine);
                at += len;
            }
            proptest::prop_assert_eq!(at, n);
            // What the engine counts: the planned pieces plus the cuts' (a file handed out
            // in more than one range must be counted as that many pieces).
            let planned = plan::piece_count(n, piece) as usize;
            let counted = planned + added.get(&dst).copied().unwrap_or(0);
            if mine.len() > 1 || planned > 0 {
                proptest::prop_assert_eq!(counted, mine.len());
            } else {
                proptest::prop_assert_eq!(counted, 0);
            }
            proptest::prop_assert!(mine.iter().all(|r| r.1 >= tail_min(piece).min(n)) || planned > 0 && mine.len() == planned);
        }
    }
}

#[test]
fn a_single_queue_stops_a_batch_before_a_piece() {
    let jobs = vec![job(0, 10), job(1, 10), job(2, 300), job(3, 10)];
    let mut q = Queues::single(jobs, 8, Some(100));
    let sizes = |b: Batch| b.jobs.iter().map(|(j, _)| j.size).collect::<Vec<_>>();
    assert_eq!(sizes(q.take(0, 1).unwrap()), [10, 10]);
    assert_eq!(sizes(q.take(0, 1).unwrap()), [100]);
    assert_eq!(sizes(q.take(0, 1).unwrap()), [100]);
    assert_eq!(sizes(q.take(0, 1).unwrap()), [100]);
    assert_eq!(sizes(q.take(0, 1).unwrap()), [10]);
    assert!(q.take(0, 1).is_none());
}

#[test]
fn reclustering_keeps_pieces_in_their_files_cluster() {
    let mut q = Queues::clustered(
        mixed(),
        clustering(Policy::MultiCluster),
        4,
        8,
        Some(60_000_000),
    );
    assert!(q.set_bandwidth(10e9), "10x: recluster");
    // BDP 50 MB now: 200 MB files are Large (< 20 BDP), and their pieces go with them,
    // counted as the four files they are.
    let large = q
        .clusters()
        .iter()
        .find(|c| c.class == FileClass::Large)
        .expect("a Large cluster");
    assert_eq!((large.files, large.bytes), (4, 800_000_000));
    assert_eq!(q.len(), 100 + 12, "pieces are not cut again");
}

#[test]
fn promc_gives_more_channels_to_the_bigger_cluster() {
    let q = Queues::clustered(mixed(), clustering(Policy::ProMc), 8, 8, None);
    let huge = q
        .shares()
        .iter()
        .find(|s| s.0 == FileClass::Huge)
        .unwrap()
        .1;
    let small = q
        .shares()
        .iter()
        .find(|s| s.0 == FileClass::Small)
        .unwrap()
        .1;
    assert!(huge > small, "{:?}", q.shares());
    assert_eq!(q.shares().iter().map(|s| s.1).sum::<u32>(), 8);
}

#[test]
fn growing_the_channels_reallocates() {
    let mut q = Queues::clustered(mixed(), clustering(Policy::MultiCluster), 2, 8, None);
    assert_eq!(q.shares().iter().map(|s| s.1).sum::<u32>(), 2);
    q.take(5, 9).unwrap();
    assert_eq!(q.shares().iter().map(|s| s.1).sum::<u32>(), 9);
}

#[test]
fn a_new_bandwidth_reclusters_only_waiting_files_and_only_on_a_big_change() {
    let mut q = Queues::clustered(mixed(), clustering(Policy::MultiCluster), 4, 8, None);
    let before = q.clusters().to_vec();
    assert!(!q.set_bandwidth(1.5e9), "within 2x: no change");
    assert!(
        !q.set_bandwidth(0.1e9),
        "a lower throughput is no evidence of a slower link"
    );
    assert!(q.set_bandwidth(10e9), "10x: recluster");
    assert_ne!(q.clusters(), &before[..]);
    assert_eq!(q.len(), 104);
    let mut given = clustering(Policy::MultiCluster);
    given.path.bandwidth_given = true;
    let mut q = Queues::clustered(mixed(), given, 4, 8, None);
    assert!(!q.set_bandwidth(10e9), "a user-given bandwidth stays");
}

#[test]
fn single_queue_uses_the_user_pipeline_and_put_back_files_return() {
    let mut q = Queues::single(mixed(), 8, None);
    let b = q.take(0, 1).unwrap();
    assert_eq!(b.jobs.len(), 8);
    assert_eq!(b.parallelism, 0, "0: the engine's global parallelism");
    let (j, _) = b.jobs.into_iter().next().unwrap();
    q.push_back(j.clone(), 1);
    assert_eq!(q.len(), 104 - 8 + 1);
    let mut q = Queues::clustered(vec![], clustering(Policy::MultiCluster), 2, 8, None);
    q.push_back(j, 1);
    assert_eq!(q.take(0, 2).unwrap().jobs.len(), 1);
}

#[test]
fn files_left_untaken_return_to_the_front_in_order() {
    let small: Vec<Job> = (0..20)
        .map(|i| job(i, 100_000 + 1_000 * i as u64))
        .collect();
    let mut q = Queues::clustered(small, clustering(Policy::MultiCluster), 1, 8, None);
    let before = q.len();
    let b = q.take(0, 1).unwrap();
    let names = |b: &Batch| {
        b.jobs
            .iter()
            .map(|(j, _)| j.dst.clone())
            .collect::<Vec<_>>()
    };
    let taken = names(&b);
    assert!(taken.len() > 2, "{taken:?}");
    // The session moved the first file and left: the rest go back where they were.
    for (j, t) in b.jobs.into_iter().skip(1).rev() {
        q.push_front(j, t);
    }
    assert_eq!(q.len(), before - 1);
    assert_eq!(names(&q.take(0, 1).unwrap())[..taken.len() - 1], taken[1..]);
}
