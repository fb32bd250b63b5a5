//! `haul cp`'s local side against a real `haul serve`: what it does with links planted next to
//! the destination, with missing destination directories, with nonsense counts, and how it says
//! that nothing was verified.
mod common;

use common::haul::*;

use std::fs;
use std::path::Path;

/// A writable served tree with one file `f` of `n` random bytes and a directory `d` holding
/// `d/g`, and a local `out` directory.
fn served(dir: &Path, n: usize) -> (Serve, Vec<u8>) {
    let root = dir.join("root");
    fs::create_dir_all(root.join("d")).unwrap();
    fs::create_dir_all(dir.join("out")).unwrap();
    let data = random_bytes(n, 9);
    fs::write(root.join("f"), &data).unwrap();
    fs::write(root.join("d/g"), &data).unwrap();
    (serve(&root, &["--anonymous", "--anonymous-write"]), data)
}

/// Finding 15: a symbolic link planted at the part-file name is an error naming it, and the file
/// it points to is left alone.
#[test]
fn a_symlink_at_the_part_file_name_is_refused_not_followed() {
    let dir = tempfile::tempdir().unwrap();
    let (s, _) = served(dir.path(), 100_000);
    let victim = dir.path().join("victim");
    fs::write(&victim, b"precious").unwrap();
    let dst = dir.path().join("out/f");
    std::os::unix::fs::symlink(&victim, dir.path().join("out/f.haul-part")).unwrap();
    let out = cp(
        &[&format!("ftp://{}/f", s.addr), dst.to_str().unwrap()],
        &dir.path().join("h.sqlite"),
    );
    assert!(
        !out.status.success(),
        "a download wrote through a planted link"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("f.haul-part: symbolic link"),
        "the error names the link"
    );
    assert_eq!(fs::read(&victim).unwrap(), b"precious");
    assert!(
        fs::symlink_metadata(&dst).is_err(),
        "nothing landed at the destination"
    );
}

/// `cp` does not create missing parents of the destination unless asked (`--mkdir`); `cp -r`
/// creates the destination directory itself and what is below it.
#[test]
fn missing_destination_parents_are_an_error_unless_mkdir() {
    let dir = tempfile::tempdir().unwrap();
    let (s, data) = served(dir.path(), 1000);
    let hist = dir.path().join("h.sqlite");
    let (f, d) = (format!("ftp://{}/f", s.addr), format!("ftp://{}/d", s.addr));
    let out_dir = dir.path().join("out");
    let deep = out_dir.join("no/such/f");
    let out = cp(&[&f, deep.to_str().unwrap()], &hist);
    assert_eq!(
        out.status.code(),
        Some(5),
        "a missing parent is a missing path"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("out/no/such"),
        "the error names the directory"
    );
    assert!(
        !out_dir.join("no").exists(),
        "a parent was created without --mkdir"
    );
    assert!(cp(&["--mkdir", &f, deep.to_str().unwrap()], &hist)
        .status
        .success());
    assert_eq!(fs::read(&deep).unwrap(), data);
    assert!(cp(&["-r", &d, out_dir.join("t").to_str().unwrap()], &hist)
        .status
        .success());
    assert_eq!(fs::read(out_dir.join("t/g")).unwrap(), data);
    let nested = out_dir.join("x/y");
    assert_eq!(
        cp(&["-r", &d, nested.to_str().unwrap()], &hist)
            .status
            .code(),
        Some(5)
    );
    assert!(!out_dir.join("x").exists());
    assert!(cp(&["-r", "--mkdir", &d, nested.to_str().unwrap()], &hist)
        .status
        .success());
    assert_eq!(fs::read(nested.join("g")).unwrap(), data);
    // Uploads: --mkdir makes the remote parents too.
    let up = format!("ftp://{}/up/deep/f", s.addr);
    assert!(!cp(&[deep.to_str().unwrap(), &up], &hist).status.success());
    assert!(cp(&["--mkdir", deep.to_str().unwrap(), &up], &hist)
        .status
        .success());
    assert_eq!(fs::read(dir.path().join("root/up/deep/f")).unwrap(), data);
}

/// `-p 0`, `-c 0` and `--pipeline 0` are usage errors (exit 2), not quietly 1.
#[test]
fn zero_streams_sessions_or_pipeline_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let dst = dir.path().join("x");
    for flag in ["-p", "-c", "--pipeline"] {
        let out = cp(
            &[flag, "0", "ftp://127.0.0.1:1/f", dst.to_str().unwrap()],
            &dir.path().join("h.sqlite"),
        );
        assert_eq!(out.status.code(), Some(2), "{flag} 0 was accepted");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("'0'"),
            "the error names the value"
        );
    }
    let out = cp(
        &["-p", "65", "ftp://127.0.0.1:1/f", dst.to_str().unwrap()],
        &dir.path().join("h.sqlite"),
    );
    assert_eq!(
        out.status.code(),
        Some(2),
        "-p above the engine's 64 streams is refused, not cut"
    );
}

/// `--no-verify` says plainly that nothing was checked, for people and in `--json`.
#[test]
fn no_verify_says_plainly_that_nothing_was_checked() {
    let dir = tempfile::tempdir().unwrap();
    let (s, _) = served(dir.path(), 1000);
    let hist = dir.path().join("h.sqlite");
    let f = format!("ftp://{}/f", s.addr);
    let dst = dir.path().join("out/f");
    let out = cp(&["--no-verify", &f, dst.to_str().unwrap()], &hist);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("NOT verified") && text.contains("nothing was checked"),
        "{text}"
    );
    let json = |extra: &[&str]| -> serde_json::Value {
        let mut args = vec!["--json", f.as_str(), dst.to_str().unwrap()];
        args.splice(0..0, extra.iter().copied());
        serde_json::from_slice(&cp(&args, &hist).stdout).unwrap()
    };
    let j = json(&["--no-verify"]);
    assert_eq!(
        j["verification"],
        "skipped: --no-verify, nothing was checked"
    );
    assert_eq!(
        (j["verified_files"].as_u64(), j["unverified_files"].as_u64()),
        (Some(0), Some(1))
    );
    let j = json(&[]);
    assert_eq!(j["verification"], "checksum");
    assert_eq!(
        (j["verified_files"].as_u64(), j["unverified_files"].as_u64()),
        (Some(1), Some(0))
    );
}
