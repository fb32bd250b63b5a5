//! The transfer engine against a real `haul serve`: lowering the concurrency of a running
//! transfer takes effect after each leaving session's current file, not after its batch, and the
//! files it had taken but not moved are moved by the sessions that stay.
mod common;

use common::globus::*;
use common::haul::*;

use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use haul_xfer::plan::{plan, PlanOptions};
use haul_xfer::{Endpoint, Options, Transfer};

fn wait_until(what: &str, limit: Duration, f: impl Fn() -> bool) -> Duration {
    let t = Instant::now();
    while !f() {
        assert!(t.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    t.elapsed()
}

const N: usize = 16;
const SIZE: usize = 256 << 10;

/// Writes the tree the tests move: `N` files of `SIZE` random bytes under `root/tree`.
fn make_tree(root: &Path) {
    let tree = root.join("tree");
    fs::create_dir_all(&tree).unwrap();
    for k in 0..N {
        fs::write(
            tree.join(format!("f{k:02}")),
            random_bytes(SIZE, 100 + k as u64),
        )
        .unwrap();
    }
}

/// Downloads the tree at `url` with two sessions of 8-file batches, each file capped at
/// 256 KiB/s (a batch takes ~8 s), lowers the concurrency to 1 after 1.5 s, and checks that the
/// second session leaves within a file's time and that every file arrives verified.
fn lower_mid_batch(url: &str, out: &Path, context: &dyn Fn() -> String) {
    let src = Endpoint::parse(url).unwrap();
    let dst = Endpoint::parse(out.to_str().unwrap()).unwrap();
    let (route, jobs) = plan(
        &src,
        &dst,
        &PlanOptions {
            recursive: true,
            ..PlanOptions::default()
        },
    )
    .unwrap();
    assert_eq!(jobs.len(), N);
    let opts = Options {
        concurrency: 2,
        parallelism: 1,
        pipeline: 8,
        max_rate: Some(SIZE as u64),
        sample_interval: Duration::from_millis(100),
        ..Options::default()
    };
    let t = Transfer::start(route, jobs, opts);
    wait_until("two sessions running", Duration::from_secs(10), || {
        t.channels() == 2
    });
    std::thread::sleep(Duration::from_millis(1500));
    t.set_concurrency(1);
    let took = wait_until("the second session leaves", Duration::from_secs(30), || {
        t.channels() <= 1
    });
    eprintln!("the lowered level took effect after {took:?}");
    // Its current file has at most ~1 s left; the rest of its batch ~6 s more.
    assert!(
        took < Duration::from_millis(3500),
        "the lowered level took effect after {took:?}"
    );
    let sum = t.wait().unwrap_or_else(|e| panic!("{e}\n{}", context()));
    assert_eq!(sum.files, N as u64);
    assert_eq!(
        sum.verified, N as u64,
        "every file verified, the given-back ones too"
    );
    for k in 0..N {
        let name = format!("f{k:02}");
        assert_eq!(
            fs::read(out.join(&name)).unwrap(),
            random_bytes(SIZE, 100 + k as u64),
            "{name}"
        );
    }
    let leftovers: Vec<_> = fs::read_dir(out)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().len() != 3)
        .collect();
    assert!(
        leftovers.is_empty(),
        "no .part files or journals left: {leftovers:?}"
    );
}

#[test]
fn a_lowered_concurrency_takes_effect_after_the_current_file_not_the_batch() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    make_tree(&root);
    let s = serve(&root, &["--anonymous"]);
    lower_mid_batch(
        &format!("ftp://{}/tree", s.addr),
        &dir.path().join("out"),
        &String::new,
    );
}

/// The same against globus-gridftp-server: the leaving session drops its control connection
/// with `RETR`s and `CKSM`s still queued, and the server must carry on with the other session.
#[test]
fn a_session_leaving_mid_pipeline_is_fine_with_globus_gridftp_server() {
    if skip_without_globus("engine_concurrency") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    make_tree(&root);
    let srv = GlobusServer::start(&root).expect("start globus-gridftp-server");
    lower_mid_batch(&srv.url("tree"), &dir.path().join("out"), &|| {
        srv.diagnostics()
    });
}
