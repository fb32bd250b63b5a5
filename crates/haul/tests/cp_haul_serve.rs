//! `haul cp` against `haul serve`, both as real binaries: TLS (`haul://`) both ways, a killed
//! upload resumed from the server's restart markers, and a rejected login's exit code.
mod common;

use common::haul::*;

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn tls_download_and_upload() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    fs::create_dir(&root).unwrap();
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    fs::write(&cert, ck.cert.pem()).unwrap();
    fs::write(&key, ck.key_pair.serialize_pem()).unwrap();
    let data = random_bytes(5 << 20, 21);
    fs::write(root.join("f"), &data).unwrap();
    let s = serve(
        &root,
        &[
            "--anonymous",
            "--anonymous-write",
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
        ],
    );
    let port = s.addr.rsplit(':').next().unwrap();
    let hist = dir.path().join("h.sqlite");
    let dl = dir.path().join("dl");
    let url = format!("haul://localhost:{port}/f");
    let out = cp(
        &[
            "-p",
            "3",
            "--json",
            "--ca",
            cert.to_str().unwrap(),
            &url,
            dl.to_str().unwrap(),
        ],
        &hist,
    );
    assert!(out.status.success());
    assert_eq!(fs::read(&dl).unwrap(), data);
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["checksum"], "XXHC", "haul peers verify with XXHC");
    let up = format!("haul://localhost:{port}/up");
    assert!(cp(
        &[
            "-p",
            "3",
            "--ca",
            cert.to_str().unwrap(),
            dl.to_str().unwrap(),
            &up
        ],
        &hist
    )
    .status
    .success());
    assert_eq!(fs::read(root.join("up")).unwrap(), data);
    // Without the CA the client refuses to talk.
    let other = tempfile::NamedTempFile::new().unwrap();
    fs::write(
        other.path(),
        rcgen::generate_simple_self_signed(vec!["localhost".into()])
            .unwrap()
            .cert
            .pem(),
    )
    .unwrap();
    let out = cp(
        &[
            "--ca",
            other.path().to_str().unwrap(),
            &url,
            dir.path().join("x").to_str().unwrap(),
        ],
        &hist,
    );
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("TLS"),
        "the error names TLS"
    );
}

#[test]
fn killed_upload_resumes_from_restart_markers() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    fs::create_dir(&root).unwrap();
    let size = 40 << 20;
    let data = random_bytes(size, 5);
    let src = dir.path().join("src.bin");
    fs::write(&src, &data).unwrap();
    fs::write(root.join("up.bin"), b"old contents").unwrap();
    let s = serve(&root, &["--anonymous", "--anonymous-write"]);
    let hist = dir.path().join("h.sqlite");
    let state = dir.path().join("state");
    let url = format!("ftp://{}/up.bin", s.addr);
    let mut child = Command::new(env!("CARGO_BIN_EXE_haul"))
        .args([
            "cp",
            "-p",
            "2",
            "--max-rate",
            "10MiB/s",
            "--sample-ms",
            "100",
            src.to_str().unwrap(),
            &url,
        ])
        .arg("--history")
        .arg(&hist)
        .env("XDG_STATE_HOME", &state)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let journal_dir = state.join("haul/resume");
    let deadline = Instant::now() + Duration::from_secs(30);
    let held = loop {
        let held: u64 = fs::read_dir(&journal_dir)
            .map(|rd| {
                rd.filter_map(Result::ok)
                    .filter_map(|e| fs::read_to_string(e.path()).ok())
                    .filter_map(|t| haul_proto::RangeSet::parse(&t).ok())
                    .map(|r| r.covered())
                    .sum()
            })
            .unwrap_or(0);
        if held >= 8 << 20 {
            break held;
        }
        assert!(Instant::now() < deadline, "no restart marker journaled");
        assert!(
            child.try_wait().unwrap().is_none(),
            "upload ended before it could be killed"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(
        fs::read(root.join("up.bin")).unwrap(),
        b"old contents",
        "an unfinished upload must not replace the target"
    );

    let out = Command::new(env!("CARGO_BIN_EXE_haul"))
        .args([
            "cp",
            "--resume",
            "--json",
            "-p",
            "2",
            src.to_str().unwrap(),
            &url,
        ])
        .arg("--history")
        .arg(&hist)
        .env("XDG_STATE_HOME", &state)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        j["bytes"].as_u64().unwrap() <= size as u64 - held,
        "resume re-sent bytes the server held: {j}"
    );
    assert_eq!(j["verified_files"], 1);
    assert_eq!(
        fs::read(root.join("up.bin")).unwrap(),
        data,
        "resumed upload differs"
    );
}

#[test]
fn bad_credentials_exit_4_and_name_the_cause() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("users"), "alice:$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHQ$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA:rw\n").unwrap();
    let s = serve(
        dir.path(),
        &["--users", dir.path().join("users").to_str().unwrap()],
    );
    let out = cp(
        &[
            &format!("ftp://alice:wrong@{}/users", s.addr),
            dir.path().join("x").to_str().unwrap(),
        ],
        &dir.path().join("h.sqlite"),
    );
    assert_eq!(out.status.code(), Some(4));
    assert!(String::from_utf8_lossy(&out.stderr).contains("authentication failed"));
    assert!(!dir.path().join("x").exists());
}

#[test]
fn tune_searches_concurrency_on_the_live_transfer_and_records_it() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let tree = root.join("tree");
    fs::create_dir_all(&tree).unwrap();
    for i in 0..400u64 {
        fs::write(
            tree.join(format!("f{i:03}")),
            random_bytes((64 << 10) | ((i as usize * 977) % 300_000), i),
        )
        .unwrap();
    }
    // Files under 1 kB are below one BDP on any path (the BDP is at least one 1500-byte packet),
    // and on loopback (RTT well under 0.5 ms, 1 Gb/s prior) the 64 kB+ files are at or above it,
    // so the tree makes at least two clusters.
    let tiny: Vec<String> = (0..40).map(|i| format!("t{i:02}")).collect();
    for (i, name) in tiny.iter().enumerate() {
        fs::write(tree.join(name), random_bytes(100 + i * 20, 1000 + i as u64)).unwrap();
    }
    let s = serve(&root, &["--anonymous"]);
    let hist = dir.path().join("h.sqlite");
    let out_dir = dir.path().join("out");
    // A per-file cap of 1 MB/s makes files in flight pay off and keeps the copy (~4 s) long
    // enough for search samples (0.4 s settle + a 1 s window each) to end even when readings
    // are noisy: at 10 MB/s, and at 4 MB/s once the search started at one channel per cluster,
    // the copy took under 2.3 s and sometimes ended before the first sample did.
    let out = cp(
        &[
            "--tune",
            "--json",
            "--sample-ms",
            "100",
            "-r",
            "-p",
            "1",
            "--pipeline",
            "4",
            "--max-rate",
            "1MiB/s",
            &format!("ftp://{}/tree", s.addr),
            out_dir.to_str().unwrap(),
        ],
        &hist,
    );
    assert!(out.status.success());
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["verified_files"], 440);
    let steps = j["tuning"].as_array().expect("tuning steps in the summary");
    assert!(!steps.is_empty(), "the search measured at least one level");
    // Without history the search starts at one channel per file-size cluster.
    let clusters = j["clusters"]
        .as_array()
        .expect("clusters in the summary")
        .len() as u64;
    assert!(clusters >= 2, "{}", j["clusters"]);
    let start = steps[0]["concurrency"].as_u64().unwrap();
    assert_eq!(
        start, clusters,
        "a host pair without history starts at one channel per cluster"
    );
    assert!(
        steps.iter().any(|s| s["next"].as_u64().unwrap() > start),
        "the search raised concurrency"
    );
    for name in (0..400u64).map(|i| format!("f{i:03}")).chain(tiny) {
        assert_eq!(
            fs::read(out_dir.join(&name)).unwrap(),
            fs::read(tree.join(&name)).unwrap(),
            "{name}"
        );
    }
    let shown = Command::new(env!("CARGO_BIN_EXE_haul"))
        .args(["history", "--json", "--history"])
        .arg(&hist)
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&shown.stdout).contains("\"tuning\""),
        "the search is kept in the history"
    );
}

#[test]
fn clusters_split_a_mixed_tree_give_each_its_own_settings_and_every_file_arrives() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let tree = root.join("tree");
    fs::create_dir_all(&tree).unwrap();
    // A loopback RTT is tens of µs; with --bandwidth 400gbit the BDP is about 1-5 MB, so these
    // sizes (4 KB ... 24 MB) spread over several clusters whatever the exact RTT.
    let sizes: Vec<usize> = (0..60)
        .map(|i| 4_000 + i * 97)
        .chain((0..6).map(|i| 300_000 + i * 50_000))
        .chain([24 << 20, 20 << 20])
        .collect();
    for (i, n) in sizes.iter().enumerate() {
        fs::write(
            tree.join(format!("f{i:03}")),
            random_bytes(*n, i as u64 + 7),
        )
        .unwrap();
    }
    let s = serve(&root, &["--anonymous"]);
    let out_dir = dir.path().join("out");
    for policy in ["mc", "promc"] {
        let _ = fs::remove_dir_all(&out_dir);
        let out = cp(
            &[
                "--json",
                "-r",
                "-c",
                "3",
                "--clusters",
                policy,
                "--bandwidth",
                "400gbit",
                &format!("ftp://{}/tree", s.addr),
                out_dir.to_str().unwrap(),
            ],
            &dir.path().join("h.sqlite"),
        );
        assert!(out.status.success());
        let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(j["verified_files"], sizes.len());
        let clusters = j["clusters"].as_array().expect("clusters in the summary");
        assert!(
            clusters.len() >= 2,
            "a mixed tree makes more than one cluster: {clusters:?}"
        );
        assert_eq!(
            clusters
                .iter()
                .map(|c| c["files"].as_u64().unwrap())
                .sum::<u64>(),
            sizes.len() as u64
        );
        // The smallest files' cluster pipelines deeper than the biggest files' cluster.
        let depth = |class: &str| {
            clusters
                .iter()
                .find(|c| c["class"] == class)
                .map(|c| c["pipelining"].as_u64().unwrap())
        };
        let smallest = ["Small", "Middle", "Large", "Huge"]
            .iter()
            .find_map(|c| depth(c))
            .unwrap();
        let biggest = ["Huge", "Large", "Middle", "Small"]
            .iter()
            .find_map(|c| depth(c))
            .unwrap();
        assert!(smallest > biggest, "{clusters:?}");
        for i in 0..sizes.len() {
            let name = format!("f{i:03}");
            assert_eq!(
                fs::read(out_dir.join(&name)).unwrap(),
                fs::read(tree.join(&name)).unwrap(),
                "{name}"
            );
        }
    }
    let bad = cp(
        &[
            "--clusters",
            "fifo",
            &format!("ftp://{}/tree", s.addr),
            out_dir.to_str().unwrap(),
        ],
        &dir.path().join("h.sqlite"),
    );
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("expected mc, promc or off"));
}

/// Writes `f0`, `f1`, … under `tree` with `sizes[i]` random bytes from seed `seed + i`.
fn write_files(tree: &Path, sizes: &[usize], seed: u64) {
    fs::create_dir_all(tree).unwrap();
    for (i, n) in sizes.iter().enumerate() {
        fs::write(
            tree.join(format!("f{i}")),
            random_bytes(*n, seed + i as u64),
        )
        .unwrap();
    }
}

/// Each of the `n` files [`write_files`] wrote arrived in `out_dir` byte for byte, with no
/// `.haul-part` left behind.
fn assert_arrived_whole(tree: &Path, out_dir: &Path, n: usize) {
    for i in 0..n {
        let name = format!("f{i}");
        assert_eq!(
            fs::read(out_dir.join(&name)).unwrap(),
            fs::read(tree.join(&name)).unwrap(),
            "{name}"
        );
        assert!(
            !out_dir.join(format!("{name}.haul-part")).exists(),
            "{name}.haul-part left behind"
        );
    }
}

#[test]
fn big_files_move_in_pieces_over_free_channels_and_arrive_whole() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let tree = root.join("tree");
    // 9.5 MiB: 9 pieces of 1 MiB (the last 1.5 MiB); 3 MiB: 3; 1.5 MiB and the small files: whole.
    let sizes = [(19 << 20) / 2, 3 << 20, 3 << 19, 1000, 70_000];
    write_files(&tree, &sizes, 40);
    let s = serve(&root, &["--anonymous"]);
    let out_dir = dir.path().join("out");
    fs::create_dir_all(&out_dir).unwrap();
    // A stale, longer partial file from an earlier run must not leave its tail in the result.
    fs::write(out_dir.join("f0.haul-part"), vec![0xAB; 12 << 20]).unwrap();
    let hist = dir.path().join("h.sqlite");
    let args = |piece: &'static str| {
        vec![
            "--json".to_string(),
            "-r".into(),
            "-c".into(),
            "4".into(),
            "--piece-size".into(),
            piece.into(),
            format!("ftp://{}/tree", s.addr),
            out_dir.display().to_string(),
        ]
    };
    let out = cp(
        &args("1M").iter().map(String::as_str).collect::<Vec<_>>(),
        &hist,
    );
    assert!(out.status.success());
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["pieces"], 12);
    assert_eq!(j["files"], sizes.len());
    assert_eq!(
        j["verified_files"],
        sizes.len(),
        "split files are verified whole"
    );
    assert_eq!(
        j["retransferred_files"], 0,
        "the stale tail was cut, so nothing mismatched"
    );
    assert_eq!(j["bytes"], sizes.iter().sum::<usize>());
    assert_arrived_whole(&tree, &out_dir, sizes.len());
    // Off: every file moves whole.
    fs::remove_dir_all(&out_dir).unwrap();
    let out = cp(
        &args("off").iter().map(String::as_str).collect::<Vec<_>>(),
        &hist,
    );
    assert!(out.status.success());
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["pieces"], 0);
    assert_eq!(
        fs::read(out_dir.join("f0")).unwrap(),
        fs::read(tree.join("f0")).unwrap()
    );
    // A piece under 1 MiB is refused before anything moves.
    let out = cp(
        &args("100K").iter().map(String::as_str).collect::<Vec<_>>(),
        &hist,
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("a piece must be at least 1M"));
}

#[test]
fn the_last_bytes_are_cut_into_shares_and_arrive_whole() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let tree = root.join("tree");
    // 24 MiB: 3 pieces of 8 MiB as planned; 6 MiB moves whole as planned. With four channels
    // the end-of-transfer cut hands out shares of 1-4 MiB instead (its floor for 8 MiB pieces
    // is 1 MiB), including from the whole file.
    let sizes = [24 << 20, 6 << 20, 2000, 50_000];
    write_files(&tree, &sizes, 70);
    let s = serve(&root, &["--anonymous"]);
    let out_dir = dir.path().join("out");
    let hist = dir.path().join("h.sqlite");
    let url = format!("ftp://{}/tree", s.addr);
    let out = cp(
        &[
            "--json",
            "-r",
            "-c",
            "4",
            "--piece-size",
            "8M",
            &url,
            &out_dir.display().to_string(),
        ],
        &hist,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        j["pieces"].as_u64().unwrap() > 3,
        "the last bytes were not cut: {}",
        j["pieces"]
    );
    assert_eq!(j["files"], sizes.len());
    assert_eq!(
        j["verified_files"],
        sizes.len(),
        "cut files are verified whole"
    );
    assert_eq!(j["retransferred_files"], 0);
    assert_eq!(j["bytes"], sizes.iter().sum::<usize>());
    assert_arrived_whole(&tree, &out_dir, sizes.len());
}

#[test]
fn engine_trace_lists_each_sessions_batch_per_sample() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    fs::create_dir_all(root.join("tree")).unwrap();
    for i in 0..4 {
        fs::write(
            root.join(format!("tree/f{i}")),
            random_bytes(300_000, i + 70),
        )
        .unwrap();
    }
    let s = serve(&root, &["--anonymous"]);
    let out = dir.path().join("out");
    // Two sessions, two files a batch, each file capped at 1 MB/s: about 0.6 s, several samples.
    let (src, dst) = (format!("ftp://{}/tree", s.addr), out.display().to_string());
    let args = [
        "-q",
        "-r",
        "-c",
        "2",
        "--pipeline",
        "2",
        "--max-rate",
        "1MiB/s",
        "--sample-ms",
        "100",
        &src,
        &dst,
    ];
    let run = cp_env(
        &args,
        &dir.path().join("h.sqlite"),
        &[("HAUL_LOG", "haul_xfer::engine=trace"), ("NO_COLOR", "1")],
    );
    assert!(run.status.success());
    let err = String::from_utf8_lossy(&run.stderr);
    let lines: Vec<&str> = err.lines().filter(|l| l.contains("sessions ")).collect();
    assert!(lines.len() >= 2, "one line per sample:\n{err}");
    // Each session's slot, whole files (f), their count and size, and the batch's age.
    assert!(
        lines
            .iter()
            .any(|l| l.contains("0:f2/0.6MB/") && l.contains("1:f2/0.6MB/")),
        "{err}"
    );
    assert_eq!(
        fs::read(out.join("f3")).unwrap(),
        fs::read(root.join("tree/f3")).unwrap()
    );
}

/// A tree of several directories is listed over more than one control session at once (each
/// listing waits on round trips); the tree arrives whole and the walk names its sessions.
#[test]
fn a_tree_of_many_directories_is_listed_over_several_sessions_and_arrives_whole() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let mut n = 0;
    for d in ["a", "b", "c/d", "c/e", "c/e/f", "g"] {
        let t = root.join("tree").join(d);
        write_files(&t, &[1000, 70_000], n);
        n += 2;
    }
    let s = serve(&root, &["--anonymous"]);
    let out = dir.path().join("out");
    let src = format!("ftp://{}/tree", s.addr);
    let run = cp_env(
        &["-q", "-r", &src, out.to_str().unwrap()],
        &dir.path().join("h.sqlite"),
        &[("HAUL_LOG", "haul_xfer::walk=debug"), ("NO_COLOR", "1")],
    );
    assert!(run.status.success());
    let err = String::from_utf8_lossy(&run.stderr);
    let walk = err.lines().find(|l| l.contains("listed")).unwrap_or("");
    assert!(
        walk.contains("sessions=4") && walk.contains("dirs=7") && walk.contains("files=12"),
        "{err}"
    );
    for d in ["a", "b", "c/d", "c/e", "c/e/f", "g"] {
        for f in fs::read_dir(root.join("tree").join(d)).unwrap() {
            let f = f.unwrap();
            if f.file_type().unwrap().is_file() {
                let rel = f.path().strip_prefix(root.join("tree")).unwrap().to_owned();
                assert_eq!(
                    fs::read(out.join(&rel)).unwrap(),
                    fs::read(f.path()).unwrap()
                );
            }
        }
    }
}
