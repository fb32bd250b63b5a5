//! The transfer engine against a real `haul serve`: lowering the concurrency of a running
//! transfer takes effect after each leaving session's current file, not after its batch, and the
//! files it had taken but not moved are moved by the sessions that stay.
mod common;

use common::haul::*;

use std::fs;
use std::time::{Duration, Instant};

use haul_xfer::{plan::plan, Endpoint, Options, Transfer};

fn wait_until(what: &str, limit: Duration, f: impl Fn() -> bool) -> Duration {
    let t = Instant::now();
    while !f() {
        assert!(t.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    t.elapsed()
}

#[test]
fn a_lowered_concurrency_takes_effect_after_the_current_file_not_the_batch() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("root").join("tree");
    fs::create_dir_all(&tree).unwrap();
    let n = 16;
    let size = 256 << 10;
    for k in 0..n {
        fs::write(tree.join(format!("f{k:02}")), random_bytes(size, 100 + k as u64)).unwrap();
    }
    let s = serve(&dir.path().join("root"), &["--anonymous"]);
    let src = Endpoint::parse(&format!("ftp://{}/tree", s.addr)).unwrap();
    let out = dir.path().join("out");
    let dst = Endpoint::parse(out.to_str().unwrap()).unwrap();
    let (route, jobs) = plan(&src, &dst, true, None, None).unwrap();
    assert_eq!(jobs.len(), n);
    // Two sessions of 8-file batches, each file capped at 256 KiB/s: a batch takes ~8 s.
    let opts = Options {
        concurrency: 2,
        parallelism: 1,
        pipeline: 8,
        max_rate: Some(size as u64),
        sample_interval: Duration::from_millis(100),
        ..Options::default()
    };
    let t = Transfer::start(route, jobs, opts);
    wait_until("two sessions running", Duration::from_secs(10), || t.channels() == 2);
    std::thread::sleep(Duration::from_millis(1500));
    t.set_concurrency(1);
    let took = wait_until("the second session leaves", Duration::from_secs(30), || t.channels() <= 1);
    eprintln!("the lowered level took effect after {took:?}");
    // Its current file has at most ~1 s left; the rest of its batch ~6 s more.
    assert!(took < Duration::from_millis(3500), "the lowered level took effect after {took:?}");
    let sum = t.wait().unwrap();
    assert_eq!(sum.files, n as u64);
    assert_eq!(sum.verified, n as u64, "every file verified, the given-back ones too");
    for k in 0..n {
        let name = format!("f{k:02}");
        assert_eq!(fs::read(out.join(&name)).unwrap(), random_bytes(size, 100 + k as u64), "{name}");
    }
    let leftovers: Vec<_> = fs::read_dir(&out).unwrap().filter_map(|e| e.ok()).filter(|e| e.file_name().len() != 3).collect();
    assert!(leftovers.is_empty(), "no .part files left: {leftovers:?}");
}
